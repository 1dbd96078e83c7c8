#include "selfperf/event_poller.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include <sys/epoll.h>
#include <unistd.h>

#include "selfperf/error.hpp"

namespace selfperf {

EventPoller::EventPoller() : epoll_fd_(::epoll_create1(EPOLL_CLOEXEC)) {
  if (epoll_fd_ < 0) {
    int err = errno;
    throw Error(std::string("cannot create the epoll set for event polling: ") + std::strerror(err) +
                    (err == EMFILE || err == ENFILE ? ". Out of file descriptors: raise ulimit -n." : "."),
                err);
  }
}

EventPoller::EventPoller(EventPoller&& other) noexcept
    : epoll_fd_(std::exchange(other.epoll_fd_, -1)), entries_(std::move(other.entries_)) {}

EventPoller& EventPoller::operator=(EventPoller&& other) noexcept {
  if (this != &other) {
    if (epoll_fd_ >= 0) ::close(epoll_fd_);
    epoll_fd_ = std::exchange(other.epoll_fd_, -1);
    entries_ = std::move(other.entries_);
  }
  return *this;
}

EventPoller::~EventPoller() {
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

bool EventPoller::contains(int fd) const noexcept {
  return std::any_of(entries_.begin(), entries_.end(), [fd](const Entry& e) { return e.fd == fd; });
}

std::uint64_t EventPoller::key_of(int fd) const noexcept {
  for (const Entry& e : entries_)
    if (e.fd == fd) return e.key;
  return 0;
}

void EventPoller::add(int fd, std::uint64_t key) {
  if (contains(fd))
    throw Error("event fd " + std::to_string(fd) + " is already in this poller: add each fd once", EEXIST);
  entries_.push_back({fd, key});  // first, so a failed push_back leaves the epoll set untouched
  epoll_event ev{};
  ev.events = EPOLLIN;  // EPOLLHUP and EPOLLERR are always reported
  ev.data.fd = fd;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    int err = errno;
    entries_.pop_back();
    throw Error("cannot poll event fd " + std::to_string(fd) + ": " + std::strerror(err) +
                    (err == EBADF ? " (the fd is not open)" : err == EPERM ? " (this fd cannot be polled)" : ""),
                err);
  }
}

bool EventPoller::remove(int fd) noexcept {
  auto it = std::find_if(entries_.begin(), entries_.end(), [fd](const Entry& e) { return e.fd == fd; });
  if (it == entries_.end()) return false;
  entries_.erase(it);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  return true;
}

std::size_t EventPoller::wait(std::span<PollEvent> out, std::chrono::milliseconds timeout) {
  if (timeout.count() < 0)
    throw Error("EventPoller::wait: timeout " + std::to_string(timeout.count()) +
                    " ms is negative; give a bounded wait and loop instead",
                EINVAL);
  if (out.empty() || entries_.empty()) return 0;
  epoll_event events[kBatch];
  const int max = static_cast<int>(std::min(out.size(), kBatch));
  const int ms = static_cast<int>(std::min<std::chrono::milliseconds::rep>(timeout.count(), 1 << 30));
  int n = ::epoll_wait(epoll_fd_, events, max, ms);
  if (n < 0) {
    int err = errno;
    if (err == EINTR) return 0;
    throw Error(std::string("epoll_wait on the event poller failed: ") + std::strerror(err), err);
  }
  for (int i = 0; i < n; ++i) {
    PollEvent& p = out[static_cast<std::size_t>(i)];
    p.fd = events[i].data.fd;
    p.key = key_of(p.fd);
    p.readable = (events[i].events & EPOLLIN) != 0;
    p.hangup = (events[i].events & EPOLLHUP) != 0;
    p.error = (events[i].events & EPOLLERR) != 0;
    // Level-triggered HUP/ERR would come back on every wait: stop watching now, the caller is told once.
    if (p.hangup || p.error) remove(p.fd);
  }
  return static_cast<std::size_t>(n);
}

}  // namespace selfperf
