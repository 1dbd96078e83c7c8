// Histogram::to_hdr_text: HdrHistogram's percentile distribution text (.hgrm), for the tools that plot it.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "selfperf/histogram.hpp"

namespace selfperf {

namespace {

// HdrHistogram prints values with as many decimals as its significant digits; this layout is its 2-digit one.
constexpr int kValueDecimals = 2;

// Right-aligned fixed-point text. std::to_chars, not printf: the file is read by other tools, so a program that
// set a locale with a decimal comma must not change it.
void append_fixed(std::string& out, double x, int decimals, int width) {
  char buf[400];  // the widest double in fixed notation has 309 integer digits
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::fixed, decimals);
  const std::size_t len = ec == std::errc{} ? static_cast<std::size_t>(end - buf) : 0;
  if (len < static_cast<std::size_t>(width)) out.append(static_cast<std::size_t>(width) - len, ' ');
  out.append(buf, len);
}

void append_integer(std::string& out, std::uint64_t x, int width) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, x);
  const std::size_t len = static_cast<std::size_t>(end - buf);
  if (len < static_cast<std::size_t>(width)) out.append(static_cast<std::size_t>(width) - len, ' ');
  out.append(buf, len);
  (void)ec;  // 24 characters hold any uint64
}

// The next percentile tick after `level` (in percent): HdrHistogram's PercentileIterator steps by
// 100 / (ticks × 2^(halvings + 1)), halvings = ⌊log2(100 / (100 - level))⌋, computed with the same double
// operations so that the Percentile column matches its output digit for digit.
double next_level(double level, int ticks_per_half_distance) {
  const double remaining = 100.0 - level;
  double halvings = remaining > 0 ? std::trunc(std::log(100.0 / remaining) / std::log(2.0)) : 62.0;
  halvings = std::clamp(halvings, 0.0, 52.0);  // past 2^-52 of the way to 100% doubles cannot step any closer
  const double reporting_ticks = static_cast<double>(ticks_per_half_distance) * std::exp2(halvings + 1.0);
  return level + 100.0 / reporting_ticks;
}

}  // namespace

std::string Histogram::to_hdr_text(double value_unit_ratio, int ticks_per_half_distance) const {
  if (!std::isfinite(value_unit_ratio) || !(value_unit_ratio > 0)) {
    throw std::invalid_argument("Histogram::to_hdr_text: value_unit_ratio " + std::to_string(value_unit_ratio) +
                                " must be a finite number > 0 (1 prints values as recorded, 1000 prints ns as us)");
  }
  if (ticks_per_half_distance < 1) {
    throw std::invalid_argument("Histogram::to_hdr_text: ticks_per_half_distance " +
                                std::to_string(ticks_per_half_distance) +
                                " must be >= 1 (HdrHistogram's default is 5)");
  }
  std::string out = "       Value     Percentile TotalCount 1/(1-Percentile)\n\n";
  const auto row = [&](std::uint64_t value, double level, std::uint64_t total_count, bool last) {
    append_fixed(out, static_cast<double>(value) / value_unit_ratio, kValueDecimals, 12);
    out += ' ';
    append_fixed(out, level / 100.0, 12, 2);
    out += ' ';
    append_integer(out, total_count, 10);
    if (!last) {  // HdrHistogram leaves the infinite 1/(1-1) of the 100% row out
      out += ' ';
      append_fixed(out, 1.0 / (1.0 - level / 100.0), 2, 14);
    }
    out += '\n';
  };

  // Like HdrHistogram's PercentileIterator: a bucket prints a row for every tick level its cumulative count
  // reaches, except the last bucket, which prints one row and then the 100% row.
  if (total_ != 0) {
    double level = 0.0;
    std::uint64_t cumulative = 0;
    for (std::size_t i = next_nonempty(0); i < kBucketCount; i = next_nonempty(i + 1)) {
      cumulative += counts_[i];
      const std::uint64_t value = std::clamp(bucket_value(i), min_, max_);
      const bool last_bucket = cumulative == total_;
      while (100.0 * static_cast<double>(cumulative) / static_cast<double>(total_) >= level) {
        row(level == 0.0 ? min_ : value, level, cumulative, false);
        level = next_level(level, ticks_per_half_distance);
        if (last_bucket) break;
      }
      if (last_bucket) break;
    }
    row(max_, 100.0, total_, true);
  }

  out += "#[Mean    = ";
  append_fixed(out, mean() / value_unit_ratio, kValueDecimals, 12);
  out += ", StdDeviation   = ";
  append_fixed(out, stddev() / value_unit_ratio, kValueDecimals, 12);
  out += "]\n#[Max     = ";
  append_fixed(out, static_cast<double>(max()) / value_unit_ratio, kValueDecimals, 12);
  out += ", Total count    = ";
  append_integer(out, total_, 12);
  // HdrHistogram's names for this layout: a "bucket" is a power of two of 256 sub-buckets (the lower half of
  // each shared with the bucket below), the count array is (Buckets + 1) × SubBuckets / 2 = kBucketCount long.
  out += "]\n#[Buckets = ";
  append_integer(out, kBucketCount / kSubBuckets - 1, 12);
  out += ", SubBuckets     = ";
  append_integer(out, 2 * kSubBuckets, 12);
  out += "]\n";
  return out;
}

}  // namespace selfperf
