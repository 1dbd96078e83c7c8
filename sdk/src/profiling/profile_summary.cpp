// The profiler's summary as JSON: the counts of Profiler::summary()'s line, exact, with the losses by cause and
// the files written, for scripts and CI that must not parse a sentence.
#include "profiling/profile_summary.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "output/json_text.hpp"
#include "profiling/profile_output.hpp"
#include "selfperf/error.hpp"

namespace selfperf::detail {
namespace {

const char* unwinder_name(Unwinder u) {
  switch (u) {
    case Unwinder::frame_pointer: return "frame_pointer";
    case Unwinder::libunwind: return "libunwind";
    case Unwinder::kernel: return "kernel";
  }
  return "unknown";
}

}  // namespace

std::string profile_summary_json(const ProfileSummaryFacts& f) {
  static const Sampler::Totals kNone;
  const Sampler::Totals& t = f.totals ? *f.totals : kNone;
  using json = nlohmann::ordered_json;
  json out;
  out["format"] = "selfperf-profile-summary";
  out["version"] = 1;
  // Every other number is a count (samples, threads, events); the key says where it is not.
  out["units"] = {{"default", "count"}, {"frequency_hz", "Hz"}, {"per_thread.rate_hz", "Hz"}};
  out["pid"] = f.pid;
  out["comm"] = f.comm;
  out["event"] = f.event;
  out["frequency_hz"] = f.frequency_hz;
  out["unwinder"] = unwinder_name(f.unwinder);
  out["written"] = !f.perf_data.empty();
  out["write_failed"] = f.write_failed;
  out["samples"] = f.samples;
  out["samples_dropped"] = f.samples_dropped;
  // Threads that were sampled: the drain thread, attached by the thread hook and then detached, is not one.
  std::uint64_t sampled = 0;
  json per_thread = json::array();
  for (const auto& thread : t.threads) {
    if (thread.samples + thread.lost == 0) continue;
    ++sampled;
    per_thread.push_back(
        {{"tid", thread.tid}, {"samples", thread.samples}, {"lost", thread.lost}, {"rate_hz", thread.rate}});
  }
  out["threads"] = sampled;
  out["lost"] = {{"total", t.lost},
                 {"buffer_full", t.lost_buffer_full},
                 {"kernel", t.lost_kernel},
                 {"coalesced", t.lost_coalesced}};
  out["throttled"] = t.throttled;
  out["rate_lowered"] = t.rate_lowered;
  out["threads_not_signalled"] = t.threads_not_signalled;
  out["attach_failed"] = t.attach_failed;
  out["per_thread"] = std::move(per_thread);
  const bool written = !f.perf_data.empty();
  out["files"] = {{"perf_data", written ? json(f.perf_data) : json()},
                  {"folded", written && f.rendered ? json(f.perf_data + ".folded") : json()},
                  {"svg", written && f.rendered ? json(f.perf_data + ".svg") : json()}};
  return dump_json(out);
}

std::string write_profile_summary(const std::string& pattern, std::int64_t run_start_ns, const std::string& json) {
  std::string path;
  const int fd = claim_profile_output(pattern, ::getpid(), run_start_ns, path, "SELFPERF_SUMMARY");
  std::string text = json + "\n";
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      throw Error("profile: cannot write the summary to " + path + " (" + std::strerror(err) +
                      "); set SELFPERF_SUMMARY to a path on a writable file system",
                  err);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  ::close(fd);
  return path;
}

}  // namespace selfperf::detail
