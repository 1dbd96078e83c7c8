#include "output/json_text.hpp"

namespace selfperf::detail {

std::string dump_json(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace selfperf::detail
