// The registry the pthread_create hook consults on every new thread.
#include "sampling/new_threads.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "sampling/fork_guard.hpp"
#include "sampling/sampler_core.hpp"

// Defined by sdk/hook/thread_hook.cpp; absent (null) when the hook is not linked in.
extern "C" {
[[gnu::weak]] extern const int selfperf_thread_hook_linked;
}

namespace selfperf::detail {

namespace {

std::mutex g_mutex;
thread_local bool t_unattached_creation = false;
std::atomic<int> g_count{0};  // lets threads skip the lock when no sampler wants them
std::vector<std::weak_ptr<SamplerCore>>& cores() {
  static auto* list = new std::vector<std::weak_ptr<SamplerCore>>;  // never destroyed: threads may start late
  return *list;
}

}  // namespace

void registry_waits_for_fork() { fork_waits_for(g_mutex, ForkLockRank::leaf); }

UnattachedThreadCreation::UnattachedThreadCreation() noexcept : previous_(t_unattached_creation) {
  t_unattached_creation = true;
}
UnattachedThreadCreation::~UnattachedThreadCreation() { t_unattached_creation = previous_; }

bool thread_hook_present() noexcept { return &selfperf_thread_hook_linked != nullptr; }

void attach_new_threads_to(const std::shared_ptr<SamplerCore>& core) {
  std::lock_guard lock(g_mutex);
  cores().push_back(core);
  g_count.store(static_cast<int>(cores().size()), std::memory_order_release);
}

void stop_attaching_new_threads(const SamplerCore* core) {
  std::lock_guard lock(g_mutex);
  std::erase_if(cores(), [&](const std::weak_ptr<SamplerCore>& w) {
    auto c = w.lock();
    return c == nullptr || c.get() == core;
  });
  g_count.store(static_cast<int>(cores().size()), std::memory_order_release);
}

}  // namespace selfperf::detail

extern "C" bool selfperf_thread_creation_attaches() noexcept { return !selfperf::detail::t_unattached_creation; }

extern "C" void selfperf_thread_started() noexcept {
  using selfperf::detail::SamplerCore;
  if (selfperf::detail::g_count.load(std::memory_order_acquire) == 0) return;
  std::vector<std::shared_ptr<SamplerCore>> wanting;
  try {
    std::lock_guard lock(selfperf::detail::g_mutex);
    for (auto& w : selfperf::detail::cores())
      if (auto c = w.lock()) wanting.push_back(std::move(c));
  } catch (const std::bad_alloc&) {
    return;
  }
  for (auto& core : wanting) core->attach_new_thread();
}
