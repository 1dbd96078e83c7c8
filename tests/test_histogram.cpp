#include <doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "counting_new.hpp"
#include "selfperf/histogram.hpp"

using selfperf::Histogram;
using selfperf::test::allocations;
using u128 = selfperf::detail::uint128;

namespace {

// |reported - exact| <= exact / 256, checked in integers so nothing is lost to rounding.
bool within_bound(std::uint64_t reported, std::uint64_t exact) {
  const u128 diff = reported > exact ? reported - exact : exact - reported;
  return diff * 256 <= exact;
}

// Values spread over the whole 64-bit range: a uniformly chosen bit length, then uniform bits below it.
std::vector<std::uint64_t> whole_range(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint64_t> out(n);
  for (auto& v : out) {
    const unsigned bits = static_cast<unsigned>(rng() % 65);
    v = bits == 0 ? 0 : (rng() >> (64 - bits)) | (std::uint64_t{1} << (bits - 1));
  }
  return out;
}

std::uint64_t reference_percentile(const std::vector<std::uint64_t>& sorted, double p) {
  const long double n = static_cast<long double>(sorted.size());
  long double rank = std::ceil(static_cast<long double>(std::clamp(p, 0.0, 100.0)) / 100.0L * n);
  rank = std::clamp<long double>(rank, 1.0L, n);
  return sorted[static_cast<std::size_t>(rank) - 1];
}

void check_against_reference(std::vector<std::uint64_t> values) {
  Histogram h;
  for (auto v : values) h.record(v);
  std::sort(values.begin(), values.end());
  REQUIRE(h.count() == values.size());
  CHECK(h.min() == values.front());
  CHECK(h.max() == values.back());
  for (double p : {0.0, 0.1, 1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 99.0, 99.9, 99.99, 99.999, 100.0}) {
    const std::uint64_t exact = reference_percentile(values, p);
    const std::uint64_t got = h.percentile(p);
    INFO("p", p, " exact ", exact, " histogram ", got);
    CHECK(within_bound(got, exact));
    CHECK(std::fabs(static_cast<double>(got) - static_cast<double>(exact)) <= 0.01 * static_cast<double>(exact));
  }
  long double sum = 0;
  for (auto v : values) sum += static_cast<long double>(v);
  const long double mean = sum / values.size();
  long double m2 = 0;
  for (auto v : values) m2 += (static_cast<long double>(v) - mean) * (static_cast<long double>(v) - mean);
  const double stddev = static_cast<double>(std::sqrt(m2 / values.size()));
  CHECK(h.mean() == doctest::Approx(static_cast<double>(mean)).epsilon(1e-12));
  CHECK(h.stddev() == doctest::Approx(stddev).epsilon(1e-9));
}

}  // namespace

TEST_CASE("buckets tile 0 … UINT64_MAX without gaps and index themselves") {
  CHECK(Histogram::bucket_lowest(0) == 0);
  CHECK(Histogram::bucket_highest(Histogram::kBucketCount - 1) == UINT64_MAX);
  CHECK(Histogram::bucket_index(UINT64_MAX) == Histogram::kBucketCount - 1);
  for (std::size_t i = 0; i < Histogram::kBucketCount; ++i) {
    const auto lo = Histogram::bucket_lowest(i), hi = Histogram::bucket_highest(i);
    REQUIRE(lo <= hi);
    REQUIRE(Histogram::bucket_index(lo) == i);
    REQUIRE(Histogram::bucket_index(hi) == i);
    REQUIRE(Histogram::bucket_value(i) >= lo);
    REQUIRE(Histogram::bucket_value(i) <= hi);
    if (i + 1 < Histogram::kBucketCount) REQUIRE(Histogram::bucket_lowest(i + 1) == hi + 1);
  }
}

TEST_CASE("small values are exact, every value is reported within 1/256 of itself") {
  for (std::uint64_t v = 0; v < Histogram::kExactLimit; ++v) CHECK(Histogram::bucket_value(Histogram::bucket_index(v)) == v);
  std::size_t failures = 0;
  for (auto v : whole_range(1'000'000, 1)) {
    const std::uint64_t r = Histogram::bucket_value(Histogram::bucket_index(v));
    failures += !within_bound(r, v);
    failures += std::fabs(static_cast<double>(r) - static_cast<double>(v)) > 0.01 * static_cast<double>(v);
  }
  CHECK(failures == 0);
  // The worst case sits at the bottom of each power of two: 2^k lies in a bucket 2^(k-7) wide.
  for (unsigned k = 8; k < 64; ++k) {
    const std::uint64_t v = std::uint64_t{1} << k;
    CHECK(within_bound(Histogram::bucket_value(Histogram::bucket_index(v)), v));
    CHECK(within_bound(Histogram::bucket_value(Histogram::bucket_index(v - 1)), v - 1));
  }
  CHECK(Histogram::kMaxRelativeError <= 0.01);
}

TEST_CASE("percentiles, min, max, mean and stddev match a sorted exact reference") {
  std::mt19937_64 rng(42);
  SUBCASE("uniform") {
    std::vector<std::uint64_t> v(200'000);
    for (auto& x : v) x = rng() % 1'000'000;
    check_against_reference(v);
  }
  SUBCASE("log-normal-ish") {
    std::lognormal_distribution<double> dist(10.0, 2.0);
    std::vector<std::uint64_t> v(200'000);
    for (auto& x : v) x = static_cast<std::uint64_t>(std::min(dist(rng), 1e18));
    check_against_reference(v);
  }
  SUBCASE("whole 64-bit range") { check_against_reference(whole_range(200'000, 7)); }
  SUBCASE("constant") { check_against_reference(std::vector<std::uint64_t>(10'000, 123'456'789)); }
  SUBCASE("zeros") { check_against_reference(std::vector<std::uint64_t>(5'000, 0)); }
  SUBCASE("outliers at 2^63 and UINT64_MAX") {
    std::vector<std::uint64_t> v(100'000);
    for (auto& x : v) x = 1000 + rng() % 100;
    v[17] = std::uint64_t{1} << 63;
    v[99] = UINT64_MAX;
    v[500] = UINT64_MAX;
    check_against_reference(v);
    Histogram h;
    for (auto x : v) h.record(x);
    CHECK(h.max() == UINT64_MAX);
    CHECK(h.percentile(100) == UINT64_MAX);
    CHECK(h.p999() < 1200);
  }
  SUBCASE("single value") { check_against_reference({77'777}); }
}

TEST_CASE("stddev of equal huge values is exactly zero (no cancellation)") {
  for (std::uint64_t v : {std::uint64_t{(1ull << 40) + 1}, std::uint64_t{1} << 63, UINT64_MAX}) {
    Histogram h;
    h.record(v, 1'000'000);
    h.record(v);
    CHECK(h.stddev() == 0.0);
    CHECK(h.mean() == doctest::Approx(static_cast<double>(v)));
  }
  Histogram two;
  two.record(UINT64_MAX - 2);
  two.record(UINT64_MAX);
  CHECK(two.stddev() == 1.0);
}

TEST_CASE("merge equals recording everything into one histogram") {
  const auto values = whole_range(100'000, 3);
  Histogram all, first, second;
  for (std::size_t i = 0; i < values.size(); ++i) {
    all.record(values[i]);
    (i % 3 == 0 ? first : second).record(values[i]);
  }
  CHECK_FALSE(first == all);
  first += second;
  CHECK(first == all);
  CHECK(first.percentile(99.9) == all.percentile(99.9));
  Histogram empty;
  empty += all;
  CHECK(empty == all);
  all += Histogram{};
  CHECK(all == first);
}

TEST_CASE("record(value, count) equals count single records") {
  Histogram once, many;
  for (std::uint64_t v : {std::uint64_t{0}, std::uint64_t{300}, std::uint64_t{1} << 50, UINT64_MAX}) {
    once.record(v, 1000);
    for (int i = 0; i < 1000; ++i) many.record(v);
  }
  once.record(5, 0);  // a count of 0 records nothing, not even min/max
  CHECK(once == many);
}

TEST_CASE("an empty histogram reports zeros and renders as such") {
  Histogram h;
  CHECK(h.empty());
  CHECK(h.count() == 0);
  CHECK(h.percentile(50) == 0);
  CHECK(h.percentile(100) == 0);
  CHECK(h.min() == 0);
  CHECK(h.max() == 0);
  CHECK(h.mean() == 0.0);
  CHECK(h.stddev() == 0.0);
  CHECK(h.buckets().begin() == h.buckets().end());
  CHECK(h.to_text().find("no values recorded") != std::string::npos);
  CHECK(h.to_svg().find("no values recorded") != std::string::npos);
  h.record(10);
  h.reset();
  CHECK(h == Histogram{});
}

TEST_CASE("out-of-range percentiles clamp to min and max") {
  Histogram h;
  for (std::uint64_t v = 1000; v < 2000; ++v) h.record(v);
  CHECK(h.percentile(-5) == 1000);
  CHECK(h.percentile(std::nan("")) == 1000);
  CHECK(h.percentile(250) == 1999);
}

TEST_CASE("iteration visits exactly the non-empty buckets in order") {
  Histogram h;
  const auto values = whole_range(10'000, 5);
  for (auto v : values) h.record(v);
  std::uint64_t total = 0;
  std::size_t previous = 0, visited = 0;
  for (const auto& b : h.buckets()) {
    CHECK(b.count > 0);
    CHECK(b.count == h.bucket_count(b.index));
    if (visited++ > 0) CHECK(b.index > previous);
    previous = b.index;
    total += b.count;
  }
  CHECK(total == h.count());
  std::size_t nonempty = 0;
  for (std::size_t i = 0; i < Histogram::kBucketCount; ++i) nonempty += h.bucket_count(i) != 0;
  CHECK(visited == nonempty);
}

TEST_CASE("recording, merging and querying never allocate") {
  const auto values = whole_range(1'000'000, 11);  // allocated before counting starts
  const unsigned long before = allocations.load();
  Histogram h, other;
  for (auto v : values) h.record(v);
  for (auto v : values) other.record(v, 3);
  h += other;
  const auto p = h.percentile(99.9) + h.p50();
  const double s = h.mean() + h.stddev();
  const unsigned long after = allocations.load();
  CHECK(after == before);
  CHECK(h.count() == 4'000'000);
  CHECK(p > 0);
  CHECK(s > 0);
  // The counting hook itself works: a rendering allocates its string.
  CHECK(!h.to_text().empty());
  CHECK(allocations.load() > after);
}

TEST_CASE("text rendering shows the percentile table and a distribution") {
  Histogram h;
  for (std::uint64_t i = 0; i < 10'000; ++i) h.record(1'000'000 + (i % 100) * 1000);  // 1.0 … 1.1 ms
  h.record(40'000'000);                                                               // one 40 ms outlier
  const std::string text = h.to_text({.title = "frame", .unit = "ns"});
  INFO(text);
  CHECK(text.rfind("frame: count 10001", 0) == 0);
  for (const char* row : {"p50", "p90", "p99", "p99.9", "max"}) CHECK(text.find(row) != std::string::npos);
  CHECK(text.find("40.0 ms") != std::string::npos);
  CHECK(text.find('#') != std::string::npos);
  CHECK(text.find("100.000%") != std::string::npos);
}

TEST_CASE("SVG has one hover-titled bar per non-empty bucket and labelled axes") {
  Histogram h;
  for (auto v : whole_range(2000, 9)) h.record(v >> 20);
  const std::string svg = h.to_svg({.title = "latency <us>", .unit = "cycles"});
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(svg.size() > 10);
  CHECK(svg.substr(svg.size() - 7) == "</svg>\n");
  CHECK(svg.find("latency &lt;us&gt;") != std::string::npos);
  CHECK(svg.find("value (cycles), log scale") != std::string::npos);
  CHECK(svg.find(">percentile<") != std::string::npos);
  CHECK(svg.find("99.9%") != std::string::npos);
  std::size_t bars = 0, nonempty = 0;
  for (std::size_t at = 0; (at = svg.find("fill='#4a7ebb'><title>", at)) != std::string::npos; ++at) ++bars;
  for (const auto& b : h.buckets()) nonempty += b.count != 0;
  CHECK(bars == nonempty);
}

TEST_CASE("format_value scales nanoseconds and keeps other units raw") {
  CHECK(selfperf::format_value(999, "ns") == "999 ns");
  CHECK(selfperf::format_value(16'600'000, "ns") == "16.6 ms");
  CHECK(selfperf::format_value(2'500, "ns") == "2.50 us");
  CHECK(selfperf::format_value(3'000'000'000, "ns") == "3.00 s");
  CHECK(selfperf::format_value(1234, "cycles") == "1234 cycles");
  CHECK(selfperf::format_value(7, "") == "7");
}

TEST_CASE("renderings of values near UINT64_MAX stay in range") {
  Histogram h;
  h.record(UINT64_MAX - 5);
  h.record(std::uint64_t{1} << 63);
  h.record(0);
  const std::string text = h.to_text();
  CHECK(text.find("18446744073709551610") != std::string::npos);
  CHECK(h.to_svg().find("</svg>") != std::string::npos);
  CHECK(selfperf::saturating_round(1e30) == UINT64_MAX);
  CHECK(selfperf::saturating_round(-3.0) == 0);
  CHECK(selfperf::saturating_round(2.5) == 3);
}

TEST_CASE("SVG titles with control characters stay valid XML") {
  Histogram h;
  h.record(100);
  const std::string svg = h.to_svg({.title = "tab\there\x01", .unit = "ns"});
  CHECK(svg.find("tab here ") != std::string::npos);
  CHECK(std::none_of(svg.begin(), svg.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 && c != '\n'; }));
}

TEST_CASE("to_json reads back exactly: counts above 1e9, percentiles, every bucket") {
  Histogram h;
  const std::uint64_t big = 1310295847;  // 6 significant digits would print 1.3103e+09
  for (std::uint64_t v : {std::uint64_t{3}, std::uint64_t{300}, big, big + 1}) h.record(v);
  h.record(7, 5);
  const auto j = nlohmann::json::parse(h.to_json({.title = "frame \"time\", ms\n", .unit = "ns"}));
  CHECK(j["title"] == "frame \"time\", ms\n");
  CHECK(j["unit"] == "ns");
  CHECK(j["count"] == 9);
  CHECK(j["min"] == 3);
  CHECK(j["max"].get<std::uint64_t>() == big + 1);
  CHECK(j["sum"].get<std::uint64_t>() == 3 + 300 + big + big + 1 + 5 * 7);
  CHECK(j["mean"].get<double>() == h.mean());
  CHECK(j["stddev"].get<double>() == h.stddev());
  REQUIRE(j["percentiles"].size() == 6);
  for (const auto& p : j["percentiles"]) CHECK(p["value"].get<std::uint64_t>() == h.percentile(p["percentile"]));
  std::uint64_t counted = 0;
  for (const auto& b : j["buckets"]) {
    CHECK(b["count"].get<std::uint64_t>() == h.bucket_count(Histogram::bucket_index(b["lowest"])));
    counted += b["count"].get<std::uint64_t>();
  }
  CHECK(counted == h.count());
}

TEST_CASE("to_json of an empty histogram says null, not a measured zero") {
  const auto j = nlohmann::json::parse(Histogram().to_json());
  CHECK(j["count"] == 0);
  CHECK(j["min"].is_null());
  CHECK(j["mean"].is_null());
  CHECK(j["percentiles"].empty());
  CHECK(j["buckets"].empty());
}
