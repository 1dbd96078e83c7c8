// ProcessWatcher: a sampling event per thread of other processes (not inherited: see the header), one ring
// each, one epoll set.
#include "selfperf/process_watcher.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "events/perf_syscall.hpp"
#include "selfperf/error.hpp"
#include "selfperf/task_record.hpp"

namespace selfperf {
namespace {

// Who may attach to whom decides an EACCES/EPERM as much as perf_event_paranoid does: say which of the two
// refused, so the remedy is the right one.
std::string access_error(int err, const perf_event_attr& attr, const std::string& event, pid_t pid) {
  const std::string head = "process " + std::to_string(pid) + ": cannot sample it (" + std::strerror(err) + "): ";
  const int paranoid = detail::perf_event_paranoid();
  if (!detail::has_perf_privilege()) {
    if (paranoid > 2)
      return head + "perf_event_paranoid is " + std::to_string(paranoid) +
             ", which forbids perf_event_open to unprivileged users; lower it (sudo sysctl "
             "kernel.perf_event_paranoid=2) or run with CAP_PERFMON";
    struct stat st {};
    if (::stat(("/proc/" + std::to_string(pid)).c_str(), &st) == 0 && st.st_uid != ::geteuid())
      return head + "it belongs to uid " + std::to_string(st.st_uid) + " and this program runs as uid " +
             std::to_string(::geteuid()) +
             "; sampling another user's process needs ptrace access to it: run as that user, or as root / "
             "with CAP_PERFMON";
    if (!attr.exclude_kernel && paranoid >= 2)
      return head + detail::open_error_message(err, attr, event);
    return head + "ptrace access to it was refused although it runs as this user (a setuid or non-dumpable "
                  "process: PR_SET_DUMPABLE 0); run as root or with CAP_SYS_PTRACE";
  }
  return head + detail::open_error_message(err, attr, event);
}

std::string no_such_process(pid_t pid) {
  return "process " + std::to_string(pid) + ": no such process (it is not running, or it exited); check the pid "
         "with ps -p " + std::to_string(pid);
}

// The tids in /proc/PID/task. Throws naming the cause: gone, or out of descriptors (EMFILE).
std::vector<pid_t> list_threads(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    const int err = errno;
    if (err == ENOENT || err == ESRCH) throw Error(no_such_process(pid), ESRCH);
    if (err == EMFILE || err == ENFILE)
      throw Error("process " + std::to_string(pid) + ": cannot list its threads in " + dir +
                      ": out of file descriptors (each thread takes one); raise the limit (ulimit -n)",
                  err);
    throw Error("process " + std::to_string(pid) + ": cannot list its threads in " + dir + ": " +
                    std::strerror(err),
                err);
  }
  std::vector<pid_t> tids;
  while (const dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long tid = std::strtol(e->d_name, &end, 10);
    if (tid > 0 && *end == '\0') tids.push_back(static_cast<pid_t>(tid));
  }
  ::closedir(d);
  if (tids.empty()) throw Error(no_such_process(pid), ESRCH);  // a zombie: nothing left to sample
  std::sort(tids.begin(), tids.end());
  return tids;
}

void add_stats(RingBufferStats& to, const RingBufferStats& s) noexcept {
  to.records += s.records;
  to.samples += s.samples;
  to.lost += s.lost;
  to.lost_records += s.lost_records;
  to.lost_samples += s.lost_samples;
  to.throttles += s.throttles;
  to.unthrottles += s.unthrottles;
  to.corruptions += s.corruptions;
  to.bytes_dropped += s.bytes_dropped;
}

}  // namespace

ProcessWatcher::ProcessWatcher(const perf_event_attr& attr, std::string event_name, ProcessWatcherOptions options)
    : attr_(attr), event_name_(std::move(event_name)), options_(options) {
  attr_.inherit = 0;  // see the header: an inherited cpu -1 event cannot be mmapped
  attr_.task = 1;
  attr_.comm = 1;
  attr_.comm_exec = 1;
  attr_.mmap = 1;
  attr_.mmap2 = 1;
  attr_.sample_id_all = 1;
  attr_.sample_type |= PERF_SAMPLE_TID | PERF_SAMPLE_TIME;  // FORK/COMM/MMAP2 say when and for whom
  attr_.disabled = 0;
  attr_.enable_on_exec = 0;
  // A wakeup per quarter ring instead of per sample: the poll loop reads every ring each round anyway.
  attr_.watermark = 1;
  attr_.wakeup_watermark =
      static_cast<std::uint32_t>(options_.data_pages * static_cast<std::size_t>(::getpagesize()) / 4);
  format_ = SampleFormat::from_attr(attr_);
}

ProcessWatcher::~ProcessWatcher() {
  for (auto& c : channels_) close_channel(c);
}

void ProcessWatcher::close_channel(Channel& c) noexcept {
  if (c.fd < 0) return;
  poller_.remove(c.fd);
  add_stats(closed_stats_, c.ring.stats());
  ::close(c.fd);  // the ring's mapping keeps the event until the Channel, erased next, unmaps it
  c.fd = -1;
}

bool ProcessWatcher::open_channel(pid_t pid, pid_t tid) {
  perf_event_attr attr = attr_;
  const int fd = detail::perf_event_open(attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ESRCH) return false;  // a thread that exited since /proc listed it
    if (err == EACCES || err == EPERM) throw Error(access_error(err, attr_, event_name_, pid), err);
    throw Error("process " + std::to_string(pid) + ", thread " + std::to_string(tid) + ": " +
                    detail::open_error_message(err, attr_, event_name_),
                err);
  }
  try {
    channels_.push_back(Channel{pid, tid, fd, map_ring(fd), false});
    poller_.add(fd, static_cast<std::uint64_t>(fd));
  } catch (const Error& e) {
    if (!channels_.empty() && channels_.back().fd == fd) channels_.pop_back();
    poller_.remove(fd);
    ::close(fd);
    throw Error("process " + std::to_string(pid) + ", thread " + std::to_string(tid) + ": " + e.what(),
                e.errno_value());
  }
  seen_.emplace_back(pid, tid);
  return true;
}

RingBuffer ProcessWatcher::map_ring(int fd) {
  // Out of locked memory (perf_event_mlock_kb, then RLIMIT_MEMLOCK: ~135 rings of 16 pages for an
  // unprivileged user here), a smaller ring still samples that thread, if it loses more between two polls.
  for (std::size_t pages = options_.data_pages;; pages /= 2) {
    try {
      return RingBuffer(fd, pages);
    } catch (const Error& e) {
      if (pages <= 1 || (e.errno_value() != EPERM && e.errno_value() != ENOMEM)) throw;
      ++smaller_rings_;
    }
  }
}

std::vector<pid_t> ProcessWatcher::add(pid_t pid) {
  if (pid <= 0) throw Error("process " + std::to_string(pid) + ": not a process id; give a positive pid", EINVAL);
  if (std::find(pids_.begin(), pids_.end(), pid) != pids_.end()) return {};
  const std::vector<pid_t> tids = list_threads(pid);
  const std::size_t before = channels_.size();
  std::vector<pid_t> opened;
  try {
    for (pid_t tid : tids)
      if (open_channel(pid, tid)) opened.push_back(tid);
  } catch (...) {
    for (std::size_t i = before; i < channels_.size(); ++i) close_channel(channels_[i]);
    channels_.erase(channels_.begin() + static_cast<std::ptrdiff_t>(before), channels_.end());
    std::erase_if(seen_, [&](const auto& s) { return s.first == pid; });
    throw;
  }
  if (opened.empty()) throw Error(no_such_process(pid), ESRCH);
  pids_.push_back(pid);
  return opened;
}

void ProcessWatcher::note_fork(const RecordView& record) {
  TaskRecord t;
  if (decode_task(record, format_, t) != DecodeStatus::ok || t.exit) return;
  const auto pid = static_cast<pid_t>(t.pid);
  if (std::find(pids_.begin(), pids_.end(), pid) == pids_.end()) return;  // a new process: not followed
  if (std::find(seen_.begin(), seen_.end(), std::pair<pid_t, pid_t>(pid, static_cast<pid_t>(t.tid))) != seen_.end())
    return;
  if (std::find(forked_.begin(), forked_.end(), pid) == forked_.end())
    forked_.push_back(pid);
}

void ProcessWatcher::follow_new_threads() {
  // The whole task list, not just the tid of the FORK read: a thread that started another before its own
  // event opened left no FORK anywhere.
  for (pid_t pid : forked_) {
    std::vector<pid_t> tids;
    try {
      tids = list_threads(pid);
    } catch (const Error&) {
      continue;  // exited (its hangups report it), or out of descriptors: the next FORK retries
    }
    for (pid_t tid : tids) {
      if (std::find(seen_.begin(), seen_.end(), std::pair<pid_t, pid_t>(pid, tid)) != seen_.end()) continue;
      try {
        open_channel(pid, tid);
      } catch (const Error& e) {
        ++missed_threads_;
        last_miss_ = e.what();
        seen_.emplace_back(pid, tid);  // tried once; the error is counted, not repeated every round
      }
    }
  }
  forked_.clear();
}

bool ProcessWatcher::remove(pid_t pid) {
  auto it = std::find(pids_.begin(), pids_.end(), pid);
  if (it == pids_.end()) return false;
  pids_.erase(it);
  for (auto& c : channels_)
    if (c.pid == pid) close_channel(c);
  std::erase_if(channels_, [](const Channel& c) { return c.fd < 0; });
  return true;
}

void ProcessWatcher::wait(std::chrono::milliseconds timeout) {
  poller_.poll(timeout, [&](const PollEvent& e) {
    if (!e.hangup && !e.error) return;
    for (auto& c : channels_)
      if (c.fd == e.fd) c.hung_up = true;
  });
}

std::vector<pid_t> ProcessWatcher::close_hung_up() {
  std::vector<pid_t> exited;
  bool any = false;
  for (auto& c : channels_)
    if (c.hung_up) {
      close_channel(c);
      any = true;
    }
  if (!any) return exited;
  std::erase_if(channels_, [](const Channel& c) { return c.fd < 0; });
  for (pid_t pid : pids_)
    if (std::none_of(channels_.begin(), channels_.end(), [&](const Channel& c) { return c.pid == pid; }))
      exited.push_back(pid);
  for (pid_t pid : exited) std::erase(pids_, pid);
  return exited;
}

RingBufferStats ProcessWatcher::stats() const noexcept {
  RingBufferStats total = closed_stats_;
  for (const auto& c : channels_) add_stats(total, c.ring.stats());
  return total;
}

}  // namespace selfperf
