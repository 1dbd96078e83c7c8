#pragma once
// ProcessWatcher: samples other processes, the memory-sampling write-up's "channel set". Each watched
// process gets one sampling event per thread (cpu -1, from /proc/PID/task), each with its own RingBuffer, all
// waited on together through one EventPoller.
//
// Threads a watched process starts later are followed through the records: attr.task puts a
// PERF_RECORD_FORK for each new thread into the ring of the thread that created it, and reading it opens an
// event on the new thread (with any other thread /proc/PID/task lists by then). Not attr.inherit: the kernel
// refuses to mmap an inherited event opened with cpu -1 (EINVAL), and one event per CPU per thread is what
// this set avoids. So a new thread's samples start when its FORK is read (the next poll: a thread that lives
// shorter than that is not sampled), and processes a watched one forks are not followed. attr.comm/mmap2 add
// the records that name and map what is sampled (task_record.hpp decodes them). A thread's event reports
// EPOLLHUP when the thread exits; a process whose events have all hung up is reported exited, once.
#include <chrono>
#include <cstddef>
#include <cstdint>
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

  // Starts sampling every thread of `pid`; returns their tids. Throws selfperf::Error naming the pid and the
  // remedy: no such process, perf_event_paranoid or ptrace access (EACCES/EPERM: says which), out of file
  // descriptors (EMFILE) or of locked memory for the rings; then nothing of `pid` stays open.
  std::vector<pid_t> add(pid_t pid);
  // Stops sampling `pid` (what its rings still hold is dropped); false when it is not watched.
  bool remove(pid_t pid);
  // The processes watched and not yet reported exited.
  const std::vector<pid_t>& pids() const noexcept { return pids_; }
  bool empty() const noexcept { return pids_.empty(); }
  std::size_t channels() const noexcept { return channels_.size(); }

  // The attr the events were opened with, and the layout of their records.
  const perf_event_attr& attr() const noexcept { return attr_; }
  const SampleFormat& format() const noexcept { return format_; }

  // Waits at most `timeout` for a ring to fill or a task to exit (a signal ends the wait early), then reads
  // every ring, calling on_record(const RecordView&) for each record, and on_exit(pid_t) once for each
  // watched process whose events have all hung up. Returns the records read. After a complete call, no
  // record read later is older than those read before the call started (perf's FINISHED_ROUND rule).
  // New threads whose FORK was read are watched from the end of the call on.
  template <class OnRecord, class OnExit>
  std::size_t poll(std::chrono::milliseconds timeout, OnRecord&& on_record, OnExit&& on_exit) {
    wait(timeout);
    const std::size_t n = read_all(on_record);
    for (pid_t pid : close_hung_up()) on_exit(pid);
    return n;
  }

  // Reads every ring without waiting, then starts watching the new threads it read of.
  template <class OnRecord>
  std::size_t read_all(OnRecord&& on_record) {
    std::size_t n = 0;
    for (auto& c : channels_)
      n += c.ring.read([&](const RecordView& r) {
        if (r.type() == PERF_RECORD_FORK) note_fork(r);
        on_record(r);
      });
    follow_new_threads();
    return n;
  }

  // New threads that could not be watched (their event did not open: EMFILE, say), and why the last did not.
  std::size_t missed_threads() const noexcept { return missed_threads_; }
  const std::string& last_miss() const noexcept { return last_miss_; }
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
  void wait(std::chrono::milliseconds timeout);
  // Opens `tid`'s channel; false when the thread is gone (ESRCH). Throws selfperf::Error otherwise.
  bool open_channel(pid_t pid, pid_t tid);
  // The ring of `fd`, smaller than asked where locked memory runs out.
  RingBuffer map_ring(int fd);
  void note_fork(const RecordView& record);
  // Opens channels on the threads of the processes note_fork marked that have none yet.
  void follow_new_threads();
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
  std::vector<pid_t> forked_;                  // processes with a new thread to follow
  std::size_t missed_threads_ = 0;
  std::size_t smaller_rings_ = 0;
  std::string last_miss_;
  RingBufferStats closed_stats_{};
};

}  // namespace selfperf
