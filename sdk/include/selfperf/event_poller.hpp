#pragma once
// EventPoller: one epoll set over many perf event fds (one per thread or event), so a collector waits on
// all of its ring buffers at once.
//
// A perf fd becomes readable (EPOLLIN) when its ring buffer reaches the wakeup threshold (wakeup_events /
// wakeup_watermark). The kernel clears that readiness when it reports it (perf_poll swaps rb->poll to 0),
// so a caller drains the whole ring each time an fd is reported readable. When the monitored thread or process exits, the fd reports EPOLLHUP forever after;
// epoll is level-triggered, so the poller removes such an fd from the set as it reports it — the caller
// drains that ring once more and closes the fd, and the poller never spins on it.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace selfperf {

struct PollEvent {
  int fd = -1;
  std::uint64_t key = 0;  // what the caller passed to add()
  bool readable = false;  // EPOLLIN: records are waiting
  bool hangup = false;    // EPOLLHUP: the monitored task exited; fd already removed from the set
  bool error = false;     // EPOLLERR: the event is in error state; fd already removed from the set
};

class EventPoller {
 public:
  EventPoller();  // throws selfperf::Error when epoll_create1 fails
  EventPoller(EventPoller&& other) noexcept;
  EventPoller& operator=(EventPoller&& other) noexcept;
  EventPoller(const EventPoller&) = delete;
  EventPoller& operator=(const EventPoller&) = delete;
  ~EventPoller();

  // Watches `fd` (not owned) for input and hangup; `key` comes back in PollEvent. Throws selfperf::Error on a
  // bad or already-added fd.
  void add(int fd, std::uint64_t key);
  // Stops watching fd; false when it was not watched (e.g. already removed after a hangup).
  bool remove(int fd) noexcept;
  std::size_t size() const noexcept { return entries_.size(); }
  bool contains(int fd) const noexcept;

  // Waits at most `timeout` (0: just look; must not be negative — there is no "wait forever") and writes up to
  // out.size() ready fds. Returns how many. An interrupting signal returns 0 early: epoll_wait is never
  // restarted after a handler, even with SA_RESTART. Does not allocate.
  std::size_t wait(std::span<PollEvent> out, std::chrono::milliseconds timeout);

  // wait() into a small internal array, calling on_event(const PollEvent&) for each; returns the count.
  template <class F>
  std::size_t poll(std::chrono::milliseconds timeout, F&& on_event) {
    PollEvent events[kBatch];
    std::size_t n = wait(events, timeout);
    for (std::size_t i = 0; i < n; ++i) on_event(static_cast<const PollEvent&>(events[i]));
    return n;
  }

  int epoll_fd() const noexcept { return epoll_fd_; }

 private:
  static constexpr std::size_t kBatch = 64;
  struct Entry {
    int fd;
    std::uint64_t key;
  };
  std::uint64_t key_of(int fd) const noexcept;

  int epoll_fd_ = -1;
  std::vector<Entry> entries_;
};

}  // namespace selfperf
