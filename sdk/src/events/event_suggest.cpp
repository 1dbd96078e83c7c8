#include "events/event_suggest.hpp"

#include <algorithm>
#include <array>
#include <utility>

namespace selfperf::detail {
namespace {
constexpr std::size_t kMaxCompared = 64;

char lower(char c) noexcept { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }
}  // namespace

std::size_t edit_distance(std::string_view a, std::string_view b) {
  a = a.substr(0, kMaxCompared);
  b = b.substr(0, kMaxCompared);
  // Three rows suffice for the transposition rule; fixed size keeps this allocation-free.
  std::array<std::array<std::size_t, kMaxCompared + 1>, 3> rows{};
  for (std::size_t j = 0; j <= b.size(); ++j) rows[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    auto& cur = rows[i % 3];
    const auto& prev = rows[(i - 1) % 3];
    const auto& prev2 = rows[(i + 1) % 3];  // row i-2
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      std::size_t best = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) && lower(a[i - 2]) == lower(b[j - 1]))
        best = std::min(best, prev2[j - 2] + 1);
      cur[j] = best;
    }
  }
  return rows[a.size() % 3][b.size()];
}

std::vector<std::string> nearest_names(std::string_view word, const std::vector<std::string>& candidates,
                                       std::size_t max_count) {
  // A typo changes a few characters; beyond about a third of the word it is a different name.
  const std::size_t limit = std::max<std::size_t>(2, std::min(word.size(), kMaxCompared) / 3);
  std::vector<std::pair<std::size_t, std::size_t>> scored;  // (distance, index)
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    std::size_t d = edit_distance(word, candidates[i]);
    if (d <= limit) scored.emplace_back(d, i);
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (const auto& [d, i] : scored) {
    if (out.size() == max_count) break;
    if (std::find(out.begin(), out.end(), candidates[i]) == out.end()) out.push_back(candidates[i]);
  }
  return out;
}

}  // namespace selfperf::detail
