#include <doctest.h>

#include <cerrno>
#include <cstdint>
#include <string>

#include "events/perf_syscall.hpp"
#include "selfperf/error.hpp"
#include "selfperf/sampling_event.hpp"
#include "test_support.hpp"

using namespace selfperf;

using selfperf::test::burn_cpu;

TEST_CASE("kernel-callchain attr: sample fields, and user-only where paranoid demands it") {
  CallchainSamplingOptions options;
  options.period = 250000;
  const perf_event_attr attr = callchain_sampling_attr(parse_event("cpu-clock"), options);
  CHECK(attr.sample_type == (PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_PERIOD |
                             PERF_SAMPLE_CALLCHAIN));
  CHECK(attr.sample_period == 250000);
  CHECK(attr.freq == 0);
  CHECK(attr.sample_id_all == 1);
  CHECK(attr.disabled == 1);
  CHECK(attr.wakeup_events == 1);
  const bool kernel_ok = detail::kernel_counting_allowed();
  CHECK(attr.exclude_kernel == (kernel_ok ? 0u : 1u));
  CHECK(attr.exclude_callchain_kernel == (kernel_ok ? 0u : 1u));

  CallchainSamplingOptions by_frequency;
  by_frequency.frequency = 997;
  by_frequency.kernel_frames = KernelFrames::exclude;
  by_frequency.max_stack = 32;
  const perf_event_attr f = callchain_sampling_attr(parse_event("cpu-clock:u"), by_frequency);
  CHECK(f.freq == 1);
  CHECK(f.sample_freq == 997);
  CHECK(f.exclude_kernel == 1);  // named by the event, kept
  CHECK(f.exclude_callchain_kernel == 1);
  CHECK(f.sample_max_stack == 32);

  CHECK_THROWS_WITH_AS(callchain_sampling_attr(parse_event("cpu-clock"), CallchainSamplingOptions{}),
                       doctest::Contains("exactly one of period"), Error);
  CallchainSamplingOptions both;
  both.period = 1;
  both.frequency = 1;
  CHECK_THROWS_AS(callchain_sampling_attr(parse_event("cpu-clock"), both), Error);
}

TEST_CASE("kernel-callchain mode opens as whoever runs it and its samples decode") {
  CallchainSamplingOptions options;
  options.period = 100000;
  SamplingEvent event = open_callchain_sampling("cpu-clock", options, 0, 16);
  event.enable();
  burn_cpu(10'000'000);
  event.disable();
  std::size_t samples = 0, with_user_frames = 0;
  const pid_t tid = detail::current_tid();
  event.read_samples([&](const SampleRecord& s) {
    ++samples;
    CHECK(static_cast<pid_t>(s.tid) == tid);
    std::size_t user = 0;
    for_each_frame(s.callchain, [&](std::uint64_t, CallchainContext c) { user += c == CallchainContext::user; });
    if (user > 0) ++with_user_frames;
  });
  CHECK(samples > 0);
  CHECK(with_user_frames > 0);
  CHECK(event.undecodable() == 0);
  CHECK(event.ring().stats().corruptions == 0);
}

TEST_CASE("memory-access attr: precise, with address, data source and weight") {
  EventSpec spec = parse_event("cpu-clock");  // any spec: only the attr is built here
  MemorySamplingOptions options;
  options.period = 5003;
  options.phys_addr = true;
  const perf_event_attr attr = memory_sampling_attr(spec, options);
  CHECK((attr.sample_type & PERF_SAMPLE_ADDR) != 0);
  CHECK((attr.sample_type & PERF_SAMPLE_DATA_SRC) != 0);
  CHECK((attr.sample_type & PERF_SAMPLE_WEIGHT) != 0);
  CHECK((attr.sample_type & PERF_SAMPLE_PHYS_ADDR) != 0);
  CHECK(attr.precise_ip >= 1);
  CHECK(attr.sample_period == 5003);
  options.precise_ip = 0;
  CHECK(memory_sampling_attr(spec, options).precise_ip == 1);  // never imprecise: no data source without it
  options.period = 0;
  CHECK_THROWS_AS(memory_sampling_attr(spec, options), Error);
}

TEST_CASE("memory-access mode says clearly when the machine has no precise-sampling PMU") {
  if (has_precise_memory_pmu()) {
    // Hardware: it opens, or fails with a message that names the event (tests/hw_mem_sampling.cpp samples).
    try {
      SamplingEvent event = open_memory_sampling();
      CHECK(event.fd() >= 0);
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find("mem-loads") != std::string::npos);
    }
    return;
  }
  try {
    SamplingEvent event = open_memory_sampling();
    FAIL("memory sampling opened without a core PMU");
  } catch (const Error& e) {
    CHECK(e.errno_value() == ENOENT);
    CHECK(std::string(e.what()).find("needs a hardware PMU with precise sampling (PEBS") != std::string::npos);
  }
}
