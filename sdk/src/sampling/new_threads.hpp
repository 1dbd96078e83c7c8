#pragma once
// Samplers started with Options::attach_new_threads, and the pthread_create hook that serves them
// (sdk/hook/thread_hook.cpp: selfperf::thread_hook, also inside the preload library).
#include <memory>

namespace selfperf::detail {

class SamplerCore;

// Whether the hook is linked into this program.
bool thread_hook_present() noexcept;
// From now on every thread the hook sees starting is attached to `core` before its function runs.
void attach_new_threads_to(const std::shared_ptr<SamplerCore>& core);
void stop_attaching_new_threads(const SamplerCore* core);
// Makes fork() wait for the registry's lock (fork_guard.hpp); once per process.
void registry_waits_for_fork();

// While one lives, the threads this thread creates are not attached: the profiler's own drain thread, whose
// attaching opened an event and mapped a ring only to close them again (a fifth of what starting the profile
// cost a short process).
class UnattachedThreadCreation {
 public:
  UnattachedThreadCreation() noexcept;
  ~UnattachedThreadCreation();
  UnattachedThreadCreation(const UnattachedThreadCreation&) = delete;
  UnattachedThreadCreation& operator=(const UnattachedThreadCreation&) = delete;

 private:
  bool previous_;
};

}  // namespace selfperf::detail

// Called by the hook on the new thread, before the thread's function.
extern "C" void selfperf_thread_started() noexcept;
// Called by the hook on the creating thread: false inside an UnattachedThreadCreation.
extern "C" bool selfperf_thread_creation_attaches() noexcept;
