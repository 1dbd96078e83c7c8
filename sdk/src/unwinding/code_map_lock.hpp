#pragma once
// CodeMap::refresh() runs under a process-wide lock (a thread attaching to a sampler takes it).

namespace selfperf::detail {

// Makes fork() wait for that lock (sampling/fork_guard.hpp). Call once, with no lock held.
void code_map_waits_for_fork();

}  // namespace selfperf::detail
