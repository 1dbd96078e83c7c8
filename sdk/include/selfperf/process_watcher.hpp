#pragma once
// ProcessWatcher: samples other processes, the memory-sampling write-up's "channel set". Each watched
// process gets one sampling event per thread (cpu -1, from /proc/PID/task), each with its own RingBuffer, all
// waited on together through one EventPoller; processes are added, removed and updated (the set made equal to
// a list, the threads of each rescanned).
//
// What a watched process starts later is followed through the records, as perf record -p follows it with
// inherit (ProcessWatcherOptions::inherit): attr.task puts a PERF_RECORD_FORK for each new thread or process
// into the ring of the thread that created it, and reading it opens an event on each new thread (with any
// other thread /proc/PID/task lists by then), and on each thread of a new process (with the children it
// forked before its events opened, from /proc/PID/task/TID/children). Not attr.inherit: the kernel refuses to
// mmap an inherited event opened with cpu -1 (EINVAL), and one event per CPU per thread is what this set
// avoids. So a new task's samples start when its FORK is read, at the next poll: poll with a short timeout
// (10 ms) to lose little. attr.comm/mmap2 add the records that name and map what is sampled (task_record.hpp
// decodes them); a followed process that exec'd before its events opened left no COMM/MMAP2 of its new image,
// so on_follow is told of it and the caller takes those from /proc (selfperf record -p does). A thread's event
// reports EPOLLHUP when the thread exits; a process whose events have all hung up is reported exited, once.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <linux/perf_event.h>
#include <sys/types.h>

#include "selfperf/event_poller.hpp"
#include "selfperf/record.hpp"
#include "selfperf/ring_buffer.hpp"

namespace selfperf {

struct ProcessWatcherOptions {
  // Data pages of each thread's ring (a power of two). 16 (64 KiB) holds ~0.2 s of 999 Hz samples with
  // 30-frame chains; an unprivileged user's rings together count against perf_event_mlock_kb.
  std::size_t data_pages = 16;
  // Follow the threads and processes a watched process starts after add() (perf record -p's default);
  // false watches only the threads add() found (perf record --no-inherit).
  bool inherit = true;
};

// A process the watcher started to watch because a watched one forked it.
struct FollowedProcess {
  pid_t pid = 0;
  pid_t parent = 0;
  std::uint64_t fork_time = 0;  // of its FORK record (perf clock): before any of its samples
  std::vector<pid_t> tids;      // the threads now watched
};

// What rescan() changed.
struct ThreadChanges {
  std::vector<pid_t> opened;  // threads listed in /proc/PID/task and not watched before
  std::vector<pid_t> gone;    // watched threads no longer listed: read and closed by the next poll
};

class ProcessWatcher {
 public:
  // `attr`: the sampling event (sample period or frequency, sample_type). The watcher adds what following
  // other tasks needs: task, comm, mmap + mmap2, sample_id_all (with TID and TIME), and a wakeup at a quarter
  // of the ring; `event_name` names the event in messages. Throws selfperf::Error when epoll_create fails.
  ProcessWatcher(const perf_event_attr& attr, std::string event_name, ProcessWatcherOptions options = {});
  ProcessWatcher(const ProcessWatcher&) = delete;
  ProcessWatcher& operator=(const ProcessWatcher&) = delete;
  ~ProcessWatcher();

  // Starts sampling every thread of `pid`; returns their tids. A thread that exits between the listing of
  // /proc/PID/task and its perf_event_open (ESRCH) is skipped and counted (vanished_threads()). Throws
  // selfperf::Error naming the pid and the remedy: no such process, perf_event_paranoid or ptrace access
  // (EACCES/EPERM: says which), out of file descriptors (EMFILE) or of locked memory for the rings; then
  // nothing of `pid` stays open and the watcher is as before the call.
  std::vector<pid_t> add(pid_t pid);
  // Stops sampling `pid` (what its rings still hold is dropped); false when it is not watched.
  bool remove(pid_t pid);
  // The write-up's update: the watched processes become `pids`. Those not watched are added, those watched
  // and not listed removed, those kept rescanned. All or nothing: when an add or a rescan throws (as add()
  // does), the watcher is as before the call.
  void update(std::span<const pid_t> pids);
  // Brings `pid`'s channels in line with /proc/PID/task: opens the threads not watched yet (what inherit
  // does from the FORK records, for a watcher without it or for threads whose FORK came before the attach),
  // and marks those no longer listed, which the next poll reads and closes. Nothing when `pid` is not
  // watched; a process gone marks every thread. Throws as add() does, leaving the watcher as before.
  ThreadChanges rescan(pid_t pid);

  // The processes watched and not yet reported exited.
  const std::vector<pid_t>& pids() const noexcept { return pids_; }
  bool empty() const noexcept { return pids_.empty(); }
  std::size_t channels() const noexcept { return channels_.size(); }
  // The threads of `pid` that have a channel, in the order they were opened.
  std::vector<pid_t> threads(pid_t pid) const;

  // The attr the events were opened with, and the layout of their records.
  const perf_event_attr& attr() const noexcept { return attr_; }
  const SampleFormat& format() const noexcept { return format_; }

  // Waits at most `timeout` for a ring to fill or a task to exit (a signal ends the wait early), then reads
  // every ring, calling on_record(const RecordView&) for each record, on_follow(const FollowedProcess&) for
  // each new process watched from now on, and on_exit(pid_t) once for each watched process whose events have
  // all hung up. Returns the records read. After a complete call, no record read later is older than those
  // read before the call started (perf's FINISHED_ROUND rule). New threads and processes whose FORK was read
  // are watched from the end of the call on.
  template <class OnRecord, class OnExit, class OnFollow>
  std::size_t poll(std::chrono::milliseconds timeout, OnRecord&& on_record, OnExit&& on_exit,
                   OnFollow&& on_follow) {
    wait(timeout);
    const std::size_t n = read_all(on_record, on_follow);
    for (pid_t pid : close_hung_up()) on_exit(pid);
    return n;
  }
  template <class OnRecord, class OnExit>
  std::size_t poll(std::chrono::milliseconds timeout, OnRecord&& on_record, OnExit&& on_exit) {
    return poll(timeout, on_record, on_exit, [](const FollowedProcess&) {});
  }

  // Reads every ring without waiting, then starts watching the new threads and processes it read of.
  template <class OnRecord, class OnFollow>
  std::size_t read_all(OnRecord&& on_record, OnFollow&& on_follow) {
    std::size_t n = 0;
    for (auto& c : channels_)
      n += c.ring.read([&](const RecordView& r) {
        if (r.type() == PERF_RECORD_FORK) note_fork(r);
        on_record(r);
      });
    follow_new_tasks();
    const std::vector<FollowedProcess> followed = std::move(followed_);
    followed_.clear();
    for (const FollowedProcess& p : followed) on_follow(p);
    return n;
  }
  template <class OnRecord>
  std::size_t read_all(OnRecord&& on_record) {
    return read_all(on_record, [](const FollowedProcess&) {});
  }

  // Threads that exited before their event could open (ESRCH), at add(), rescan() or when followed; a
  // followed process gone before its events opened counts its threads.
  std::size_t vanished_threads() const noexcept { return vanished_threads_; }
  // New threads that could not be watched (their event did not open: EMFILE, say), and why the last did not.
  std::size_t missed_threads() const noexcept { return missed_threads_; }
  const std::string& last_miss() const noexcept { return last_miss_; }
  // Processes forked by watched ones and watched from their FORK on.
  std::size_t followed_processes() const noexcept { return followed_processes_; }
  // Times a ring was mapped with half the pages asked for, locked memory (perf_event_mlock_kb) having run out.
  std::size_t smaller_rings() const noexcept { return smaller_rings_; }

  // Over every ring, closed ones included: records read, lost (the kernel's LOST records), and so on.
  RingBufferStats stats() const noexcept;

 private:
  struct Channel {
    pid_t pid;
    pid_t tid;
    int fd;
    RingBuffer ring;
    bool hung_up;
  };
  // What add/update/rescan restore when they throw: everything they append is after these.
  struct Checkpoint {
    std::size_t channels, pids, seen, vanished, smaller_rings;
  };
  struct PendingProcess {
    pid_t pid, parent;
    std::uint64_t fork_time;
  };
  Checkpoint checkpoint() const noexcept;
  void roll_back(const Checkpoint& to) noexcept;
  void wait(std::chrono::milliseconds timeout);
  // Opens `tid`'s channel; false when the thread is gone (ESRCH, counted). Throws selfperf::Error otherwise.
  bool open_channel(pid_t pid, pid_t tid);
  // Opens the threads of `tids` not seen yet, then lists /proc/PID/task again for threads started meanwhile
  // (which left no FORK in a ring), a few times at most; returns those opened. An error throws, or with
  // `count_errors` is counted in missed_threads() and that thread skipped.
  std::vector<pid_t> open_listed(pid_t pid, std::vector<pid_t> tids, bool count_errors);
  // rescan()'s halves: opens `pid`'s threads not watched yet (into `opened`) and returns every tid listed;
  // then marks the channels of threads not in that list, returning their tids.
  std::vector<pid_t> open_missing(pid_t pid, std::vector<pid_t>& opened);
  std::vector<pid_t> mark_gone(pid_t pid, const std::vector<pid_t>& listed);
  // The ring of `fd`, smaller than asked where locked memory runs out.
  RingBuffer map_ring(int fd);
  bool watched(pid_t pid) const noexcept;
  bool seen(pid_t pid, pid_t tid) const noexcept;
  void note_fork(const RecordView& record);
  // Opens channels on the new threads of watched processes and on the processes note_fork queued.
  void follow_new_tasks();
  void follow_process(const PendingProcess& p, std::vector<PendingProcess>& queue);
  // Closes the channels that hung up (their rings already read); returns the pids left without a channel.
  std::vector<pid_t> close_hung_up();
  void close_channel(Channel& c) noexcept;

  perf_event_attr attr_{};
  SampleFormat format_{};
  std::string event_name_;
  ProcessWatcherOptions options_;
  EventPoller poller_;
  std::vector<Channel> channels_;
  std::vector<pid_t> pids_;
  std::vector<std::pair<pid_t, pid_t>> seen_;  // (pid, tid) ever opened: an exited thread is never reopened
  std::vector<pid_t> forked_;                  // watched processes with a new thread to follow
  std::vector<PendingProcess> new_processes_;  // forked by watched ones, not watched yet
  std::vector<FollowedProcess> followed_;      // watched from this read on, for on_follow
  std::size_t vanished_threads_ = 0;
  std::size_t missed_threads_ = 0;
  std::size_t followed_processes_ = 0;
  std::size_t smaller_rings_ = 0;
  std::string last_miss_;
  RingBufferStats closed_stats_{};
};

}  // namespace selfperf
