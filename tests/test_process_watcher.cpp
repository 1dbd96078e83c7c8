// ProcessWatcher: sampling a child process and a thread it starts after the attach (followed through its
// PERF_RECORD_FORK), and a process it forks; exits reported once; rescan and update; threads that exit while
// add() lists them, and a real error in the middle of an add; the FORK/EXIT/COMM/MMAP2 decoders on hand-made
// records.
#include <doctest.h>

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "selfperf/error.hpp"
#include "selfperf/event.hpp"
#include "selfperf/process_watcher.hpp"
#include "selfperf/sampling_event.hpp"
#include "selfperf/task_record.hpp"

namespace {

// In a register: threads that spin at once share no memory (a shared sink is a data race under TSan).
void spin(unsigned long n) {
  unsigned long x = 0;
  for (unsigned long i = 0; i < n; ++i) {
    x += i;
    asm volatile("" : "+r"(x));
  }
}


perf_event_attr user_sampling(std::uint64_t hz) {
  perf_event_attr attr = selfperf::callchain_sampling_attr(
      selfperf::parse_event("cpu-clock"), {.frequency = hz, .kernel_frames = selfperf::KernelFrames::exclude});
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  return attr;
}

// A record of `type` with `body` then the sample_id trailer (TID, TIME) of the format below.
std::vector<std::uint64_t> make_record(std::uint32_t type, std::uint16_t misc, const std::vector<std::uint8_t>& body,
                                       std::uint32_t pid, std::uint32_t tid, std::uint64_t time) {
  // Byte by byte into a fixed buffer: GCC 12 reports false out-of-bounds copies for vector insert/memcpy here
  // (under TSan and at -O2).
  std::array<std::uint64_t, 64> words{};
  auto* bytes = reinterpret_cast<std::uint8_t*>(words.data());
  REQUIRE(body.size() <= 400);
  std::size_t size = sizeof(perf_event_header);
  for (std::uint8_t b : body) bytes[size++] = b;
  size = (size + 7) / 8 * 8;
  std::memcpy(bytes + size, &pid, 4);
  std::memcpy(bytes + size + 4, &tid, 4);
  std::memcpy(bytes + size + 8, &time, 8);
  size += 16;
  const perf_event_header h{type, misc, static_cast<std::uint16_t>(size)};
  std::memcpy(bytes, &h, sizeof h);
  return std::vector<std::uint64_t>(words.begin(), words.begin() + static_cast<std::ptrdiff_t>(size / 8));
}

selfperf::RecordView view_of(const std::vector<std::uint64_t>& words) {
  selfperf::RecordView v;
  std::memcpy(&v.header, words.data(), sizeof v.header);
  v.bytes = std::as_bytes(std::span<const std::uint64_t>(words));
  return v;
}

template <class T>
void put(std::vector<std::uint8_t>& out, T value) {
  const std::size_t at = out.size();
  out.resize(at + sizeof value);
  std::memcpy(out.data() + at, &value, sizeof value);
}

// A pipe whose ends close with it.
struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() { REQUIRE(::pipe(fd) == 0); }
  ~Pipe() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
  int in() const { return fd[0]; }
  int out() const { return fd[1]; }
  void send(char c = 'x') const { REQUIRE(::write(fd[1], &c, 1) == 1); }
};

// A forked child running `body` (whose result is its exit status). One the test did not reap (a failed
// REQUIRE) is killed and reaped with this object, so that no child outlives the test.
class Child {
 public:
  template <class Body>
  explicit Child(Body&& body) : pid_(flushed_fork()) {
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) ::_exit(body());
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (::waitpid(pid_, nullptr, WNOHANG) == 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  // Output buffered before the fork would be the child's too, and written twice if the child flushes it
  // (under TSan, children did).
  static pid_t flushed_fork() {
    std::cout.flush();
    std::fflush(nullptr);
    return ::fork();
  }
  // Waits for it; its exit status (128 + the signal when one killed it).
  int wait() {
    int status = 0;
    REQUIRE(::waitpid(pid_, &status, 0) == pid_);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_;
};

// A child's body: waits for a byte on `go`, spins, then starts a thread that spins until a byte on `stop`.
int spin_then_start_a_thread(int go_read, int stop_read) {
  char c;
  if (::read(go_read, &c, 1) != 1) return 2;
  spin(50'000'000);
  std::atomic<bool> done{false};
  std::thread t([&] {
    while (!done.load(std::memory_order_relaxed)) spin(1000);
  });
  if (::read(stop_read, &c, 1) != 1) return 3;
  done = true;
  t.join();
  return 0;
}

// A pid no process has (a child that exited and was reaped), until the kernel hands it out again.
pid_t reaped_pid() {
  Child dead([] { return 0; });
  dead.wait();
  return dead.pid();
}

bool byte_waiting(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

std::string tids_text(const std::vector<pid_t>& tids) {
  std::string s = "[";
  for (pid_t t : tids) s += (s.size() > 1 ? " " : "") + std::to_string(t);
  return s + "]";
}

pid_t gettid_now() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

// One thread's state letter from /proc (R, S, Z, ...); 0 when it is gone.
char thread_state(pid_t pid, pid_t tid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/stat");
  std::string line;
  std::getline(in, line);
  const auto close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() ? 0 : line[close + 2];
}

// Polls until done() or ~60 s (a hang guard, not a timed assertion).
template <class Watcher, class OnRecord, class OnExit, class OnFollow, class Done>
void poll_until(Watcher& w, OnRecord& on_record, OnExit& on_exit, OnFollow& on_follow, Done done) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done() && std::chrono::steady_clock::now() < give_up)
    w.poll(std::chrono::milliseconds(10), on_record, on_exit, on_follow);
}

selfperf::SampleFormat tid_time_format() {
  selfperf::SampleFormat f;
  f.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
  f.sample_id_all = true;
  return f;
}

}  // namespace

TEST_CASE("watches a child process and the thread it starts after the attach; its exit is reported once") {
  Pipe go, stop;
  Child worker([&] { return spin_then_start_a_thread(go.in(), stop.in()); });
  const pid_t child = worker.pid();
  selfperf::ProcessWatcher watcher(user_sampling(999), "cpu-clock");
  const auto tids = watcher.add(child);
  REQUIRE(!tids.empty());
  CHECK(tids.front() == child);  // under TSan its runtime may have a background thread of its own
  CHECK(watcher.pids() == std::vector<pid_t>{child});
  CHECK(watcher.add(child).empty());  // already watched

  std::set<pid_t> sampled;
  std::set<pid_t> forked;
  std::vector<pid_t> exits;
  std::uint64_t comm_records = 0;
  const auto format = watcher.format();
  auto on_record = [&](const selfperf::RecordView& r) {
    if (r.type() == PERF_RECORD_SAMPLE) {
      selfperf::SampleRecord s;
      REQUIRE(selfperf::decode_sample(r, format, s) == selfperf::DecodeStatus::ok);
      CHECK(s.pid == static_cast<std::uint32_t>(child));
      sampled.insert(static_cast<pid_t>(s.tid));
    } else if (r.type() == PERF_RECORD_FORK) {
      selfperf::TaskRecord t;
      REQUIRE(selfperf::decode_task(r, format, t) == selfperf::DecodeStatus::ok);
      if (t.pid == static_cast<std::uint32_t>(child)) forked.insert(static_cast<pid_t>(t.tid));
    } else if (r.type() == PERF_RECORD_COMM) {
      ++comm_records;
    }
  };
  auto on_exit = [&](pid_t pid) { exits.push_back(pid); };
  go.send();
  // Until the new thread's samples arrive: they need its FORK read and its event opened. A hang guard, not
  // a timed assertion.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto late_thread_sampled = [&] {
    for (pid_t t : sampled)
      if (forked.count(t) != 0) return true;
    return false;
  };
  while (!late_thread_sampled() && std::chrono::steady_clock::now() < give_up)
    watcher.poll(std::chrono::milliseconds(10), on_record, on_exit);
  INFO("sampled tids: ", sampled.size(), ", forked: ", forked.size(), ", missed: ", watcher.last_miss());
  CHECK(late_thread_sampled());
  CHECK(sampled.count(child) == 1);  // the main thread's 50M iterations
  CHECK(watcher.channels() >= 2);
  stop.send();
  while (exits.empty() && std::chrono::steady_clock::now() < give_up)
    watcher.poll(std::chrono::milliseconds(10), on_record, on_exit);
  CHECK(exits == std::vector<pid_t>{child});
  watcher.poll(std::chrono::milliseconds(0), on_record, on_exit);
  CHECK(exits.size() == 1);  // once
  CHECK(watcher.empty());
  CHECK(watcher.channels() == 0);
  CHECK(watcher.stats().samples >= sampled.size());  // kept from the closed channels
  CHECK(worker.wait() == 0);
}

TEST_CASE("add names a missing process; remove closes a watched one") {
  selfperf::ProcessWatcher watcher(user_sampling(99), "cpu-clock");
  const pid_t dead = reaped_pid();
  try {
    watcher.add(dead);
    FAIL("add of a reaped pid did not throw");
  } catch (const selfperf::Error& e) {
    CHECK(e.errno_value() == ESRCH);
    CHECK(std::string(e.what()).find("process " + std::to_string(dead) + ": no such process") != std::string::npos);
  }
  CHECK(watcher.empty());
  CHECK_THROWS_AS(watcher.add(0), selfperf::Error);

  Pipe go;
  Child waiter([&] {
    char c;
    return ::read(go.in(), &c, 1) == 1 ? 0 : 1;
  });
  const pid_t child = waiter.pid();
  REQUIRE(watcher.add(child).size() >= 1);
  CHECK(watcher.channels() >= 1);
  CHECK(watcher.remove(child));
  CHECK_FALSE(watcher.remove(child));
  CHECK(watcher.channels() == 0);
  CHECK(watcher.empty());
  go.send();
  CHECK(waiter.wait() == 0);
}

TEST_CASE("follows a process a watched one forks after the attach, its exec too; each exit is reported once") {
  Pipe go, stop;
  Child parent([&] {
    char c;
    if (::read(go.in(), &c, 1) != 1) return 2;
    const pid_t grandchild = ::fork();
    if (grandchild == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the kill of its parent by ~Child ends it too
      while (!byte_waiting(stop.in())) spin(10000);
      ::execl("/bin/true", "true", static_cast<char*>(nullptr));  // watched by now: its COMM comes as a record
      ::_exit(4);
    }
    return grandchild > 0 && ::waitpid(grandchild, nullptr, 0) == grandchild ? 0 : 3;
  });
  const pid_t child = parent.pid();
  selfperf::ProcessWatcher watcher(user_sampling(999), "cpu-clock");
  REQUIRE(!watcher.add(child).empty());
  const auto format = watcher.format();
  pid_t forked = 0;
  std::uint64_t fork_time = 0;
  std::size_t grandchild_samples = 0;
  std::vector<selfperf::FollowedProcess> followed;
  std::vector<pid_t> exits;
  std::string exec_name;
  auto on_record = [&](const selfperf::RecordView& r) {
    if (r.type() == PERF_RECORD_COMM) {
      selfperf::CommRecord c;
      REQUIRE(selfperf::decode_comm(r, format, c) == selfperf::DecodeStatus::ok);
      if (forked != 0 && c.pid == static_cast<std::uint32_t>(forked) && c.exec) exec_name = c.comm;
    } else if (r.type() == PERF_RECORD_FORK) {
      selfperf::TaskRecord t;
      REQUIRE(selfperf::decode_task(r, format, t) == selfperf::DecodeStatus::ok);
      if (t.ppid == static_cast<std::uint32_t>(child) && t.pid != t.ppid) {
        forked = static_cast<pid_t>(t.pid);
        fork_time = t.time;
      }
    } else if (r.type() == PERF_RECORD_SAMPLE) {
      selfperf::SampleRecord s;
      REQUIRE(selfperf::decode_sample(r, format, s) == selfperf::DecodeStatus::ok);
      if (forked != 0 && s.pid == static_cast<std::uint32_t>(forked)) {
        CHECK(s.tid == s.pid);
        CHECK(s.time >= fork_time);
        ++grandchild_samples;
      }
    }
  };
  auto on_exit = [&](pid_t pid) { exits.push_back(pid); };
  auto on_follow = [&](const selfperf::FollowedProcess& p) { followed.push_back(p); };
  go.send();
  poll_until(watcher, on_record, on_exit, on_follow, [&] { return grandchild_samples > 0; });
  INFO("forked: ", forked, ", missed: ", watcher.last_miss());
  REQUIRE(forked > 0);
  CHECK(grandchild_samples > 0);
  REQUIRE(followed.size() == 1);
  CHECK(followed[0].pid == forked);
  CHECK(followed[0].parent == child);
  CHECK(followed[0].fork_time == fork_time);
  // Its one thread, and under TSan the runtime's own.
  CHECK(std::find(followed[0].tids.begin(), followed[0].tids.end(), forked) != followed[0].tids.end());
  CHECK(watcher.followed_processes() == 1);
  CHECK(watcher.pids() == std::vector<pid_t>{child, forked});
  INFO("followed tids: ", tids_text(followed[0].tids), "; watched now: ", tids_text(watcher.threads(forked)),
       "; exited: ", tids_text(exits), "; grandchild state: ", thread_state(forked, forked));
  CHECK(exits.empty());  // the grandchild spins until stop: none exited yet
  CHECK(watcher.threads(forked) == followed[0].tids);
  stop.send();
  poll_until(watcher, on_record, on_exit, on_follow, [&] { return watcher.empty(); });
  watcher.poll(std::chrono::milliseconds(0), on_record, on_exit, on_follow);
  std::sort(exits.begin(), exits.end());
  std::vector<pid_t> both{child, forked};
  std::sort(both.begin(), both.end());
  CHECK(exits == both);  // each once
  CHECK(exec_name == "true");
  CHECK(watcher.channels() == 0);
  CHECK(parent.wait() == 0);
}

TEST_CASE("with inherit off, neither a forked process nor a new thread is followed") {
  Pipe go;
  Child parent([&] {
    char c;
    if (::read(go.in(), &c, 1) != 1) return 2;
    std::thread t([] { spin(100'000'000); });
    const pid_t grandchild = ::fork();
    if (grandchild == 0) {
      spin(100'000'000);
      ::_exit(0);
    }
    t.join();
    return grandchild > 0 && ::waitpid(grandchild, nullptr, 0) == grandchild ? 0 : 3;
  });
  const pid_t child = parent.pid();
  selfperf::ProcessWatcher watcher(user_sampling(999), "cpu-clock", {.inherit = false});
  const auto at_attach = watcher.add(child);
  REQUIRE(!at_attach.empty());
  const auto format = watcher.format();
  std::size_t forks = 0, foreign = 0;
  std::vector<pid_t> exits;
  auto on_record = [&](const selfperf::RecordView& r) {
    if (r.type() == PERF_RECORD_FORK) ++forks;  // still recorded: a perf.data names the tasks from them
    if (r.type() != PERF_RECORD_SAMPLE) return;
    selfperf::SampleRecord s;
    REQUIRE(selfperf::decode_sample(r, format, s) == selfperf::DecodeStatus::ok);
    if (std::find(at_attach.begin(), at_attach.end(), static_cast<pid_t>(s.tid)) == at_attach.end()) ++foreign;
  };
  auto on_exit = [&](pid_t pid) { exits.push_back(pid); };
  std::size_t follows = 0;
  auto on_follow = [&](const selfperf::FollowedProcess&) { ++follows; };
  go.send();
  poll_until(watcher, on_record, on_exit, on_follow, [&] { return watcher.empty(); });
  CHECK(exits == std::vector<pid_t>{child});
  CHECK(forks >= 2);  // the thread's and the process's
  CHECK(foreign == 0);
  CHECK(follows == 0);
  CHECK(watcher.followed_processes() == 0);
  CHECK(parent.wait() == 0);
}

namespace {

// A child's body: starts a thread on 's' (which reports its tid on `tids` and waits for 'e'), ends it on 'e'
// (answering on `tids` once it is joined), and returns on 'q' (ending a thread still running).
int serve_threads(const Pipe& commands, const Pipe& tids) {
  Pipe end;
  std::thread t;
  for (char c; ::read(commands.in(), &c, 1) == 1;) {
    if (c == 's') {
      t = std::thread([&] {
        const pid_t tid = gettid_now();
        if (::write(tids.out(), &tid, sizeof tid) != sizeof tid) ::_exit(4);
        char e;
        if (::read(end.in(), &e, 1) != 1) ::_exit(5);
      });
    } else if (c == 'e') {
      end.send();
      t.join();
      const pid_t done = 0;
      if (::write(tids.out(), &done, sizeof done) != sizeof done) ::_exit(6);
    } else if (c == 'q') {
      if (t.joinable()) {
        end.send();
        t.join();
      }
      return 0;
    }
  }
  return 7;
}

pid_t read_pid(const Pipe& p) {
  pid_t v = -1;
  REQUIRE(::read(p.in(), &v, sizeof v) == sizeof v);
  return v;
}

}  // namespace

TEST_CASE("rescan opens the threads not watched yet and marks those gone, which the next poll closes") {
  Pipe commands, tids;
  Child server([&] { return serve_threads(commands, tids); });
  const pid_t child = server.pid();
  // Without inherit nothing follows the new thread: rescan is what finds it.
  selfperf::ProcessWatcher watcher(user_sampling(99), "cpu-clock", {.inherit = false});
  const auto first = watcher.add(child);
  REQUIRE(!first.empty());
  // Under TSan the child's runtime starts a thread of its own with the child's first one, at a moment of its
  // choosing: the checks name the test's thread and compare the rest with what the watcher reports.
  auto contains = [](const std::vector<pid_t>& v, pid_t t) { return std::find(v.begin(), v.end(), t) != v.end(); };
  commands.send('s');
  const pid_t late = read_pid(tids);
  REQUIRE(late > 0);
  auto changes = watcher.rescan(child);
  CHECK(contains(changes.opened, late));
  CHECK(changes.gone.empty());
  CHECK(watcher.threads(child).size() == first.size() + changes.opened.size());
  CHECK(contains(watcher.threads(child), late));
  CHECK_FALSE(contains(watcher.rescan(child).opened, late));  // opened once

  commands.send('e');
  REQUIRE(read_pid(tids) == 0);  // joined: /proc no longer lists it
  changes = watcher.rescan(child);
  CHECK(changes.gone == std::vector<pid_t>{late});
  std::vector<pid_t> exits;
  watcher.poll(std::chrono::milliseconds(0), [](const selfperf::RecordView&) {}, [&](pid_t p) { exits.push_back(p); });
  CHECK(exits.empty());  // the process still runs
  const auto left = watcher.threads(child);
  CHECK_FALSE(contains(left, late));
  for (pid_t t : first) CHECK(contains(left, t));
  CHECK(watcher.rescan(12345678).opened.empty());  // not watched: nothing

  commands.send('q');
  REQUIRE(server.wait() == 0);
  changes = watcher.rescan(child);  // gone (reaped): every thread is
  CHECK(changes.opened.empty());
  CHECK(changes.gone == left);
  watcher.poll(std::chrono::milliseconds(0), [](const selfperf::RecordView&) {}, [&](pid_t p) { exits.push_back(p); });
  CHECK(exits == std::vector<pid_t>{child});
  CHECK(watcher.empty());
}

TEST_CASE("update makes the watched set the list given, all or nothing") {
  Pipe commands_a, tids_a, commands_b, tids_b;
  Child server_a([&] { return serve_threads(commands_a, tids_a); });
  Child server_b([&] { return serve_threads(commands_b, tids_b); });
  const pid_t a = server_a.pid(), b = server_b.pid();
  const pid_t dead = reaped_pid();

  selfperf::ProcessWatcher watcher(user_sampling(99), "cpu-clock", {.inherit = false});
  const std::vector<pid_t> both{a, b};
  watcher.update(both);
  CHECK(watcher.pids() == both);
  const std::size_t channels = watcher.channels();
  CHECK(channels >= 2);

  // b's new thread is opened by the update that keeps b.
  commands_b.send('s');
  const pid_t late = read_pid(tids_b);
  const std::vector<pid_t> only_b{b};
  watcher.update(only_b);
  CHECK(watcher.pids() == only_b);
  const auto b_threads = watcher.threads(b);
  CHECK(std::find(b_threads.begin(), b_threads.end(), late) != b_threads.end());
  CHECK(watcher.threads(a).empty());

  // A pid that cannot be added undoes the whole update: a stays out, b stays in, nothing else opened.
  const std::size_t before = watcher.channels();
  const std::vector<pid_t> with_dead{a, b, dead};
  try {
    watcher.update(with_dead);
    FAIL("update with a reaped pid did not throw");
  } catch (const selfperf::Error& e) {
    CHECK(e.errno_value() == ESRCH);
    CHECK(std::string(e.what()).find("process " + std::to_string(dead)) != std::string::npos);
  }
  CHECK(watcher.pids() == only_b);
  CHECK(watcher.channels() == before);
  CHECK(watcher.threads(a).empty());

  watcher.update(std::span<const pid_t>{});
  CHECK(watcher.empty());
  CHECK(watcher.channels() == 0);
  for (const Pipe* p : {&commands_a, &commands_b}) p->send('q');
  CHECK(server_a.wait() == 0);
  CHECK(server_b.wait() == 0);
}

TEST_CASE("add skips a thread that has exited while it lists them, and counts it") {
  // A process whose main thread has exited while another runs: /proc/PID/task still lists the
  // leader, a zombie, and perf_event_open on it fails with ESRCH, as on any thread gone since the listing.
  Pipe stop, ready;
  Child process([&] {
    static int stop_fd;
    stop_fd = stop.in();
    pthread_t t;
    if (pthread_create(&t, nullptr, [](void*) -> void* {
          char c;
          ::_exit(::read(stop_fd, &c, 1) == 1 ? 0 : 2);
        }, nullptr) != 0)
      return 3;
    ready.send();
    // The leader alone ends: the exit system call, not pthread_exit, whose unwinding would run this test's
    // destructors (closing the pipes the other thread waits on).
    ::syscall(SYS_exit, 0);
    return 4;
  });
  const pid_t child = process.pid();
  char c;
  REQUIRE(::read(ready.in(), &c, 1) == 1);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (thread_state(child, child) != 'Z' && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
  REQUIRE(thread_state(child, child) == 'Z');

  selfperf::ProcessWatcher watcher(user_sampling(99), "cpu-clock");
  const auto tids = watcher.add(child);
  CHECK(!tids.empty());
  CHECK(std::find(tids.begin(), tids.end(), child) == tids.end());
  CHECK(watcher.vanished_threads() == 1);  // once, though listed again
  CHECK(watcher.pids() == std::vector<pid_t>{child});
  stop.send();
  CHECK(process.wait() == 0);
}

TEST_CASE("add under threads that come and go: never fails for them, never leaves a partial watch") {
  Pipe stop;
  Child churner([&] {
    // Two threads at a time start and end as fast as they can.
    auto churn = [&] {
      while (!byte_waiting(stop.in())) std::thread([] { spin(1000); }).join();
    };
    std::thread a(churn), b(churn);
    a.join();
    b.join();
    return 0;
  });
  const pid_t child = churner.pid();
  selfperf::ProcessWatcher watcher(user_sampling(99), "cpu-clock");
  std::size_t opened = 0;
  for (int round = 0; round < 200; ++round) {
    std::vector<pid_t> tids;
    REQUIRE_NOTHROW(tids = watcher.add(child));
    REQUIRE(!tids.empty());
    std::vector<pid_t> sorted = tids;
    std::sort(sorted.begin(), sorted.end());
    CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
    CHECK(watcher.channels() == tids.size());
    CHECK(watcher.threads(child).size() == tids.size());
    opened += tids.size();
    REQUIRE(watcher.remove(child));
    CHECK(watcher.channels() == 0);
  }
  MESSAGE("200 adds under churn: ", opened, " threads opened, ", watcher.vanished_threads(),
          " gone between the listing and their open");
  stop.send();
  CHECK(churner.wait() == 0);
}

TEST_CASE("a real error in the middle of add (out of descriptors) leaves nothing open") {
  Pipe stop, ready;
  Child process([&] {
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i)
      threads.emplace_back([&] {
        char c;
        ::_exit(::read(stop.in(), &c, 1) == 1 ? 0 : 2);
      });
    ready.send();
    for (auto& t : threads) t.join();
    return 0;
  });
  const pid_t child = process.pid();
  char c;
  REQUIRE(::read(ready.in(), &c, 1) == 1);
  selfperf::ProcessWatcher watcher(user_sampling(99), "cpu-clock");
  // A limit that leaves two descriptors free: two threads open, the third fails with EMFILE.
  rlimit saved{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved) == 0);
  rlim_t limit = 0;
  for (int free_below = 0; free_below < 2; ++limit)
    if (!std::filesystem::exists("/proc/self/fd/" + std::to_string(limit))) ++free_below;
  rlimit low = saved;
  low.rlim_cur = limit;
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
  bool threw = false;
  try {
    watcher.add(child);
  } catch (const selfperf::Error& e) {
    threw = true;
    CHECK(e.errno_value() == EMFILE);
    CHECK(std::string(e.what()).find("ulimit -n") != std::string::npos);
  }
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &saved) == 0);
  CHECK(threw);
  CHECK(watcher.channels() == 0);
  CHECK(watcher.empty());
  CHECK(watcher.threads(child).empty());
  CHECK(watcher.stats().records == 0);
  // Nothing of the failed attempt is left in the way of the next one.
  const auto tids = watcher.add(child);
  CHECK(tids.size() >= 5);
  CHECK(watcher.channels() == tids.size());
  stop.send();
  CHECK(process.wait() == 0);
}

TEST_CASE("FORK, EXIT, COMM and MMAP2 records decode with their sample_id trailer") {
  const auto f = tid_time_format();
  std::vector<std::uint8_t> body;
  for (std::uint32_t v : {10u, 1u, 11u, 10u}) put(body, v);  // pid, ppid, tid, ptid
  put(body, std::uint64_t{777});
  auto fork_words = make_record(PERF_RECORD_FORK, 0, body, 10, 11, 777);
  selfperf::TaskRecord t;
  REQUIRE(selfperf::decode_task(view_of(fork_words), f, t) == selfperf::DecodeStatus::ok);
  CHECK_FALSE(t.exit);
  CHECK(t.pid == 10);
  CHECK(t.ppid == 1);
  CHECK(t.tid == 11);
  CHECK(t.ptid == 10);
  CHECK(t.time == 777);
  CHECK(t.sample_id.tid == 11);
  auto exit_words = make_record(PERF_RECORD_EXIT, 0, body, 10, 11, 778);
  REQUIRE(selfperf::decode_task(view_of(exit_words), f, t) == selfperf::DecodeStatus::ok);
  CHECK(t.exit);
  selfperf::CommRecord c;
  CHECK(selfperf::decode_comm(view_of(fork_words), f, c) == selfperf::DecodeStatus::wrong_type);

  body.clear();
  put(body, std::uint32_t{10});
  put(body, std::uint32_t{12});
  for (char ch : std::string("worker-2")) put(body, ch);
  put(body, '\0');
  auto comm_words = make_record(PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC, body, 10, 12, 900);
  REQUIRE(selfperf::decode_comm(view_of(comm_words), f, c) == selfperf::DecodeStatus::ok);
  CHECK(c.comm == "worker-2");
  CHECK(c.tid == 12);
  CHECK(c.exec);
  CHECK(c.sample_id.time == 900);
  // A name without its NUL runs into the trailer: refused, never read past.
  body.pop_back();
  body.resize((body.size() + 7) / 8 * 8, 'x');
  auto unterminated = make_record(PERF_RECORD_COMM, 0, body, 10, 12, 900);
  CHECK(selfperf::decode_comm(view_of(unterminated), f, c) == selfperf::DecodeStatus::truncated);

  body.clear();
  put(body, std::uint32_t{10});
  put(body, std::uint32_t{10});
  for (std::uint64_t v : {0x7f0000001000ull, 0x2000ull, 0x1000ull}) put(body, v);  // addr, len, pgoff
  put(body, std::uint32_t{8});                                                   // maj
  put(body, std::uint32_t{1});                                                   // min
  put(body, std::uint64_t{4242});                                                // ino
  put(body, std::uint64_t{1});                                                   // ino_generation
  put(body, std::uint32_t{5});                                                   // prot
  put(body, std::uint32_t{2});                                                   // flags
  for (char ch : std::string("/usr/lib/libx.so")) put(body, ch);
  put(body, '\0');
  auto mmap_words = make_record(PERF_RECORD_MMAP2, PERF_RECORD_MISC_USER, body, 10, 10, 950);
  selfperf::Mmap2Record m;
  REQUIRE(selfperf::decode_mmap2(view_of(mmap_words), f, m) == selfperf::DecodeStatus::ok);
  CHECK(m.addr == 0x7f0000001000ull);
  CHECK(m.len == 0x2000);
  CHECK(m.pgoff == 0x1000);
  CHECK(m.ino == 4242);
  CHECK(m.prot == 5);
  CHECK(m.filename == "/usr/lib/libx.so");
  CHECK(m.sample_id.time == 950);
  // Cut short: the fixed part no longer fits before the trailer.
  auto short_words = mmap_words;
  perf_event_header h{PERF_RECORD_MMAP2, 0, 8 + 16 + 16};
  std::memcpy(short_words.data(), &h, sizeof h);
  short_words.resize(5);
  CHECK(selfperf::decode_mmap2(view_of(short_words), f, m) == selfperf::DecodeStatus::truncated);
}
