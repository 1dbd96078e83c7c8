#pragma once
// selfperf record -p --call-graph dwarf[,SIZE]: the SIZE of the stack copies, the rings that hold samples
// with such copies, and the summary of their unwinding (StackCopyUnwinder).
#include <cstddef>
#include <cstdint>
#include <string>

#include "unwinding/unwind_stack_copy.hpp"

namespace selfperf::tool {

// perf record's default for --call-graph dwarf, and the most a sample's 16-bit size leaves room for.
constexpr std::size_t kDefaultStackCopy = 8192;
constexpr std::size_t kMaxStackCopy = 65528;

// Parses a stack copy size: a multiple of 8 from 8 to kMaxStackCopy (the kernel copies whole words).
bool parse_stack_copy_size(const std::string& text, std::size_t& out);

// Data pages of each thread's ring for `copy`-byte samples, `threads` of them at the attach: room for 24
// samples, less where an unprivileged user's locked memory would not hold that many rings.
std::size_t stack_copy_ring_pages(std::size_t copy, std::size_t threads);

// The summary's lines on the unwinding, with the remedy for what fell short (`lost`: samples the rings lost).
void print_unwind_summary(const detail::StackCopyUnwindStats& stats, std::uint64_t lost, std::size_t copy,
                          std::size_t ring_pages);

}  // namespace selfperf::tool
