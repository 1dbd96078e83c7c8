// Histogram as RFC 4180 CSV: its buckets, so a spreadsheet or pandas gets the whole distribution, exactly.
#include <string>

#include "output/report_format.hpp"
#include "selfperf/histogram.hpp"

namespace selfperf {

std::string Histogram::to_csv(const HistogramFormat& format) const {
  const std::string title = detail::csv_field(format.title);
  const std::string unit = detail::csv_field(format.unit.empty() ? "count" : format.unit);
  std::string out = "title,unit,lowest,highest,value,count,cumulative_count\r\n";
  std::uint64_t cumulative = 0;
  for (const HistogramBucket& b : buckets()) {
    cumulative += b.count;
    out += title + ',' + unit + ',' + std::to_string(b.lowest) + ',' + std::to_string(b.highest) + ',' +
           std::to_string(b.value) + ',' + std::to_string(b.count) + ',' + std::to_string(cumulative) + "\r\n";
  }
  return out;
}

}  // namespace selfperf
