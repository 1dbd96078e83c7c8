#pragma once
// The argument walk every selfperf command shares, the way perf's commands take theirs: options first, an
// option's value in the next argument, and `--` or the first word that is not an option starting the command
// to run. A bad option prints the command's usage and exits 2; -h/--help prints it and exits 0.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace selfperf::tool {

class Options {
 public:
  Options(const char* command, const char* usage, int argc, char** argv)
      : command_(command), usage_(usage), argc_(argc), argv_(argv) {}

  // Moves to the next option; false at `--` (consumed), at the first non-option, or at the end.
  bool next() {
    if (started_) ++i_;
    started_ = true;
    if (i_ >= argc_) return false;
    arg_ = argv_[i_];
    if (arg_ == "--") {
      ++i_;
      return false;
    }
    if (arg_.empty() || arg_[0] != '-') return false;
    if (arg_ == "-h" || arg_ == "--help") {
      std::fputs(usage_, stdout);
      std::exit(0);
    }
    return true;
  }

  const std::string& arg() const noexcept { return arg_; }
  bool is(const char* short_name, const char* long_name = nullptr) const {
    return arg_ == short_name || (long_name && arg_ == long_name);
  }
  // The argument after the current option, as its value.
  std::string value() {
    if (i_ + 1 >= argc_) fail(arg_ + " needs a value");
    return argv_[++i_];
  }
  // The current option's value as a number above 0, or the usage error naming both.
  unsigned long positive_value() {
    const std::string v = value();
    char* end = nullptr;
    const unsigned long n = std::strtoul(v.c_str(), &end, 10);
    if (v.empty() || v[0] == '-' || *end != '\0' || n == 0) fail(arg_ + " takes a positive number, not '" + v + "'");
    return n;
  }
  [[noreturn]] void unknown() const { fail("unknown option '" + arg_ + "'"); }
  [[noreturn]] void fail(const std::string& message) const {
    std::fprintf(stderr, "selfperf %s: %s\n%s", command_, message.c_str(), usage_);
    std::exit(2);
  }
  // What follows the options: the command to run.
  std::vector<std::string> rest() const {
    std::vector<std::string> out;
    for (int k = i_; k < argc_; ++k) out.emplace_back(argv_[k]);
    return out;
  }

 private:
  const char* command_;
  const char* usage_;
  int argc_;
  char** argv_;
  int i_ = 0;
  bool started_ = false;
  std::string arg_;
};

}  // namespace selfperf::tool
