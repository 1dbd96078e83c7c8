// ProcessWatcher: a sampling event per thread of other processes (not inherited: see the header), one ring
// each, one epoll set; new threads and processes followed from their FORK records.
#include "selfperf/process_watcher.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
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

// The processes `tid` forked and that have not been reaped (/proc/PID/task/TID/children; empty where the kernel
// lacks CONFIG_PROC_CHILDREN).
std::vector<pid_t> list_children(pid_t pid, pid_t tid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/children");
  std::vector<pid_t> out;
  for (long child = 0; in >> child;)
    if (child > 0) out.push_back(static_cast<pid_t>(child));
  return out;
}

// Listings of a process's threads are repeated until one finds no thread not opened yet, at most this many
// times: a thread started while the events of the others opened left no FORK in any ring.
constexpr int kListings = 4;

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

ProcessWatcher::Checkpoint ProcessWatcher::checkpoint() const noexcept {
  return {channels_.size(), pids_.size(), seen_.size(), vanished_threads_, smaller_rings_};
}

void ProcessWatcher::roll_back(const Checkpoint& to) noexcept {
  // The channels opened since `to` were never read: closing them adds nothing to the stats.
  for (std::size_t i = to.channels; i < channels_.size(); ++i) close_channel(channels_[i]);
  channels_.erase(channels_.begin() + static_cast<std::ptrdiff_t>(to.channels), channels_.end());
  pids_.resize(to.pids);
  seen_.resize(to.seen);
  vanished_threads_ = to.vanished;
  smaller_rings_ = to.smaller_rings;
}

bool ProcessWatcher::watched(pid_t pid) const noexcept {
  return std::find(pids_.begin(), pids_.end(), pid) != pids_.end();
}

bool ProcessWatcher::seen(pid_t pid, pid_t tid) const noexcept {
  return std::find(seen_.begin(), seen_.end(), std::pair<pid_t, pid_t>(pid, tid)) != seen_.end();
}

std::vector<pid_t> ProcessWatcher::threads(pid_t pid) const {
  std::vector<pid_t> out;
  for (const auto& c : channels_)
    if (c.pid == pid) out.push_back(c.tid);
  return out;
}

bool ProcessWatcher::open_channel(pid_t pid, pid_t tid) {
  perf_event_attr attr = attr_;
  const int fd = detail::perf_event_open(attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ESRCH) {  // a thread that exited since /proc listed it (or a zombie leader: PF_EXITING)
      ++vanished_threads_;
      seen_.emplace_back(pid, tid);  // not tried again by the next listing
      return false;
    }
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

std::vector<pid_t> ProcessWatcher::open_listed(pid_t pid, std::vector<pid_t> tids, bool count_errors) {
  std::vector<pid_t> opened;
  for (int listing = 0;; ++listing) {
    bool more = false;
    for (pid_t tid : tids) {
      if (seen(pid, tid)) continue;
      try {
        if (open_channel(pid, tid)) opened.push_back(tid);
      } catch (const Error& e) {
        if (!count_errors) throw;
        ++missed_threads_;
        last_miss_ = e.what();
        seen_.emplace_back(pid, tid);  // tried once; the error is counted, not repeated every round
      }
      more = true;
    }
    if ((!more && listing > 0) || listing + 1 == kListings) return opened;
    try {
      tids = list_threads(pid);
    } catch (const Error& e) {
      if (e.errno_value() == ESRCH || count_errors) return opened;  // gone since: its hangups report it
      throw;
    }
  }
}

std::vector<pid_t> ProcessWatcher::add(pid_t pid) {
  if (pid <= 0) throw Error("process " + std::to_string(pid) + ": not a process id; give a positive pid", EINVAL);
  if (watched(pid)) return {};
  const Checkpoint before = checkpoint();
  std::vector<pid_t> opened;
  try {
    opened = open_listed(pid, list_threads(pid), false);
  } catch (...) {
    roll_back(before);
    throw;
  }
  if (opened.empty()) {  // every thread exited while listed
    roll_back(before);
    throw Error(no_such_process(pid), ESRCH);
  }
  pids_.push_back(pid);
  return opened;
}

void ProcessWatcher::note_fork(const RecordView& record) {
  if (!options_.inherit) return;
  TaskRecord t;
  if (decode_task(record, format_, t) != DecodeStatus::ok || t.exit) return;
  const auto pid = static_cast<pid_t>(t.pid);
  const auto parent = static_cast<pid_t>(t.ppid);
  if (pid != parent) {  // a new process (pid and ppid are thread-group ids; a new thread has its parent's)
    if (!watched(parent) || watched(pid)) return;
    if (std::none_of(new_processes_.begin(), new_processes_.end(),
                     [&](const PendingProcess& p) { return p.pid == pid; }))
      new_processes_.push_back({pid, parent, t.time});
    return;
  }
  if (!watched(pid) || seen(pid, static_cast<pid_t>(t.tid))) return;
  if (std::find(forked_.begin(), forked_.end(), pid) == forked_.end()) forked_.push_back(pid);
}

void ProcessWatcher::follow_new_tasks() {
  // The whole task list, not just the tid of the FORK read: a thread that started another before its own
  // event opened left no FORK anywhere.
  for (pid_t pid : forked_) {
    if (!watched(pid)) continue;
    try {
      open_listed(pid, list_threads(pid), true);
    } catch (const Error&) {
      // exited (its hangups report it), or out of descriptors listing it: the next FORK retries
    }
  }
  forked_.clear();
  // Grows while it is walked: the children a followed process forked before its events opened.
  std::vector<PendingProcess> queue = std::move(new_processes_);
  new_processes_.clear();
  for (std::size_t i = 0; i < queue.size(); ++i) follow_process(PendingProcess(queue[i]), queue);
}

void ProcessWatcher::follow_process(const PendingProcess& p, std::vector<PendingProcess>& queue) {
  if (watched(p.pid)) return;
  std::vector<pid_t> tids;
  try {
    tids = list_threads(p.pid);
  } catch (const Error& e) {
    if (e.errno_value() == ESRCH) {
      ++vanished_threads_;  // exited (and reaped) before its FORK was read: one thread at least
    } else {
      ++missed_threads_;
      last_miss_ = e.what();
    }
    return;
  }
  std::vector<pid_t> opened = open_listed(p.pid, std::move(tids), true);
  if (opened.empty()) return;  // every thread gone or failed, each counted
  pids_.push_back(p.pid);
  ++followed_processes_;
  for (pid_t tid : opened)
    for (pid_t child : list_children(p.pid, tid)) queue.push_back({child, p.pid, p.fork_time});
  followed_.push_back(FollowedProcess{p.pid, p.parent, p.fork_time, std::move(opened)});
}

bool ProcessWatcher::remove(pid_t pid) {
  auto it = std::find(pids_.begin(), pids_.end(), pid);
  if (it == pids_.end()) return false;
  pids_.erase(it);
  for (auto& c : channels_)
    if (c.pid == pid) close_channel(c);
  std::erase_if(channels_, [](const Channel& c) { return c.fd < 0; });
  std::erase_if(seen_, [&](const auto& s) { return s.first == pid; });
  return true;
}

void ProcessWatcher::update(std::span<const pid_t> pids) {
  std::vector<pid_t> kept, dropped;
  for (pid_t pid : pids_)
    (std::find(pids.begin(), pids.end(), pid) != pids.end() ? kept : dropped).push_back(pid);
  const Checkpoint before = checkpoint();
  std::vector<std::pair<pid_t, std::vector<pid_t>>> listed;  // the kept processes' threads, for the gone ones
  try {
    for (pid_t pid : pids)
      if (!watched(pid)) add(pid);
    for (pid_t pid : kept) {
      std::vector<pid_t> opened;
      listed.emplace_back(pid, open_missing(pid, opened));
    }
  } catch (...) {
    roll_back(before);
    throw;
  }
  for (const auto& [pid, tids] : listed) mark_gone(pid, tids);
  for (pid_t pid : dropped) remove(pid);
}

ThreadChanges ProcessWatcher::rescan(pid_t pid) {
  ThreadChanges changes;
  if (!watched(pid)) return changes;
  const Checkpoint before = checkpoint();
  std::vector<pid_t> tids;
  try {
    tids = open_missing(pid, changes.opened);
  } catch (...) {
    roll_back(before);
    throw;
  }
  changes.gone = mark_gone(pid, tids);
  return changes;
}

std::vector<pid_t> ProcessWatcher::open_missing(pid_t pid, std::vector<pid_t>& opened) {
  std::vector<pid_t> tids;
  try {
    tids = list_threads(pid);
  } catch (const Error& e) {
    if (e.errno_value() != ESRCH) throw;
    return tids;  // the process is gone: every thread of it is
  }
  opened = open_listed(pid, tids, false);
  tids.insert(tids.end(), opened.begin(), opened.end());  // a later listing may have found more
  return tids;
}

std::vector<pid_t> ProcessWatcher::mark_gone(pid_t pid, const std::vector<pid_t>& listed) {
  std::vector<pid_t> gone;
  for (auto& c : channels_)
    if (c.pid == pid && !c.hung_up && std::find(listed.begin(), listed.end(), c.tid) == listed.end()) {
      c.hung_up = true;
      gone.push_back(c.tid);
    }
  return gone;
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
