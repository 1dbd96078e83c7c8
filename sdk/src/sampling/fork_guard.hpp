#pragma once
// fork() waits for the library's other threads to leave the library's locks. A child gets a copy of every
// lock as it stood at the fork; a lock held by a thread that the child does not have stays held there for
// good, and the child's first call that takes it never returns. Such locks bit real programs:
// - a profiler's drain thread allocates under its lock, and glibc makes malloc safe across fork by itself but
//   GCC 12's ASan allocator does not (1 run in ~150 of check_profile_preload under ASan hung in the forked
//   child's first malloc, its lock taken mid-drain in the parent);
// - a sampler's lock and the code map's, held by a thread attaching or detaching (a thread starting or
//   ending) while another forks: the child's profiler then blocked for good attaching its own thread (a
//   pyenv bash shim under the preload library, whose shells fork while their threads come and go).
#include <atomic>
#include <mutex>

namespace selfperf::detail {

// Where a lock sits in the library's nesting: a thread holding one may take only locks of a lower rank.
// fork() takes them highest rank first, so it never waits for a lock while holding one that the holder of
// that lock wants next.
enum class ForkLockRank {
  leaf,      // taken with nothing of ours under it: the thread registry, signal installation, the code map
  sampler,   // a sampler's own state (SamplerCore::mutex_)
  profiler,  // a profiler's drain pass, which drains its sampler
};

// From now on fork() (pthread_atfork; not vfork or posix_spawn, which copy nothing) takes `work` before it
// forks and releases it after, in parent and child. No thread may fork while holding `work`, and none may
// call these two functions while holding a lock registered here (fork() holds the list's lock meanwhile).
void fork_waits_for(std::mutex& work, ForkLockRank rank);
// Undoes fork_waits_for, before `work` is destroyed.
void fork_no_longer_waits_for(std::mutex& work);

// What a lock cannot guard: code that a signal handler runs (libunwind's trace, whose lookups hold the loader's
// dl_load_write_lock, which glibc 2.36 does not reset in a child). fork() closes the gate once it holds the
// locks above, so no thread that holds one of them waits at it, then waits for those inside to leave (1 s at
// most: a program's handler that forks on a thread interrupted inside would wait for itself).
class ForkGate {
 public:
  // For signal handlers: false, and nothing entered, while a fork is under way.
  bool try_enter() noexcept;
  // Elsewhere: waits for a fork under way.
  void enter() noexcept;
  void leave() noexcept { inside_.fetch_sub(1, std::memory_order_seq_cst); }

  // fork()'s side (fork_guard.cpp).
  void close() noexcept { forking_.store(true, std::memory_order_seq_cst); }
  bool empty() const noexcept { return inside_.load(std::memory_order_seq_cst) == 0; }
  void open() noexcept { forking_.store(false, std::memory_order_seq_cst); }

 private:
  std::atomic<int> inside_{0};
  std::atomic<bool> forking_{false};
};

// From now on fork() waits at `gate` too. `gate` lives as long as the process (a static).
void fork_waits_for(ForkGate& gate);

}  // namespace selfperf::detail
