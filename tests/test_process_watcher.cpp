// ProcessWatcher: sampling a child process and a thread it starts after the attach (followed through its
// PERF_RECORD_FORK), its exit reported once; and the FORK/EXIT/COMM/MMAP2 decoders on hand-made records.
#include <doctest.h>

#include <sys/wait.h>
#include <unistd.h>

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

volatile unsigned long sink = 0;

void spin(unsigned long n) {
  for (unsigned long i = 0; i < n; ++i) sink = sink + i;
}

// A child that waits for a byte on `go`, spins, then starts a thread that spins until a byte on `stop`, and exits.
pid_t spawn_worker(int go_read, int stop_read) {
  pid_t pid = ::fork();
  if (pid == 0) {
    char c;
    if (::read(go_read, &c, 1) != 1) ::_exit(2);
    spin(50'000'000);
    std::atomic<bool> done{false};
    std::thread t([&] {
      while (!done.load(std::memory_order_relaxed)) spin(1000);
    });
    if (::read(stop_read, &c, 1) != 1) ::_exit(3);
    done = true;
    t.join();
    ::_exit(0);
  }
  return pid;
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

selfperf::SampleFormat tid_time_format() {
  selfperf::SampleFormat f;
  f.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
  f.sample_id_all = true;
  return f;
}

}  // namespace

TEST_CASE("watches a child process and the thread it starts after the attach; its exit is reported once") {
  int go[2], stop[2];
  REQUIRE(::pipe(go) == 0);
  REQUIRE(::pipe(stop) == 0);
  const pid_t child = spawn_worker(go[0], stop[0]);
  REQUIRE(child > 0);
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
  REQUIRE(::write(go[1], "x", 1) == 1);
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
  REQUIRE(::write(stop[1], "x", 1) == 1);
  while (exits.empty() && std::chrono::steady_clock::now() < give_up)
    watcher.poll(std::chrono::milliseconds(10), on_record, on_exit);
  CHECK(exits == std::vector<pid_t>{child});
  watcher.poll(std::chrono::milliseconds(0), on_record, on_exit);
  CHECK(exits.size() == 1);  // once
  CHECK(watcher.empty());
  CHECK(watcher.channels() == 0);
  CHECK(watcher.stats().samples >= sampled.size());  // kept from the closed channels
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  for (int fd : {go[0], go[1], stop[0], stop[1]}) ::close(fd);
}

TEST_CASE("add names a missing process; remove closes a watched one") {
  selfperf::ProcessWatcher watcher(user_sampling(99), "cpu-clock");
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  REQUIRE(::waitpid(dead, nullptr, 0) == dead);  // reaped: no process has that pid now (until reuse)
  try {
    watcher.add(dead);
    FAIL("add of a reaped pid did not throw");
  } catch (const selfperf::Error& e) {
    CHECK(e.errno_value() == ESRCH);
    CHECK(std::string(e.what()).find("process " + std::to_string(dead) + ": no such process") != std::string::npos);
  }
  CHECK(watcher.empty());
  CHECK_THROWS_AS(watcher.add(0), selfperf::Error);

  int go[2];
  REQUIRE(::pipe(go) == 0);
  pid_t child = ::fork();
  if (child == 0) {
    char c;
    ::_exit(::read(go[0], &c, 1) == 1 ? 0 : 1);
  }
  REQUIRE(watcher.add(child).size() >= 1);
  CHECK(watcher.channels() >= 1);
  CHECK(watcher.remove(child));
  CHECK_FALSE(watcher.remove(child));
  CHECK(watcher.channels() == 0);
  CHECK(watcher.empty());
  REQUIRE(::write(go[1], "x", 1) == 1);
  REQUIRE(::waitpid(child, nullptr, 0) == child);
  ::close(go[0]);
  ::close(go[1]);
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
