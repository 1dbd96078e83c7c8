#pragma once
// Histogram: a fixed-size, allocation-free log-linear histogram of 64-bit values (per-frame times,
// per-message latencies, per-iteration counter deltas), in the manner of HdrHistogram.
//
// Bucket layout and error bound
// -----------------------------
// Values 0 … 255 each have their own bucket (exact). A value v >= 256 with highest set bit k (2^k <= v < 2^(k+1),
// 8 <= k <= 63) falls in one of 128 equal sub-buckets of [2^k, 2^(k+1)), each 2^(k-7) wide. A bucket is
// reported by its midpoint, lowest + width/2, so for every value v the reported value r of v's bucket obeys
//
//     |r - v| <= width/2 = 2^(k-8) <= v / 256,   i.e. a relative error of at most 1/256 (0.39%),
//
// over the whole range 0 … UINT64_MAX (exact below 256). Percentiles are additionally clamped to the exact
// [min, max], which can only bring them closer to the true value. count, min, max, sum and hence mean are exact
// (the sum is kept in 128 bits, the sum of squares in 192 bits, so stddev is exact up to the final rounding).
//
// Memory: kBucketCount (7424) 64-bit counters held inline, about 58 KiB; construction, record() and merge never
// allocate. Only the text/SVG renderings allocate their result string. At that size, keep histograms in static
// or heap storage rather than on small thread stacks.
//
// Threads: a Histogram has no internal synchronisation. Give each thread its own and merge them with += when
// reporting (the merged result is identical to having recorded every value into one).
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>

namespace selfperf {

namespace detail {

__extension__ using uint128 = unsigned __int128;

// A 192-bit unsigned accumulator: the sum of value² × count over fewer than 2^64 records stays below 2^192.
struct Wide192 {
  uint128 lo = 0;
  std::uint64_t hi = 0;  // multiples of 2^128

  void add(uint128 x) noexcept {
    lo += x;
    hi += static_cast<std::uint64_t>(lo < x);  // carry without a branch
  }
  void add(const Wide192& x) noexcept {
    add(x.lo);
    hi += x.hi;
  }
  bool operator==(const Wide192&) const = default;
};

// a × b exactly, a < 2^128, b < 2^64, for products below 2^192.
inline Wide192 multiply(uint128 a, std::uint64_t b) noexcept {
  const uint128 low = static_cast<uint128>(static_cast<std::uint64_t>(a)) * b;
  const uint128 high = static_cast<uint128>(static_cast<std::uint64_t>(a >> 64)) * b;  // weight 2^64
  Wide192 r;
  r.lo = low;
  r.add(high << 64);
  r.hi += static_cast<std::uint64_t>(high >> 64);
  return r;
}

}  // namespace detail

// One bucket of a histogram: every value in [lowest, highest] is counted here and reported as `value`.
struct HistogramBucket {
  std::size_t index = 0;
  std::uint64_t lowest = 0;
  std::uint64_t highest = 0;
  std::uint64_t value = 0;  // the representative (midpoint) reported for values in this bucket
  std::uint64_t count = 0;
};

// How to render a histogram as text or SVG.
struct HistogramFormat {
  std::string title;       // e.g. "frame wall time"
  std::string unit;        // "ns" is printed as ns/us/ms/s; anything else is appended to the raw number
  std::size_t rows = 24;   // text: at most this many rows in the ASCII distribution
  std::size_t bar_width = 50;
  int svg_width = 800;     // SVG: canvas size in pixels
  int svg_height = 600;
};

class Histogram {
 public:
  static constexpr unsigned kSubBucketBits = 7;                           // 128 sub-buckets per power of two
  static constexpr std::uint64_t kSubBuckets = 1u << kSubBucketBits;
  static constexpr std::uint64_t kExactLimit = 2 * kSubBuckets;           // values below 256 are exact
  // Exponents 0…7 share the first two rows (256 exact buckets), then one row per exponent 8…63.
  static constexpr std::size_t kBucketCount = (64 - kSubBucketBits + 1) * kSubBuckets;  // 7424
  // The largest relative error of a reported value: |reported - v| <= v × kMaxRelativeError.
  static constexpr double kMaxRelativeError = 1.0 / (2.0 * kSubBuckets);

  // The bucket holding v. Branch-free: `v | 255` puts every small value in the "exponent 7" row whose
  // sub-bucket width is 1, so small values index themselves.
  static constexpr std::size_t bucket_index(std::uint64_t v) noexcept {
    const unsigned exponent = 63u - static_cast<unsigned>(std::countl_zero(v | (kExactLimit - 1)));
    const unsigned shift = exponent - kSubBucketBits;
    return (static_cast<std::size_t>(shift) << kSubBucketBits) + static_cast<std::size_t>(v >> shift);
  }
  static constexpr std::uint64_t bucket_lowest(std::size_t index) noexcept {
    if (index < kExactLimit) return index;
    const unsigned shift = static_cast<unsigned>(index >> kSubBucketBits) - 1;
    const std::uint64_t sub = kSubBuckets + (index & (kSubBuckets - 1));
    return sub << shift;
  }
  static constexpr std::uint64_t bucket_width(std::size_t index) noexcept {
    if (index < kExactLimit) return 1;
    return std::uint64_t{1} << (static_cast<unsigned>(index >> kSubBucketBits) - 1);
  }
  static constexpr std::uint64_t bucket_highest(std::size_t index) noexcept {
    return bucket_lowest(index) + (bucket_width(index) - 1);
  }
  // The value reported for anything in the bucket: its midpoint (see the error bound above).
  static constexpr std::uint64_t bucket_value(std::size_t index) noexcept {
    return bucket_lowest(index) + bucket_width(index) / 2;
  }

  // Counts `value` once: no allocation, no loop, two well-predicted branches (new minimum / maximum).
  void record(std::uint64_t value) noexcept {
    // New extremes are rare after the first few values, so these branches are predicted; unlike a conditional
    // move they do not store min_/max_ on every call, which would chain each record behind the last one.
    if (value < min_) [[unlikely]] min_ = value;
    if (value > max_) [[unlikely]] max_ = value;
    total_ += 1;
    sum_ += value;
    sum_squares_.add(static_cast<detail::uint128>(value) * value);
    counts_[bucket_index(value)] += 1;
  }
  // Counts `value` `count` times (a count of 0 records nothing). The total count must stay below 2^64.
  void record(std::uint64_t value, std::uint64_t count) noexcept {
    if (count == 0) return;
    if (value < min_) [[unlikely]] min_ = value;
    if (value > max_) [[unlikely]] max_ = value;
    total_ += count;
    sum_ += static_cast<detail::uint128>(value) * count;
    sum_squares_.add(detail::multiply(static_cast<detail::uint128>(value) * value, count));
    counts_[bucket_index(value)] += count;
  }

  // Adds every value recorded in `other`: the result equals having recorded both streams into one histogram.
  Histogram& operator+=(const Histogram& other) noexcept;
  void reset() noexcept;

  // Statistics. An empty histogram reports 0 for every one of them (count() == 0 tells it apart).
  std::uint64_t count() const noexcept { return total_; }
  bool empty() const noexcept { return total_ == 0; }
  std::uint64_t min() const noexcept { return total_ == 0 ? 0 : min_; }  // exact
  std::uint64_t max() const noexcept { return max_; }                    // exact
  detail::uint128 sum() const noexcept { return sum_; }                  // exact
  double mean() const noexcept;
  double stddev() const noexcept;  // population standard deviation

  // The nearest-rank percentile: the value of rank ceil(p/100 × count) (at least 1) in sorted order, reported
  // as its bucket's midpoint clamped to [min, max], hence within kMaxRelativeError of the exact answer.
  // p is clamped to [0, 100] (NaN counts as 0): percentile(0) == min(), percentile(100) == max().
  std::uint64_t percentile(double p) const noexcept;
  std::uint64_t p50() const noexcept { return percentile(50.0); }
  std::uint64_t p90() const noexcept { return percentile(90.0); }
  std::uint64_t p99() const noexcept { return percentile(99.0); }
  std::uint64_t p999() const noexcept { return percentile(99.9); }

  // The count in one bucket (index < kBucketCount), and the non-empty buckets in increasing value order.
  std::uint64_t bucket_count(std::size_t index) const noexcept { return counts_[index]; }

  class BucketIterator {
   public:
    using value_type = HistogramBucket;
    using difference_type = std::ptrdiff_t;
    BucketIterator() = default;
    HistogramBucket operator*() const noexcept;
    BucketIterator& operator++() noexcept {
      index_ = owner_->next_nonempty(index_ + 1);
      return *this;
    }
    BucketIterator operator++(int) noexcept {
      BucketIterator before = *this;
      ++*this;
      return before;
    }
    bool operator==(const BucketIterator& other) const noexcept { return index_ == other.index_; }

   private:
    friend class Histogram;
    BucketIterator(const Histogram* owner, std::size_t index) : owner_(owner), index_(index) {}
    const Histogram* owner_ = nullptr;
    std::size_t index_ = kBucketCount;
  };
  struct Buckets {
    BucketIterator first, last;
    BucketIterator begin() const noexcept { return first; }
    BucketIterator end() const noexcept { return last; }
  };
  Buckets buckets() const noexcept {
    return {BucketIterator(this, next_nonempty(0)), BucketIterator(this, kBucketCount)};
  }

  // A summary and percentile table followed by an ASCII bar chart of the distribution on log-spaced rows.
  std::string to_text(const HistogramFormat& format = {}) const;
  // A standalone SVG: the distribution as bars on a log value axis, and the percentile curve (value against
  // percentile on a 1/(1-p) axis, as HdrHistogram plots it); each bar and point has a hover title.
  std::string to_svg(const HistogramFormat& format = {}) const;
  // JSON: {"title","unit","count","min","max","sum","mean","stddev","max_relative_error","percentiles":[{"percentile",
  // "value"}…] (50, 90, 99, 99.9, 99.99, 100),"buckets":[{"lowest","highest","value","count"}…]}. Counts and values
  // are exact integers (sum is a decimal string in the impossible case it exceeds 2^64); min, max, mean, stddev
  // are null and percentiles empty when nothing was recorded.
  std::string to_json(const HistogramFormat& format = {}) const;
  // RFC 4180 CSV (CRLF line ends, fields quoted where needed), one row per non-empty bucket, lowest value first:
  // title,unit,lowest,highest,value,count,cumulative_count. unit (format.unit, "count" when empty) is that of
  // lowest, highest and value; count and cumulative_count are counts of recorded values. Integers exact.
  // Only the header row when nothing was recorded. docs/formats.md.
  std::string to_csv(const HistogramFormat& format = {}) const;
  // HdrHistogram's percentile distribution text (what its outputPercentileDistribution prints, saved as .hgrm
  // and read by HdrHistogram's plotFiles.html and HistogramLogAnalyzer): a header, one row per percentile tick
  // (Value, Percentile as a fraction, TotalCount, 1/(1-Percentile)), the ticks halving the distance to 100%
  // with `ticks_per_half_distance` rows per half, then the Mean/StdDeviation, Max/Total count and
  // Buckets/SubBuckets footer. Values are divided by `value_unit_ratio` (1000 prints ns as µs). Each row's
  // Value is percentile() at its TotalCount (min for the 0% row, max for the 100% row); this layout is
  // HdrHistogram's with 2 significant digits, so the rows, counts and footer match Java's output for the
  // same data, except that Java prints each bucket's highest value where this prints the clamped midpoint.
  // Throws std::invalid_argument unless value_unit_ratio is finite and > 0 and ticks_per_half_distance >= 1.
  std::string to_hdr_text(double value_unit_ratio = 1.0, int ticks_per_half_distance = 5) const;

  bool operator==(const Histogram&) const = default;

 private:
  std::size_t next_nonempty(std::size_t from) const noexcept;

  // unsigned long long, not uint64_t (unsigned long): a distinct type, so by the aliasing rules a bucket increment
  // cannot modify total_/min_/max_ and the compiler may keep those in registers across inlined record() calls.
  std::array<unsigned long long, kBucketCount> counts_{};
  std::uint64_t total_ = 0;
  std::uint64_t min_ = UINT64_MAX;
  std::uint64_t max_ = 0;
  detail::uint128 sum_ = 0;
  detail::Wide192 sum_squares_;
};

// x rounded to the nearest uint64, saturating at 0 and UINT64_MAX (std::llround overflows above 2^63).
std::uint64_t saturating_round(double x) noexcept;

// Prints a value with its unit: "ns" values as ns/us/ms/s with three significant decimals, others raw.
std::string format_value(std::uint64_t value, const std::string& unit);

}  // namespace selfperf
