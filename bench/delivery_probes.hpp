#pragma once
// bench_delivery's behaviour probes: what each signal-delivery design (delivery_designs.hpp) does with threads
// started later or earlier, descriptors and memory per thread, fork, exec, a thread that blocks the signal, a
// program with its own SIGTRAP handler, a tracer and gdb, plus the kernel's rules for the sigtrap attributes. Each
// probe runs in a child process of its own (signal dispositions, samplers and threads do not leak into the
// next one or into the benchmarks); the results are printed as markdown tables.
#include <string>

namespace selfperf_bench {

void run_delivery_probes(const std::string& self);

// The probes' own modes of the bench binary (argv[1] = --burn-ms N: the program exec'd while sampling;
// --gdb-target DESIGN: the program run under gdb). True when argv named one; rc is then its exit status.
bool delivery_probe_child(int argc, char** argv, int& rc);

}  // namespace selfperf_bench
