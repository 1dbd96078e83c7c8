// Histogram as JSON: the exact statistics, the percentiles the text report shows, and every non-empty bucket,
// so a reader can recompute any other percentile within the stated error.
#include "output/histogram_json.hpp"

#include <limits>

#include "output/json_text.hpp"

namespace selfperf {

namespace detail {

namespace {

// uint64 where the 128-bit sum fits (always, short of 2^64 total), else its exact decimal string.
nlohmann::ordered_json exact(uint128 value) {
  if (value <= std::numeric_limits<std::uint64_t>::max()) return static_cast<std::uint64_t>(value);
  std::string digits;
  for (; value != 0; value /= 10) digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(value % 10)));
  return digits;
}

}  // namespace

nlohmann::ordered_json histogram_to_json(const Histogram& h, const std::string& title, const std::string& unit) {
  nlohmann::ordered_json out;
  out["title"] = title;
  out["unit"] = unit;
  out["count"] = h.count();
  const bool empty = h.empty();
  // An empty histogram has no minimum, mean or percentiles: null rather than a zero that reads as measured.
  const nlohmann::ordered_json none;
  out["min"] = empty ? none : nlohmann::ordered_json(h.min());
  out["max"] = empty ? none : nlohmann::ordered_json(h.max());
  out["sum"] = exact(h.sum());
  out["mean"] = empty ? none : nlohmann::ordered_json(h.mean());
  out["stddev"] = empty ? none : nlohmann::ordered_json(h.stddev());
  out["max_relative_error"] = Histogram::kMaxRelativeError;
  auto& percentiles = out["percentiles"] = nlohmann::ordered_json::array();
  if (!empty)
    for (double p : {50.0, 90.0, 99.0, 99.9, 99.99, 100.0})
      percentiles.push_back({{"percentile", p}, {"value", h.percentile(p)}});
  auto& buckets = out["buckets"] = nlohmann::ordered_json::array();
  for (const HistogramBucket& b : h.buckets())
    buckets.push_back({{"lowest", b.lowest}, {"highest", b.highest}, {"value", b.value}, {"count", b.count}});
  return out;
}

}  // namespace detail

std::string Histogram::to_json(const HistogramFormat& format) const {
  return detail::dump_json(detail::histogram_to_json(*this, format.title, format.unit));
}

}  // namespace selfperf
