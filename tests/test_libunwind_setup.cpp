// Sampler::Options::defer_libunwind_setup: libunwind's process set-up (its first trace, ~2 ms of a short
// process's CPU) waits for prepare_libunwind_process(); until then a sample that needs libunwind keeps the
// DWARF walk's frames and is counted as unwound partially; after it, libunwind takes those samples. Its own
// binary: the set-up is once per process, and nothing else here may have made it first.
#include <doctest.h>

#include <cstdint>

#include "sampler_workload.hpp"
#include "selfperf/sampler.hpp"
#include "selfperf/unwind.hpp"
#include "spin_without_cfi.hpp"

using selfperf::LibunwindSetup;
using selfperf::Sampler;
using selfperf::Unwinder;

namespace {

// Spins in code without call-frame information: every sample taken there needs libunwind.
Sampler::Totals spin_sampled(bool defer) {
  Sampler::Options options;
  options.event = "cpu-clock";
  options.period = 500'000;  // 2 kHz
  options.unwinder = Unwinder::libunwind;
  options.defer_libunwind_setup = defer;
  Sampler sampler(options);
  sampler.start();
  {
    Sampler::ThreadAttachment attached(sampler);
    for (int burst = 0; burst < 40; ++burst) selfperf_test_spin_without_cfi(2'000'000);
  }
  return sampler.stop();
}

}  // namespace

TEST_CASE("libunwind's set-up put off: partial stacks until prepare_libunwind_process(), libunwind's after") {
  if (selfperf_test::kTsan) {
    MESSAGE("skipped under TSan: the sampler refuses Unwinder::libunwind there");
    return;
  }
  REQUIRE(selfperf::libunwind_setup() == LibunwindSetup::not_yet);

  const Sampler::Totals before = spin_sampled(true);
  INFO("put off: samples " << before.samples << ", by libunwind " << before.unwound_by_libunwind
                           << ", partially " << before.unwound_partially);
  CHECK(before.samples > 0);
  CHECK(selfperf::libunwind_setup() == LibunwindSetup::not_yet);  // attaching did not make it
  CHECK(before.unwound_by_libunwind == 0);
  CHECK(before.unwound_partially > 0);

  selfperf::prepare_libunwind_process();
  CHECK(selfperf::libunwind_setup() != LibunwindSetup::not_yet);
  const Sampler::Totals after = spin_sampled(true);
  INFO("prepared: samples " << after.samples << ", by libunwind " << after.unwound_by_libunwind);
  CHECK(after.unwound_by_libunwind > 0);
}
