// selfperf record -p: a ProcessWatcher over the given processes and those they start, its records streamed
// into a PerfDataWriter as they are read (COMM and MMAP2 of what ran before the attach, or before a followed
// process's events opened, synthesized from /proc, as perf record does), then the folded stacks and flame graph
// from the written file, as the command mode draws them. With --call-graph dwarf, the samples carry user
// registers and stack copies instead of the kernel's call chains, and each is unwound here (StackCopyUnwinder)
// before it is written: the file holds call chains either way.
#include "record_pid.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <set>

#include "merge.hpp"
#include "record_pid_dwarf.hpp"
#include "selfperf/error.hpp"
#include "selfperf/event.hpp"
#include "selfperf/perf_data_writer.hpp"
#include "selfperf/process_watcher.hpp"
#include "selfperf/sampling_event.hpp"
#include "selfperf/task_counters.hpp"
#include "selfperf/task_record.hpp"

namespace selfperf::tool {
namespace {

volatile std::sig_atomic_t stop_signal = 0;
void on_stop(int sig) { stop_signal = sig; }

// Without SA_RESTART, so that the signal ends the poller's wait at once.
void catch_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

std::string thread_comm(pid_t pid, pid_t tid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/comm");
  std::string comm;
  std::getline(in, comm);
  return comm;
}

std::size_t stack_copy_bytes(const RecordPidArgs& a) {
  return a.stack_copy != 0 ? a.stack_copy : kDefaultStackCopy;
}

perf_event_attr sampling_attr(const RecordPidArgs& a) {
  unsigned long hz = 999;
  if (!a.frequency.empty()) {
    char* end = nullptr;
    hz = std::strtoul(a.frequency.c_str(), &end, 10);
    if (a.frequency[0] == '-' || *end != '\0' || hz == 0)
      throw Error("selfperf record: -F " + a.frequency + ": give samples per second, a number above 0");
  }
  const EventSpec spec = parse_event(a.event.empty() ? "cpu-clock" : a.event);
  perf_event_attr attr = callchain_sampling_attr(spec, {.frequency = hz, .kernel_frames = KernelFrames::exclude});
  // User space only, whoever runs it: the perf.data writer writes user call chains, and an unprivileged user
  // (perf_event_paranoid 2) may sample only that; the same profile as root and as that user.
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  attr.sample_type |= PERF_SAMPLE_CPU;
  if (a.call_graph == "dwarf") detail::sample_stack_copies(attr, stack_copy_bytes(a));
  return attr;
}

detail::CodeMapping code_mapping(const Mmap2Info& m) { return {m.start, m.len, m.pgoff, m.filename}; }

struct Totals {
  std::uint64_t samples = 0;
  std::uint64_t lost = 0;
  std::uint64_t undecodable = 0;
  std::set<std::uint32_t> processes;
  std::set<std::uint32_t> threads;
};

// Copies one ring record into the file; what the writer has no record for (THROTTLE, …) is left out.
class RecordCopier {
 public:
  // `unwinder`: null where the samples hold the kernel's call chains.
  RecordCopier(PerfDataWriter& writer, const SampleFormat& format, Totals& totals,
               detail::StackCopyUnwinder* unwinder)
      : writer_(writer), format_(format), totals_(totals), unwinder_(unwinder) {}

  void operator()(const RecordView& r) {
    switch (r.type()) {
      case PERF_RECORD_SAMPLE: {
        SampleRecord rec;
        if (decode_sample(r, format_, rec) != DecodeStatus::ok) return miss();
        Sample s = to_sample(rec, frames_);
        if (unwinder_ != nullptr) s.frames = unwinder_->unwind(rec, format_.sample_regs_user);
        if (s.frames.empty() && rec.has(PERF_SAMPLE_IP)) {
          frames_[0] = rec.ip;
          s.frames = std::span<const std::uint64_t>(frames_.data(), 1);
        }
        writer_.write_sample(s, 0);
        ++totals_.samples;
        totals_.processes.insert(rec.pid);
        totals_.threads.insert(rec.tid);
        return;
      }
      case PERF_RECORD_COMM: {
        CommRecord c;
        if (decode_comm(r, format_, c) != DecodeStatus::ok) return miss();
        if (c.exec && unwinder_ != nullptr) unwinder_->exec(static_cast<pid_t>(c.pid));
        writer_.write_comm(static_cast<std::int32_t>(c.pid), static_cast<std::int32_t>(c.tid), std::string(c.comm),
                           c.sample_id.time, c.exec);
        return;
      }
      case PERF_RECORD_MMAP2: {
        Mmap2Record m;
        if (decode_mmap2(r, format_, m) != DecodeStatus::ok) return miss();
        Mmap2Info info;
        info.pid = static_cast<std::int32_t>(m.pid);
        info.tid = static_cast<std::int32_t>(m.tid);
        info.start = m.addr;
        info.len = m.len;
        info.pgoff = m.pgoff;
        info.maj = m.maj;
        info.min = m.min;
        info.ino = m.ino;
        info.ino_generation = m.ino_generation;
        info.prot = m.prot;
        info.flags = m.flags;
        info.filename = std::string(m.filename);
        if (unwinder_ != nullptr && (m.prot & PROT_EXEC))
          unwinder_->add_mapping(static_cast<pid_t>(m.pid), code_mapping(info));
        writer_.write_mmap2(info, m.sample_id.time);
        return;
      }
      case PERF_RECORD_FORK:
      case PERF_RECORD_EXIT: {
        TaskRecord t;
        if (decode_task(r, format_, t) != DecodeStatus::ok) return miss();
        writer_.write_task(t.exit, static_cast<std::int32_t>(t.pid), static_cast<std::int32_t>(t.ppid),
                           static_cast<std::int32_t>(t.tid), static_cast<std::int32_t>(t.ptid), t.time);
        return;
      }
      case PERF_RECORD_LOST: {
        LostRecord l;
        if (decode_lost(r, format_, l) != DecodeStatus::ok) return miss();
        writer_.write_lost(l.lost, 0);
        totals_.lost += l.lost;
        return;
      }
      default:
        return;
    }
  }

 private:
  void miss() { ++totals_.undecodable; }

  PerfDataWriter& writer_;
  const SampleFormat& format_;
  Totals& totals_;
  detail::StackCopyUnwinder* unwinder_;
  std::array<std::uint64_t, 1024> frames_{};
};

// The threads the processes have now, for sizing their rings (the watcher lists them again as it attaches).
std::size_t count_threads(const std::vector<pid_t>& pids) {
  std::size_t n = 0;
  for (pid_t pid : pids) {
    std::error_code ec;
    for (std::filesystem::directory_iterator it("/proc/" + std::to_string(pid) + "/task", ec), end; !ec && it != end;
         it.increment(ec))
      ++n;
  }
  return n;
}

// COMM of each thread and MMAP2 of each executable mapping, from /proc: what ran before the attach, or before a
// followed process's events opened (an exec then left no records), placed at `time`, after its FORK. Returns
// the mappings written.
std::vector<Mmap2Info> write_process(PerfDataWriter& writer, pid_t pid, const std::vector<pid_t>& tids,
                                     std::uint64_t time = 0) {
  const auto p = static_cast<std::int32_t>(pid);
  writer.write_comm(p, p, thread_comm(pid, pid), time);
  for (pid_t tid : tids)
    if (tid != pid) writer.write_comm(p, static_cast<std::int32_t>(tid), thread_comm(pid, tid), time);
  std::vector<Mmap2Info> maps = read_executable_maps(pid);
  for (const auto& m : maps) writer.write_mmap2(m, time);
  return maps;
}

std::string pid_list(const std::vector<pid_t>& pids) {
  std::string s;
  for (pid_t p : pids) s += (s.empty() ? "" : ",") + std::to_string(p);
  return s;
}

}  // namespace

bool parse_pid_list(const std::string& text, std::vector<pid_t>& out) {
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string one = text.substr(at, comma - at);
    char* end = nullptr;
    const long v = std::strtol(one.c_str(), &end, 10);
    if (one.empty() || one[0] == '-' || one[0] == '+' || *end != '\0' || v <= 0 || v > 0x3fffffff) return false;
    out.push_back(static_cast<pid_t>(v));
    at = comma + 1;
  }
  return !out.empty();
}

int record_pids(const RecordPidArgs& a) {
  const bool to_stdout = a.output == "-";
  if (to_stdout && ::isatty(STDOUT_FILENO)) {
    std::fprintf(stderr, "selfperf record: -o -: standard output is a terminal; pipe it (| perf report -i -) or "
                         "redirect it to a file\n");
    return 2;
  }
  try {
    const std::string event = a.event.empty() ? "cpu-clock" : a.event;
    const bool dwarf = a.call_graph == "dwarf";
    const std::size_t ring_pages =
        dwarf ? stack_copy_ring_pages(stack_copy_bytes(a), count_threads(a.pids)) : ProcessWatcherOptions{}.data_pages;
    ProcessWatcher watcher(sampling_attr(a), event, ProcessWatcherOptions{.data_pages = ring_pages, .inherit = a.inherit});
    std::optional<detail::StackCopyUnwinder> unwinder;
    if (dwarf) unwinder.emplace();
    std::vector<std::pair<pid_t, std::vector<pid_t>>> attached;
    for (pid_t pid : a.pids) attached.emplace_back(pid, watcher.add(pid));

    PerfDataWriterOptions options;
    options.synthesize_process = false;
    options.cmdline = {"selfperf", "record", "-p", pid_list(a.pids)};
    // The file's attr says what its samples hold: call chains, never the registers and stack copies sampled.
    perf_event_attr file_attr = watcher.attr();
    file_attr.sample_regs_user = 0;
    file_attr.sample_stack_user = 0;
    PerfDataWriter writer(a.output, {EventDescription{event, file_attr, {}}}, options);
    // What the processes mapped and were called before the attach; what comes later arrives as records.
    // A process's records from /proc, and its mappings for the unwinder (later ones come as MMAP2 records).
    auto note_process = [&](pid_t pid, const std::vector<pid_t>& tids, std::uint64_t time) {
      const std::vector<Mmap2Info> maps = write_process(writer, pid, tids, time);
      if (!unwinder) return;
      std::vector<detail::CodeMapping> code;
      for (const auto& m : maps) code.push_back(code_mapping(m));
      unwinder->add_process(pid, std::move(code));
    };
    for (const auto& [pid, tids] : attached) note_process(pid, tids, 0);
    // Before the line that says sampling started: whoever waits for it may send SIGINT at once.
    catch_stop_signals();
    if (!a.quiet) {
      std::size_t threads = 0;
      for (const auto& at : attached) threads += at.second.size();
      const std::string chains = dwarf ? ", call chains unwound from " + std::to_string(stack_copy_bytes(a)) +
                                             "-byte stack copies"
                                       : "";
      std::fprintf(stderr, "selfperf record: sampling %zu process%s (%zu threads) with %s%s; Ctrl-C to stop\n",
                   attached.size(), attached.size() == 1 ? "" : "es", threads, event.c_str(), chains.c_str());
    }

    Totals totals;
    RecordCopier copy(writer, watcher.format(), totals, unwinder ? &*unwinder : nullptr);
    const auto started = std::chrono::steady_clock::now();
    const auto deadline = started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                        std::chrono::duration<double>(a.duration));
    std::string why = "every process exited";
    while (!watcher.empty()) {
      if (stop_signal != 0) {
        why = stop_signal == SIGINT ? "interrupted (SIGINT)" : "terminated (SIGTERM)";
        break;
      }
      // Short: a new thread or process is sampled from the poll that reads its FORK on (a FORK record does not
      // wake the poll; only a quarter ring of samples does). At 10 ms a new thread lost ~4 of 45 samples (999 Hz,
      // medians; at 100 ms most threads living 50 ms had none), and recording 101 threads for 5 s took 8.9 ms of
      // CPU instead of 4.0 (docs/sampling.md).
      auto timeout = std::chrono::milliseconds(10);
      if (a.duration > 0) {
        const auto left = deadline - std::chrono::steady_clock::now();
        if (left <= std::chrono::steady_clock::duration::zero()) {
          why = "--duration reached";
          break;
        }
        timeout = std::min(timeout, std::chrono::ceil<std::chrono::milliseconds>(left));
      }
      watcher.poll(
          timeout, std::ref(copy),
          [&](pid_t pid) {  // the processes given; the followed ones are counted in the summary
            if (!a.quiet && std::find(a.pids.begin(), a.pids.end(), pid) != a.pids.end())
              std::fprintf(stderr, "selfperf record: process %d exited\n", static_cast<int>(pid));
            if (unwinder) unwinder->forget(pid);  // its rings are read: no sample of it is left
          },
          [&](const FollowedProcess& p) { note_process(p.pid, p.tids, p.fork_time); });
      writer.write_finished_round();
    }
    watcher.read_all(std::ref(copy));
    writer.close();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

    std::uint64_t stacks = totals.samples;
    const std::filesystem::path folded = a.output.string() + ".folded";
    const std::filesystem::path svg = a.output.string() + ".svg";
    if (!to_stdout) stacks = render_merged(a.output, folded, svg, "selfperf record -p " + pid_list(a.pids));
    if (!a.quiet) {
      const auto stats = watcher.stats();
      std::fprintf(stderr,
                   "selfperf record: %s after %.2f s: %zu processes, %zu threads, %llu samples, %llu lost\n",
                   why.c_str(), seconds, totals.processes.size(), totals.threads.size(),
                   static_cast<unsigned long long>(totals.samples),
                   static_cast<unsigned long long>(stats.total_lost()));
      if (watcher.smaller_rings() > 0)
        std::fprintf(stderr, "  (locked memory ran out: %zu rings mapped smaller than %zu pages; raise "
                             "kernel.perf_event_mlock_kb or ulimit -l if samples were lost)\n",
                     watcher.smaller_rings(), ring_pages);
      if (unwinder) print_unwind_summary(unwinder->stats(), stats.total_lost(), stack_copy_bytes(a), ring_pages);
      if (watcher.followed_processes() > 0)
        std::fprintf(stderr, "  %zu processes they started were followed from their fork (--no-inherit: not)\n",
                     watcher.followed_processes());
      if (watcher.missed_threads() > 0)
        std::fprintf(stderr, "  %zu new threads not sampled; the last because %s\n", watcher.missed_threads(),
                     watcher.last_miss().c_str());
      if (totals.undecodable > 0)
        std::fprintf(stderr, "  (%llu records did not decode and were left out)\n",
                     static_cast<unsigned long long>(totals.undecodable));
      if (totals.samples == 0)
        std::fprintf(stderr, "  no sample: the processes did not run on a CPU in user space while watched\n");
      if (stacks < totals.samples)
        std::fprintf(stderr, "  (%llu samples without a stack in %s)\n",
                     static_cast<unsigned long long>(totals.samples - stacks), a.output.c_str());
      if (to_stdout)
        std::fprintf(stderr, "selfperf record: wrote pipe-mode perf.data to standard output (perf report -i -)\n");
      else
        std::fprintf(stderr, "selfperf record: wrote %s (perf report -i %s), %s, %s\n", a.output.c_str(),
                     a.output.c_str(), folded.c_str(), svg.c_str());
    }
  } catch (const Error& e) {
    const std::string what = e.what();
    std::fprintf(stderr, "%s%s\n", what.rfind("selfperf", 0) == 0 ? "" : "selfperf record: ", what.c_str());
    return 1;
  }
  return 0;
}

}  // namespace selfperf::tool
