#pragma once
// One overflow sample, as the sampler hands it to drain() callbacks and as perf.data writers take it.
#include <cstdint>
#include <span>

#include <linux/perf_event.h>
#include <sys/types.h>

namespace selfperf {

struct Sample {
  pid_t pid = 0;
  pid_t tid = 0;
  std::uint64_t time = 0;    // perf clock (CLOCK_MONOTONIC-based, ns), comparable with PERF_SAMPLE_TIME
  std::uint64_t period = 0;  // events since the previous sample (the event value's increment)
  std::uint32_t cpu = 0;
  std::uint64_t id = 0;      // kernel event id (PERF_SAMPLE_ID), 0 when unknown
  // Instruction addresses, leaf first; frames[0] is the interrupted IP. Valid only during the callback.
  std::span<const std::uint64_t> frames;
  // Memory-access sampling (PERF_SAMPLE_ADDR / DATA_SRC / WEIGHT); 0 when not sampled.
  std::uint64_t addr = 0;
  std::uint64_t data_src = 0;
  std::uint64_t weight = 0;
  // PERF_SAMPLE_BRANCH_STACK (LBR, BRBE): the last branches taken, newest first; each entry's from and to
  // addresses and flags (mispred, predicted, in_tx, abort, cycles, type). Valid only during the callback.
  std::span<const perf_branch_entry> branches;
  // PERF_SAMPLE_BRANCH_HW_INDEX: the hardware's index of the newest entry (LBR TOS); ~0 when unknown.
  std::uint64_t branch_hw_index = ~std::uint64_t{0};
};

}  // namespace selfperf
