#include "sampling/fork_guard.hpp"

#include <pthread.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace selfperf::detail {

namespace {

std::mutex g_list_mu;  // taken first at fork, so the list cannot change under it
std::vector<std::pair<std::mutex*, ForkLockRank>>& waited() {
  static auto* list = new std::vector<std::pair<std::mutex*, ForkLockRank>>;  // a fork may come during exit
  return *list;
}

void before_fork() {
  g_list_mu.lock();
  for (ForkLockRank rank : {ForkLockRank::profiler, ForkLockRank::sampler, ForkLockRank::leaf})
    for (auto& [m, r] : waited())
      if (r == rank) m->lock();
}

// In the child too: the forking thread holds the locks there, and it is the one that continues.
void after_fork() {
  for (auto& entry : waited()) entry.first->unlock();
  g_list_mu.unlock();
}

}  // namespace

void fork_waits_for(std::mutex& work, ForkLockRank rank) {
  static std::once_flag installed;
  std::call_once(installed, [] { ::pthread_atfork(before_fork, after_fork, after_fork); });
  std::lock_guard lock(g_list_mu);
  waited().emplace_back(&work, rank);
}

void fork_no_longer_waits_for(std::mutex& work) {
  std::lock_guard lock(g_list_mu);
  std::erase_if(waited(), [&](const auto& entry) { return entry.first == &work; });
}

}  // namespace selfperf::detail
