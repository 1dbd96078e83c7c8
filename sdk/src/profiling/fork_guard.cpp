#include "profiling/fork_guard.hpp"

#include <pthread.h>

#include <algorithm>
#include <vector>

namespace selfperf::detail {

namespace {

std::mutex g_list_mu;  // taken first at fork, so the list cannot change under it
std::vector<std::mutex*> g_waited;

void before_fork() {
  g_list_mu.lock();
  for (std::mutex* m : g_waited) m->lock();
}

// In the child too: the forking thread holds the locks there, and it is the one that continues.
void after_fork() {
  for (auto it = g_waited.rbegin(); it != g_waited.rend(); ++it) (*it)->unlock();
  g_list_mu.unlock();
}

}  // namespace

void fork_waits_for(std::mutex& work) {
  static std::once_flag installed;
  std::call_once(installed, [] { ::pthread_atfork(before_fork, after_fork, after_fork); });
  std::lock_guard lock(g_list_mu);
  g_waited.push_back(&work);
}

void fork_no_longer_waits_for(std::mutex& work) {
  std::lock_guard lock(g_list_mu);
  g_waited.erase(std::remove(g_waited.begin(), g_waited.end(), &work), g_waited.end());
}

}  // namespace selfperf::detail
