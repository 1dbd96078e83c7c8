// Claiming a profile file: O_EXCL for new names, flock + mtime for existing ones (profile_output.hpp).
#include "profiling/profile_output.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "selfperf/error.hpp"

namespace selfperf::detail {
namespace {

constexpr const char* kRunVariable = "SELFPERF_RUN";
constexpr int kMaxSuffix = 1000;

std::int64_t coarse_now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::string expand(const std::string& pattern, pid_t pid) {
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'p') {
      out += std::to_string(pid);
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

// An existing file we may take over: not held by a running writer of this run, and older than the run.
// Its lock is held from here on, so two processes cannot both take it.
bool take_stale(int fd, std::int64_t run_start_ns) {
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) return false;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return false;
  const std::int64_t mtime = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  if (mtime >= run_start_ns) return false;  // written by a process of this run (or in its first tick: kept)
  return ::ftruncate(fd, 0) == 0;
}

// -1 with errno EEXIST when `name` is taken; -1 with another errno when it cannot be created at all.
int try_claim(const std::string& name, std::int64_t run_start_ns) {
  int fd = ::open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd >= 0) {
    ::flock(fd, LOCK_EX);  // a new file: nobody else can hold it
    return fd;
  }
  if (errno != EEXIST) return -1;
  fd = ::open(name.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0 && take_stale(fd, run_start_ns)) return fd;
  if (fd >= 0) ::close(fd);
  errno = EEXIST;
  return -1;
}

}  // namespace

std::int64_t join_profile_run() {
  if (const char* run = std::getenv(kRunVariable)) {
    char* end = nullptr;
    long long v = std::strtoll(run, &end, 10);
    if (end != run && *end == '\0' && v > 0) return v;
  }
  const std::int64_t now = coarse_now_ns();
  ::setenv(kRunVariable, std::to_string(now).c_str(), 1);
  return now;
}

int claim_profile_output(const std::string& pattern, pid_t pid, std::int64_t run_start_ns, std::string& path,
                         const char* variable) {
  const std::string first = expand(pattern, pid);
  const std::string stem = pattern.find("%p") != std::string::npos ? first : first + "." + std::to_string(pid);
  for (int suffix = -1; suffix <= kMaxSuffix; ++suffix) {
    const std::string name = suffix < 0 ? first : suffix == 0 ? stem : stem + "." + std::to_string(suffix);
    if (suffix == 0 && stem == first) continue;
    const int fd = try_claim(name, run_start_ns);
    if (fd >= 0) {
      path = name;
      return fd;
    }
    if (errno != EEXIST) {
      const int err = errno;
      throw Error("profile: cannot create " + name + " (" + std::strerror(err) +
                      "); set " + variable + " to a path in a writable directory",
                  err);
    }
  }
  throw Error("profile: " + first + " and " + stem + ".1 … ." + std::to_string(kMaxSuffix) +
              " all exist and belong to this run; set " + variable + " to a new name (%p: the pid)");
}

}  // namespace selfperf::detail
