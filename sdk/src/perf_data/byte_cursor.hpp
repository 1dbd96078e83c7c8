#pragma once
// Bounds-checked reading of untrusted bytes: every overrun becomes a selfperf::Error naming the file offset.
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "selfperf/error.hpp"

namespace selfperf::detail {

class ByteCursor {
 public:
  // `base` is the file offset of bytes[0]; `file` and `what` name the input in errors.
  ByteCursor(std::span<const std::uint8_t> bytes, std::uint64_t base, const std::string& file, const char* what)
      : bytes_(bytes), base_(base), file_(file), what_(what) {}

  std::size_t remaining() const noexcept { return bytes_.size() - pos_; }
  std::uint64_t offset() const noexcept { return base_ + pos_; }

  template <class T>
  T get() {
    need(sizeof(T));
    T value;
    std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  std::uint64_t u64() { return get<std::uint64_t>(); }
  std::uint32_t u32() { return get<std::uint32_t>(); }

  std::span<const std::uint8_t> take(std::uint64_t n) {
    need(n);
    auto out = bytes_.subspan(pos_, static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return out;
  }
  void skip(std::uint64_t n) { take(n); }

  // A NUL-terminated string within the next n bytes (the whole n are consumed).
  std::string string_in(std::uint64_t n) {
    auto raw = take(n);
    const auto* p = reinterpret_cast<const char*>(raw.data());
    return std::string(p, strnlen(p, raw.size()));
  }
  // perf_header_string: u32 length, then that many bytes.
  std::string header_string() { return string_in(u32()); }

  [[noreturn]] void fail(const std::string& why) const {
    throw Error("perf.data reader: " + file_ + ": " + what_ + " at file offset " + std::to_string(offset()) + ": " +
                why + "; the file is corrupt or truncated");
  }

 private:
  void need(std::uint64_t n) const {
    if (n > remaining())
      fail("needs " + std::to_string(n) + " bytes, " + std::to_string(remaining()) + " left");
  }

  std::span<const std::uint8_t> bytes_;
  std::size_t pos_ = 0;
  std::uint64_t base_;
  const std::string& file_;
  const char* what_;
};

}  // namespace selfperf::detail
