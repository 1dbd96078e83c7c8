// Histogram::to_hdr_text, parsed back the way HdrHistogram's plotters read a .hgrm file.
#include <doctest.h>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "selfperf/histogram.hpp"

using selfperf::Histogram;

namespace {

struct HdrRow {
  double value = 0;
  double percentile = 0;  // a fraction, as printed
  std::uint64_t total_count = 0;
  double inverse = 0;  // 1/(1-Percentile); absent (0) on the 100% row
  std::size_t columns = 0;
};

struct HdrText {
  std::string header;
  std::vector<HdrRow> rows;
  double mean = -1, stddev = -1, max = -1;
  std::uint64_t total_count = 0;
  long long buckets = -1, sub_buckets = -1;
};

// The header line, a blank line, whitespace-separated rows, then three "#[A = x, B = y]" footer lines.
HdrText parse(const std::string& text) {
  HdrText out;
  std::istringstream in(text);
  std::string line;
  REQUIRE(std::getline(in, out.header));
  REQUIRE(std::getline(in, line));
  CHECK(line.empty());
  std::vector<std::string> footer;
  while (std::getline(in, line)) {
    if (line.rfind("#[", 0) == 0) {
      footer.push_back(line);
      continue;
    }
    REQUIRE_MESSAGE(footer.empty(), "row after the footer: " << line);
    std::istringstream fields(line);
    std::vector<std::string> cols;
    for (std::string f; fields >> f;) cols.push_back(f);
    REQUIRE_MESSAGE((cols.size() == 3 || cols.size() == 4), "row with " << cols.size() << " columns: " << line);
    HdrRow row;
    row.columns = cols.size();
    row.value = std::stod(cols[0]);
    row.percentile = std::stod(cols[1]);
    row.total_count = std::stoull(cols[2]);
    if (cols.size() == 4) row.inverse = std::stod(cols[3]);
    out.rows.push_back(row);
  }
  REQUIRE(footer.size() == 3);
  char a[32], b[32];
  REQUIRE(std::sscanf(footer[0].c_str(), "#[Mean = %lf, StdDeviation = %lf]", &out.mean, &out.stddev) == 2);
  unsigned long long total = 0;
  REQUIRE(std::sscanf(footer[1].c_str(), "#[Max = %lf, Total count = %llu]", &out.max, &total) == 2);
  out.total_count = total;
  REQUIRE(std::sscanf(footer[2].c_str(), "#[%31s = %lld, %31s = %lld]", a, &out.buckets, b, &out.sub_buckets) == 4);
  CHECK(std::string(a) == "Buckets");
  CHECK(std::string(b) == "SubBuckets");
  return out;
}

// Printed with two decimals after dividing by `ratio`.
bool printed_as(double printed, double exact, double ratio) { return std::fabs(printed - exact / ratio) <= 0.0051; }

// Everything a reader of the format relies on, checked against the histogram's own statistics.
HdrText check_hdr_text(const Histogram& h, double ratio, int ticks) {
  const HdrText t = parse(h.to_hdr_text(ratio, ticks));
  CHECK(t.header == "       Value     Percentile TotalCount 1/(1-Percentile)");
  const double total = static_cast<double>(h.count());
  REQUIRE(t.rows.size() >= 2);

  const HdrRow& first = t.rows.front();
  CHECK(first.percentile == 0.0);
  CHECK(printed_as(first.value, static_cast<double>(h.min()), ratio));
  const HdrRow& last = t.rows.back();
  CHECK(last.columns == 3);  // 1/(1-1) is left out, as HdrHistogram does
  CHECK(last.percentile == 1.0);
  CHECK(last.total_count == h.count());
  CHECK(printed_as(last.value, static_cast<double>(h.max()), ratio));

  for (std::size_t i = 0; i + 1 < t.rows.size(); ++i) {
    const HdrRow& r = t.rows[i];
    CAPTURE(i);
    CAPTURE(r.percentile);
    CHECK(r.columns == 4);
    if (i > 0) {
      CHECK(r.percentile > t.rows[i - 1].percentile);
      CHECK(r.total_count >= t.rows[i - 1].total_count);
      CHECK(r.value >= t.rows[i - 1].value);
    }
    CHECK(t.rows[i + 1].total_count >= r.total_count);
    // 1/(1-p), two decimals, from a p printed with twelve.
    const double inverse = 1.0 / (1.0 - r.percentile);
    CHECK(std::fabs(r.inverse - inverse) <= 0.0051 + inverse * 1e-9);
    // The value is the percentile at the row's cumulative count (rank TotalCount), min on the 0% row.
    const auto c = static_cast<double>(r.total_count);
    const std::uint64_t expected = i == 0 ? h.min() : h.percentile(100.0 * (c - 0.5) / total);
    CHECK(printed_as(r.value, static_cast<double>(expected), ratio));
    // TotalCount is where the tick was reached: the row's bucket takes the cumulative count from below p to p.
    const std::uint64_t in_bucket = h.bucket_count(Histogram::bucket_index(expected));
    CHECK(r.percentile * total <= c * (1 + 1e-12));
    if (i > 0) CHECK((c - static_cast<double>(in_bucket)) < r.percentile * total * (1 + 1e-12));
  }

  CHECK(printed_as(t.mean, h.mean(), ratio));
  CHECK(printed_as(t.stddev, h.stddev(), ratio));
  CHECK(printed_as(t.max, static_cast<double>(h.max()), ratio));
  CHECK(t.total_count == h.count());
  // HdrHistogram's geometry for this layout: (Buckets + 1) × SubBuckets / 2 counters, SubBuckets per power of 2.
  CHECK(t.sub_buckets == static_cast<long long>(2 * Histogram::kSubBuckets));
  CHECK((t.buckets + 1) * t.sub_buckets / 2 == static_cast<long long>(Histogram::kBucketCount));
  return t;
}

std::size_t rows_between(const HdrText& t, double from, double to) {
  std::size_t n = 0;
  for (const HdrRow& r : t.rows) n += r.percentile >= from && r.percentile < to;
  return n;
}

}  // namespace

TEST_CASE("hdr text: 1..10000 uniform, ticks halving the distance to 100%") {
  static Histogram h;
  h.reset();
  for (std::uint64_t v = 1; v <= 10000; ++v) h.record(v);
  for (const int ticks : {5, 10, 1}) {
    CAPTURE(ticks);
    const HdrText t = check_hdr_text(h, 1.0, ticks);
    // Dense data reaches every tick: `ticks` rows in each half-distance [0, .5), [.5, .75), [.75, .875) ...
    CHECK(rows_between(t, 0.0, 0.5) == static_cast<std::size_t>(ticks));
    CHECK(rows_between(t, 0.5, 0.75) == static_cast<std::size_t>(ticks));
    CHECK(rows_between(t, 0.75, 0.875) == static_cast<std::size_t>(ticks));
    CHECK(rows_between(t, 0.96875, 0.984375) == static_cast<std::size_t>(ticks));
  }
  // Scaled output: the same rows, values divided by the ratio (ns printed as µs).
  const HdrText scaled = check_hdr_text(h, 1000.0, 5);
  const HdrText plain = check_hdr_text(h, 1.0, 5);
  REQUIRE(scaled.rows.size() == plain.rows.size());
  for (std::size_t i = 0; i < plain.rows.size(); ++i) {
    CHECK(scaled.rows[i].total_count == plain.rows[i].total_count);
    CHECK(std::fabs(scaled.rows[i].value * 1000.0 - plain.rows[i].value) <= 5.1);
  }
}

TEST_CASE("hdr text: a bimodal distribution shows its tail after the 99% tick") {
  static Histogram h;
  h.reset();
  for (std::uint64_t i = 0; i < 9900; ++i) h.record(50000 + i);          // the common case
  for (std::uint64_t i = 0; i < 100; ++i) h.record(5000000 + i * 1000);  // 1%: a hundred times slower
  const HdrText t = check_hdr_text(h, 1.0, 5);
  for (const HdrRow& r : t.rows) {
    CAPTURE(r.percentile);
    if (r.total_count <= 9900) CHECK(r.value < 60000);
    else CHECK(r.value >= 5000000 * (1 - Histogram::kMaxRelativeError));  // a bucket midpoint may sit below
  }
  CHECK(rows_between(t, 0.99, 1.0) > 0);
}

TEST_CASE("hdr text: one value, huge values, and an empty histogram") {
  static Histogram h;
  h.reset();
  h.record(42, 7);
  HdrText t = check_hdr_text(h, 1.0, 5);
  CHECK(t.rows.size() == 2);  // the 0% row and the 100% row, as HdrHistogram prints one bucket

  h.reset();
  for (std::uint64_t v : {std::uint64_t{1} << 40, std::uint64_t{3} << 50, UINT64_MAX}) h.record(v, 3);
  t = check_hdr_text(h, 1e6, 5);
  CHECK(t.rows.back().total_count == 9);

  h.reset();
  const HdrText empty = parse(h.to_hdr_text());
  CHECK(empty.rows.empty());
  CHECK(empty.total_count == 0);
  CHECK(empty.mean == 0.0);
}

TEST_CASE("hdr text: arguments HdrHistogram could not print with are refused with the remedy") {
  static Histogram h;
  h.reset();
  h.record(1);
  for (const double ratio : {0.0, -1.0, double{NAN}, double{INFINITY}}) {
    CAPTURE(ratio);
    CHECK_THROWS_WITH_AS(h.to_hdr_text(ratio), doctest::Contains("value_unit_ratio"), std::invalid_argument);
  }
  CHECK_THROWS_WITH_AS(h.to_hdr_text(1.0, 0), doctest::Contains("ticks_per_half_distance"), std::invalid_argument);
}
