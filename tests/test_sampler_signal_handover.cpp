// A program that sets its own action for the signal carrying the samples (a handler, SIG_IGN, or SIG_DFL in a
// loop over every signal, as daemons and process spawners do) takes it: the samples move to another free
// real-time signal first, so the program never receives one of ours and a SIG_DFL never meets one (a real-time
// signal's default action terminates: before, such a program was killed by its next sample). The preload
// library's sigaction/signal/sigset call selfperf_program_sets_signal before the real call; the tests call it
// the same way. The loops run in forked children, whose dispositions the test process must not inherit.
#include <doctest.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <string>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include "sampler_workload.hpp"
#include "selfperf/sampler.hpp"
#include "test_support.hpp"

extern "C" void selfperf_program_sets_signal(int signo, const struct sigaction* action) noexcept;

using selfperf::Sampler;
using selfperf::test::CapturedStderr;
using selfperf::test::count;

using selfperf_test::CodeRange;
SELFPERF_TEST_BURN(handover_burn, 0x5a)

namespace {

constexpr std::uint64_t kPeriod = 1'000'000;  // 1 ms of cpu-clock

Sampler::Options cpu_clock() {
  Sampler::Options o;
  o.event = "cpu-clock";
  o.period = kPeriod;
  o.unwinder = selfperf::Unwinder::frame_pointer;
  o.buffer_capacity = 4096;
  return o;
}

std::atomic<std::uint64_t> g_sink{0};

void burn_periods(std::uint64_t periods) {
  const std::uint64_t begin = selfperf::test::thread_cpu_ns();
  while (selfperf::test::thread_cpu_ns() < begin + periods * kPeriod) {
    g_sink += handover_burn(2'000);
    selfperf_test::signal_point();
  }
}

// What the preload library's sigaction does.
int program_sigaction(int signo, const struct sigaction& action) {
  selfperf_program_sets_signal(signo, &action);
  return sigaction(signo, &action, nullptr);
}

std::atomic<std::uint64_t> g_theirs_from_kernel{0};  // the program's handler: signals the kernel raised
void program_handler(int, siginfo_t* info, void*) {
  if (info->si_code > 0) g_theirs_from_kernel.fetch_add(1, std::memory_order_relaxed);
}

// Runs `body` in a forked child and returns its wait status; the child exits with body's result.
template <typename Body>
int in_child(Body body) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) _exit(body());
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return status;
}

std::string describe(int status) {
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "exit status " + std::to_string(WEXITSTATUS(status));
}

// In a child: a sampled thread burns 50 periods, then every signal but SIGKILL and SIGSTOP gets `action`, in
// ascending or descending order, then it burns 300 periods more. Exit status: 0 when at least `min_after`
// samples came after the loop, 2 when fewer did, 3 when stderr did not hold `said` exactly once.
int set_every_signal(const struct sigaction& action, bool ascending, std::uint64_t min_after, const char* said) {
  CapturedStderr captured;
  std::uint64_t after = 0;
  {
    Sampler sampler(cpu_clock());
    sampler.start();
    Sampler::ThreadAttachment attach(sampler);
    burn_periods(50);
    sampler.drain([](const selfperf::Sample&) {});
    for (int i = 1; i < NSIG; ++i) {
      const int s = ascending ? i : NSIG - i;
      if (s != SIGKILL && s != SIGSTOP) program_sigaction(s, action);
    }
    burn_periods(300);
    after = sampler.drain([](const selfperf::Sample&) {});
  }
  const std::string text = captured.text();
  std::fprintf(stderr, "child: %llu samples after the loop; said: %s", static_cast<unsigned long long>(after),
               text.c_str());
  if (count(text, said) != 1) return 3;
  return after >= min_after ? 0 : 2;
}

}  // namespace

TEST_CASE("a program that installs its own handler on the sampling signal gets none of ours; sampling goes on") {
  CapturedStderr captured;
  Sampler sampler(cpu_clock());
  sampler.start();
  const int before = sampler.signal_number();
  std::uint64_t after = 0;
  {
    Sampler::ThreadAttachment attach(sampler);
    burn_periods(50);
    sampler.drain([](const selfperf::Sample&) {});
    struct sigaction own {};
    own.sa_sigaction = program_handler;
    own.sa_flags = SA_SIGINFO;
    sigemptyset(&own.sa_mask);
    REQUIRE(program_sigaction(before, own) == 0);
    burn_periods(300);
    after = sampler.drain([](const selfperf::Sample&) {});
  }
  const Sampler::Totals totals = sampler.stop();
  const int moved_to = sampler.signal_number();
  const std::string said = captured.text();
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(before, &dfl, nullptr);  // the "program" is done with it
  INFO("signal " << before << " -> " << moved_to << "; " << after << " samples after; the program's handler got "
                 << g_theirs_from_kernel.load() << " of ours; said: " << said);
  CHECK(moved_to != before);
  CHECK(moved_to > 0);
  CHECK(g_theirs_from_kernel.load() == 0);
  CHECK(after >= 150);  // 300 periods; the governor may halve the rate on a slow VM, no more
  CHECK(totals.threads_not_signalled == 0);
  CHECK(count(said, "moved to another free real-time signal") == 1);
}

TEST_CASE("SIG_DFL on every signal, upward or downward: no sample kills the program, and sampling goes on") {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (bool ascending : {true, false}) {
    const int status =
        in_child([&] { return set_every_signal(dfl, ascending, 150, "moved to another free real-time signal"); });
    INFO((ascending ? "ascending" : "descending") << ": the child's " << describe(status));
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
}

TEST_CASE("every signal ignored: no signal is left for samples, sampling stops, said once, and nothing is killed") {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  const int status = in_child([&] { return set_every_signal(ignore, true, 0, "no other signal is free"); });
  INFO("the child's " << describe(status));
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
