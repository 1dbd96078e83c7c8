// Histogram::to_text: a percentile table and an ASCII distribution on log-spaced rows.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "selfperf/histogram.hpp"

namespace selfperf {

std::uint64_t saturating_round(double x) noexcept {
  if (!(x > 0)) return 0;
  if (x >= 0x1p64) return UINT64_MAX;
  return static_cast<std::uint64_t>(x + 0.5);  // x + 0.5 stays below 2^64: doubles there are 2048 apart
}

std::string format_value(std::uint64_t value, const std::string& unit) {
  char buf[64];
  if (unit == "ns" && value >= 1000) {
    static constexpr struct { double scale; const char* name; } kUnits[] = {{1e9, "s"}, {1e6, "ms"}, {1e3, "us"}};
    for (const auto& u : kUnits) {
      if (static_cast<double>(value) < u.scale) continue;
      const double x = static_cast<double>(value) / u.scale;
      const int decimals = x < 10 ? 2 : x < 100 ? 1 : 0;
      std::snprintf(buf, sizeof buf, "%.*f %s", decimals, x, u.name);
      return buf;
    }
  }
  std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(value));
  return unit.empty() ? std::string(buf) : std::string(buf) + " " + unit;
}

namespace {

void append(std::string& out, const char* fmt, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, args...);
  out += buf;
}

}  // namespace

std::string Histogram::to_text(const HistogramFormat& format) const {
  std::string out;
  const auto fv = [&](std::uint64_t v) { return format_value(v, format.unit); };
  if (!format.title.empty()) out += format.title + ": ";
  if (empty()) {
    out += "no values recorded\n";
    return out;
  }
  append(out, "count %llu  min %s  mean %s  stddev %s  max %s\n", static_cast<unsigned long long>(count()),
         fv(min()).c_str(), fv(saturating_round(mean())).c_str(), fv(saturating_round(stddev())).c_str(), fv(max()).c_str());
  static constexpr struct { double p; const char* name; } kTable[] = {
      {50, "p50"}, {90, "p90"}, {99, "p99"}, {99.9, "p99.9"}, {99.99, "p99.99"}, {100, "max"}};
  for (const auto& row : kTable) append(out, "  %-7s %14s\n", row.name, fv(percentile(row.p)).c_str());

  // Rows are log-spaced between min and max; each non-empty bucket goes to the row of its reported value.
  const double low = static_cast<double>(std::max<std::uint64_t>(min(), 1));
  const double high = static_cast<double>(max());
  std::size_t distinct = 0;
  for (auto b : buckets()) distinct += b.count != 0;
  const std::size_t rows = std::max<std::size_t>(1, std::min({format.rows, distinct, std::size_t{200}}));
  const double span = high > low ? std::log(high / low) : 0.0;
  std::vector<std::uint64_t> row_count(rows, 0);
  for (auto b : buckets()) {
    const double v = static_cast<double>(std::clamp(b.value, min(), max()));
    std::size_t row = 0;
    if (span > 0 && v > low) row = std::min(rows - 1, static_cast<std::size_t>(std::log(v / low) / span * rows));
    row_count[row] += b.count;
  }
  const std::uint64_t tallest = *std::max_element(row_count.begin(), row_count.end());
  out += "  distribution (log-spaced rows from min to max):\n";
  std::uint64_t cumulative = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    const auto edge = [&](std::size_t j) {
      if (j == 0) return min();
      if (j == rows) return max();
      return saturating_round(low * std::exp(span * static_cast<double>(j) / rows));
    };
    cumulative += row_count[r];
    const std::size_t bar = row_count[r] == 0 ? 0
        : std::max<std::size_t>(1, static_cast<std::size_t>(
              static_cast<double>(row_count[r]) / static_cast<double>(tallest) * format.bar_width));
    append(out, "  %12s .. %-12s %10llu %7.3f%% |%s\n", fv(edge(r)).c_str(), fv(edge(r + 1)).c_str(),
           static_cast<unsigned long long>(row_count[r]),
           100.0 * static_cast<double>(cumulative) / static_cast<double>(count()), std::string(bar, '#').c_str());
  }
  return out;
}

}  // namespace selfperf
