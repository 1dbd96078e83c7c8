// Histogram statistics, merge and bucket iteration (recording is inline in the header).
#include "selfperf/histogram.hpp"

#include <algorithm>
#include <cmath>

namespace selfperf {

using detail::uint128;
using detail::Wide192;

namespace {

// a - b for a >= b.
Wide192 subtract(const Wide192& a, const Wide192& b) noexcept {
  Wide192 r;
  r.lo = a.lo - b.lo;
  r.hi = a.hi - b.hi - static_cast<std::uint64_t>(a.lo < b.lo);
  return r;
}

long double to_long_double(uint128 x) noexcept {
  return static_cast<long double>(static_cast<std::uint64_t>(x >> 64)) * 0x1p64L +
         static_cast<long double>(static_cast<std::uint64_t>(x));
}

long double to_long_double(const Wide192& x) noexcept {
  return static_cast<long double>(x.hi) * 0x1p128L + to_long_double(x.lo);
}

}  // namespace

Histogram& Histogram::operator+=(const Histogram& other) noexcept {
  for (std::size_t i = 0; i < kBucketCount; ++i) counts_[i] += other.counts_[i];
  total_ += other.total_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
  sum_ += other.sum_;
  sum_squares_.add(other.sum_squares_);
  return *this;
}

void Histogram::reset() noexcept {
  counts_.fill(0);
  total_ = 0;
  min_ = UINT64_MAX;
  max_ = 0;
  sum_ = 0;
  sum_squares_ = {};
}

double Histogram::mean() const noexcept {
  if (total_ == 0) return 0.0;
  return static_cast<double>(to_long_double(sum_) / static_cast<long double>(total_));
}

double Histogram::stddev() const noexcept {
  if (total_ == 0) return 0.0;
  // Σ(v - mean)² = Σv² - S²/n. Subtracting in floating point would cancel catastrophically for large, nearly
  // equal values, so write S = q·n + r (q = ⌊S/n⌋ < 2^64, r < n) and subtract the integer part
  // S²/n = q²n + 2qr + r²/n exactly in 192 bits; only r²/n < n is fractional.
  const std::uint64_t n = total_;
  const uint128 q = sum_ / n;
  const uint128 r = sum_ % n;
  Wide192 integer_part = detail::multiply(q * q, n);
  integer_part.add(detail::multiply(q * r, 2));
  const Wide192 difference = subtract(sum_squares_, integer_part);
  const long double r_ld = to_long_double(r);
  long double m2 = to_long_double(difference) - r_ld * r_ld / static_cast<long double>(n);
  if (m2 < 0) m2 = 0;  // only rounding can take it below zero
  return static_cast<double>(std::sqrt(m2 / static_cast<long double>(n)));
}

std::uint64_t Histogram::percentile(double p) const noexcept {
  if (total_ == 0) return 0;
  if (!(p > 0.0)) return min_;
  if (p >= 100.0) return max_;
  long double rank_ld = std::ceil(static_cast<long double>(p) / 100.0L * static_cast<long double>(total_));
  std::uint64_t rank = rank_ld < 1.0L ? 1 : static_cast<std::uint64_t>(std::min<long double>(rank_ld, total_));
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < kBucketCount; ++i) {
    seen += counts_[i];
    if (seen >= rank) return std::clamp(bucket_value(i), min_, max_);
  }
  return max_;  // not reached: the counts add up to total_
}

std::size_t Histogram::next_nonempty(std::size_t from) const noexcept {
  while (from < kBucketCount && counts_[from] == 0) ++from;
  return from;
}

HistogramBucket Histogram::BucketIterator::operator*() const noexcept {
  return HistogramBucket{index_, bucket_lowest(index_), bucket_highest(index_), bucket_value(index_),
                         owner_->counts_[index_]};
}

}  // namespace selfperf
