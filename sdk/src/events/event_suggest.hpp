#pragma once
// "Did you mean": nearest known names by edit distance, for unknown events, terms and tracepoints.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace selfperf::detail {

// Optimal-string-alignment distance (insert, delete, substitute, swap of neighbours), case-insensitive.
// Only the first 64 characters of each side count, so hostile input costs bounded work.
std::size_t edit_distance(std::string_view a, std::string_view b);

// Up to `max_count` candidates nearest to `word`, nearest first, ties in candidate order; candidates too
// far away to be a plausible typo are left out, so the result may be empty.
std::vector<std::string> nearest_names(std::string_view word, const std::vector<std::string>& candidates,
                                       std::size_t max_count = 3);

}  // namespace selfperf::detail
