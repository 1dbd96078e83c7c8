#pragma once
// Helpers shared by the unit tests: CPU time of this thread, burning it, sleeping, fresh page faults, what a
// test's code printed on stderr.
#include <doctest.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <initializer_list>
#include <string>

#include <sys/mman.h>
#include <unistd.h>

#include "selfperf/counter_group.hpp"

namespace selfperf::test {

// A reproducible pseudo-random sequence (xorshift64), with no library state: random stacks and schedules come
// out the same in every run, so a failure can be replayed.
class XorShift {
 public:
  explicit XorShift(std::uint64_t seed) : state_(seed) {}
  std::uint64_t below(std::uint64_t n) {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 7;
    state_ ^= state_ << 17;
    return state_ % n;
  }

 private:
  std::uint64_t state_;
};

inline std::uint64_t thread_cpu_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

inline thread_local volatile std::uint64_t burn_sink;  // per thread: burners run side by side

// Burns at least `ns` of this thread's CPU time in user space: task-clock grows by at least that much, and
// a cpu-clock sampler sees this function.
inline void burn_cpu(std::uint64_t ns) {
  const std::uint64_t start = thread_cpu_ns();
  std::uint64_t x = 1;
  while (thread_cpu_ns() - start < ns) {
    for (int i = 0; i < 10000; ++i) x = x * 6364136223846793005ULL + 1;
    burn_sink = x;
  }
}

inline std::uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

// Sleeps `ms` milliseconds, the whole of it even if a signal interrupts the sleep.
inline void sleep_ms(long ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000};
  while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// Writes one byte to each of `pages` freshly mapped pages: at least `pages` user page faults. Huge pages are
// refused so that each 4 KiB page faults on its own.
inline void touch_fresh_pages(std::size_t pages) {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  void* mem = ::mmap(nullptr, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(mem != MAP_FAILED);
  ::madvise(mem, pages * page, MADV_NOHUGEPAGE);
  for (std::size_t i = 0; i < pages; ++i) static_cast<volatile char*>(mem)[i * page] = 1;
  ::munmap(mem, pages * page);
}

// Standard error into a memory file while it lives: what the library says, for a test to count its lines.
class CapturedStderr {
 public:
  CapturedStderr() : file_(memfd_create("stderr", 0)), saved_(dup(2)) {
    REQUIRE(file_ >= 0);
    REQUIRE(saved_ >= 0);
    std::fflush(stderr);
    dup2(file_, 2);
  }
  ~CapturedStderr() {
    restore();
    close(file_);
  }
  std::string text() {
    restore();
    std::string out;
    char buf[4096];
    for (off_t at = 0;;) {
      ssize_t n = pread(file_, buf, sizeof buf, at);
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
      at += n;
    }
    return out;
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    saved_ = -1;
  }
  int file_;
  int saved_;
};

inline std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A reading as a group of counters that never multiplex would give: running == enabled == `ns`.
inline selfperf::GroupReading reading(std::initializer_list<std::uint64_t> values, std::uint64_t ns) {
  selfperf::GroupReading r;
  r.resize(values.size());
  std::size_t i = 0;
  for (auto v : values) {
    r[i].value = v;
    r[i].time_enabled = ns;
    r[i].time_running = ns;
    ++i;
  }
  return r;
}

}  // namespace selfperf::test
