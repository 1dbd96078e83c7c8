#pragma once
// fork() waits for the library's background threads to be between units of work. A child gets a copy of
// every lock as it stood at the fork; a lock held by a thread that the child does not have stays held
// there for good. glibc makes malloc safe across fork by itself, but GCC 12's ASan allocator does not, and
// a profiler's drain thread allocates (1 run in ~150 of check_profile_preload under ASan hung in the forked
// child's first malloc, its lock taken mid-drain in the parent).
#include <mutex>

namespace selfperf::detail {

// From now on fork() (pthread_atfork; not vfork or posix_spawn, which copy nothing) takes `work` before it
// forks and releases it after, in parent and child. `work` is what a background thread holds while it
// works; no thread may fork while holding it.
void fork_waits_for(std::mutex& work);
// Undoes fork_waits_for, before `work` is destroyed.
void fork_no_longer_waits_for(std::mutex& work);

}  // namespace selfperf::detail
