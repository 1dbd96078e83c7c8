#pragma once
// A JSON value as the text every report writes. Its own file: a program that writes only a JSON summary (the
// preload library's) does not link the region report with it, nor, through that, libm.
#include <string>

#include <nlohmann/json.hpp>

namespace selfperf::detail {

// Serialises with invalid UTF-8 (a region named from raw bytes) replaced rather than thrown on.
std::string dump_json(const nlohmann::ordered_json& value);

}  // namespace selfperf::detail
