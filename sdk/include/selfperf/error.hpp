#pragma once
// selfperf::Error: every failure a user can act on carries a message that names the input and what to do.
#include <stdexcept>
#include <string>

namespace selfperf {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, int errno_value = 0)
      : std::runtime_error(message), errno_value_(errno_value) {}
  // The errno that caused it (0 when the error is not from a system call).
  int errno_value() const noexcept { return errno_value_; }

 private:
  int errno_value_;
};

}  // namespace selfperf
