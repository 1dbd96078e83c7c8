#include "sampling/fork_guard.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

namespace selfperf::detail {

namespace {

std::mutex g_list_mu;  // taken first at fork, so the list cannot change under it
std::vector<std::pair<std::mutex*, ForkLockRank>>& waited() {
  static auto* list = new std::vector<std::pair<std::mutex*, ForkLockRank>>;  // a fork may come during exit
  return *list;
}

std::vector<ForkGate*>& gates() {
  static auto* list = new std::vector<ForkGate*>;
  return *list;
}

// The locks are held: no thread that holds one waits at a gate. Bounded (see ForkGate).
void close_fork_gates() {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (ForkGate* g : gates()) g->close();
  for (ForkGate* g : gates())
    while (!g->empty() && std::chrono::steady_clock::now() < give_up) sched_yield();
}

void before_fork() {
  g_list_mu.lock();
  for (ForkLockRank rank : {ForkLockRank::profiler, ForkLockRank::sampler, ForkLockRank::leaf})
    for (auto& [m, r] : waited())
      if (r == rank) m->lock();
  close_fork_gates();
}

// In the child too: the forking thread holds the locks there, and it is the one that continues.
void after_fork() {
  for (ForkGate* g : gates()) g->open();
  for (auto& entry : waited()) entry.first->unlock();
  g_list_mu.unlock();
}

void install_fork_handlers() {
  static std::once_flag installed;
  std::call_once(installed, [] { ::pthread_atfork(before_fork, after_fork, after_fork); });
}

}  // namespace

// seq_cst on both sides: either the fork sees this thread inside, or this thread sees the fork coming.
bool ForkGate::try_enter() noexcept {
  if (forking_.load(std::memory_order_seq_cst)) return false;
  inside_.fetch_add(1, std::memory_order_seq_cst);
  if (!forking_.load(std::memory_order_seq_cst)) return true;
  inside_.fetch_sub(1, std::memory_order_seq_cst);
  return false;
}

void ForkGate::enter() noexcept {
  while (!try_enter()) sched_yield();
}

void fork_waits_for(std::mutex& work, ForkLockRank rank) {
  install_fork_handlers();
  std::lock_guard lock(g_list_mu);
  waited().emplace_back(&work, rank);
}

void fork_waits_for(ForkGate& gate) {
  install_fork_handlers();
  std::lock_guard lock(g_list_mu);
  gates().push_back(&gate);
}

void fork_no_longer_waits_for(std::mutex& work) {
  std::lock_guard lock(g_list_mu);
  std::erase_if(waited(), [&](const auto& entry) { return entry.first == &work; });
}

}  // namespace selfperf::detail
