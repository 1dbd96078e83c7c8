// Timeline: attaching, and recording scopes and frames into the preallocated records.
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "selfperf/error.hpp"
#include "counting/timeline_state.hpp"

namespace selfperf {

namespace {

std::atomic<Timeline::State*> g_attached{nullptr};
// Records being written right now: detach() waits for them, so a Timeline can be destroyed right after it.
std::atomic<int> g_in_flight{0};
std::atomic<std::uint64_t> g_generation{0};

struct ThreadCache {
  std::int32_t tid = 0;
  std::uint64_t generation = 0;  // the attach() this thread last registered its name with
};
thread_local ThreadCache t_cache;

// The attached timeline, counted as in flight until leave(); nullptr (and not counted) when none is attached.
// seq_cst on both sides: either detach() sees the increment and waits, or this sees the detach and backs off.
Timeline::State* enter() noexcept {
  if (g_attached.load(std::memory_order_relaxed) == nullptr) return nullptr;
  g_in_flight.fetch_add(1, std::memory_order_seq_cst);
  Timeline::State* s = g_attached.load(std::memory_order_seq_cst);
  if (s == nullptr) g_in_flight.fetch_sub(1, std::memory_order_release);
  return s;
}

void leave() noexcept { g_in_flight.fetch_sub(1, std::memory_order_release); }

// This thread's id, asked of the kernel once per thread; its name once per attach, into a free thread slot.
std::int32_t register_thread(Timeline::State& s) noexcept {
  if (t_cache.tid == 0) t_cache.tid = static_cast<std::int32_t>(syscall(SYS_gettid));
  if (t_cache.generation != s.generation) {
    t_cache.generation = s.generation;
    const std::size_t slot = s.next_thread.fetch_add(1, std::memory_order_relaxed);
    if (slot < detail::kTimelineThreads) {  // past that many threads, the trace shows bare thread ids
      detail::TimelineThread& t = s.threads[slot];
      t.tid = t_cache.tid;
      char name[17] = {};
      if (prctl(PR_GET_NAME, name) == 0) std::memcpy(t.name, name, sizeof t.name - 1);
      t.ready.store(1, std::memory_order_release);
    }
  }
  return t_cache.tid;
}

// A record for this thread, or nullptr when the timeline is full (then it is counted as dropped).
detail::TimelineRecord* claim(Timeline::State& s) noexcept {
  const std::uint64_t i = s.next.fetch_add(1, std::memory_order_relaxed);
  if (i >= s.capacity) return nullptr;
  detail::TimelineRecord& r = s.records[i];
  r.tid = register_thread(s);
  return &r;
}

void copy_name(char (&to)[64], std::string_view name) noexcept {
  const std::size_t n = std::min(name.size(), sizeof to - 1);
  std::memcpy(to, name.data(), n);
  to[n] = '\0';
}

}  // namespace

namespace detail {

bool timeline_attached() noexcept { return g_attached.load(std::memory_order_relaxed) != nullptr; }

std::uint64_t timeline_now_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

void timeline_record_scope(std::string_view name, const GroupReading& before, const GroupReading& after,
                           std::span<const double> overhead, std::uint64_t begin_ns, std::uint64_t end_ns) noexcept {
  Timeline::State* s = enter();
  if (s == nullptr) return;
  if (TimelineRecord* r = claim(*s)) {
    r->kind = TimelineKind::scope;
    copy_name(r->name, name);
    r->begin_ns = begin_ns;
    r->end_ns = end_ns;
    const std::size_t n = std::min({before.size(), after.size(), kMaxGroupMembers});
    r->events = static_cast<std::uint8_t>(n);
    r->counted = true;
    for (std::size_t i = 0; i < n; ++i) r->counted = r->counted && delta(before[i], after[i]).counted();
    // As Region::record totals it: the scaled delta less the calibrated overhead, clamped at zero.
    for (std::size_t i = 0; i < n; ++i) {
      double v = r->counted ? delta(before[i], after[i]).scaled() : 0.0;
      if (r->counted && i < overhead.size()) v = std::max(0.0, v - overhead[i]);
      r->deltas[i] = v;
    }
    r->ready.store(1, std::memory_order_release);
  }
  leave();
}

void timeline_record_frame(const FrameRecord& frame, std::size_t events, std::uint64_t begin_ns,
                           std::uint64_t end_ns) noexcept {
  Timeline::State* s = enter();
  if (s == nullptr) return;
  if (TimelineRecord* r = claim(*s)) {
    r->kind = TimelineKind::frame;
    copy_name(r->name, "frame");
    r->begin_ns = begin_ns;
    r->end_ns = end_ns;
    r->frame_index = frame.index;
    r->over_budget_mask = frame.over_budget_mask;
    const std::size_t n = std::min(events, kMaxGroupMembers);
    r->events = static_cast<std::uint8_t>(n);
    r->counted = true;
    for (std::size_t i = 0; i < n; ++i) {
      r->counted = r->counted && frame.counted[i];
      r->deltas[i] = static_cast<double>(frame.deltas[i]);
    }
    r->ready.store(1, std::memory_order_release);
  }
  leave();
}

}  // namespace detail

Timeline::Timeline(TimelineOptions options) : state_(std::make_unique<State>()) {
  if (options.capacity == 0)
    throw Error("Timeline: capacity 0 would record nothing; give the number of scopes and frames to keep");
  state_->capacity = options.capacity;
  state_->records = std::make_unique<detail::TimelineRecord[]>(options.capacity);
  state_->threads = std::make_unique<detail::TimelineThread[]>(detail::kTimelineThreads);
  state_->event_names = std::move(options.event_names);
}

Timeline::Timeline(const CounterGroup& group, std::size_t capacity)
    : Timeline([&] {
        TimelineOptions o;
        o.capacity = capacity;
        for (std::size_t i = 0; i < group.size(); ++i) o.event_names.push_back(group.event(i).name);
        return o;
      }()) {}

Timeline::~Timeline() { detach(); }

void Timeline::attach() {
  State* expected = nullptr;
  if (g_attached.load() == state_.get()) return;
  state_->generation = g_generation.fetch_add(1) + 1;
  if (!g_attached.compare_exchange_strong(expected, state_.get(), std::memory_order_seq_cst))
    throw Error("Timeline::attach: another Timeline is attached; detach() it first (one timeline records at a time)");
}

void Timeline::detach() noexcept {
  State* expected = state_.get();
  if (!g_attached.compare_exchange_strong(expected, nullptr, std::memory_order_seq_cst)) return;
  while (g_in_flight.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
}

bool Timeline::attached() const noexcept { return g_attached.load() == state_.get(); }
std::size_t Timeline::capacity() const noexcept { return state_->capacity; }

std::size_t Timeline::size() const noexcept {
  return static_cast<std::size_t>(std::min<std::uint64_t>(state_->next.load(), state_->capacity));
}

std::uint64_t Timeline::dropped() const noexcept { return state_->next.load() - size(); }

void Timeline::clear() {
  if (attached()) throw Error("Timeline::clear: the timeline is attached and threads may be writing; detach() first");
  for (std::size_t i = 0; i < size(); ++i) state_->records[i].ready.store(0, std::memory_order_relaxed);
  const std::size_t threads = std::min(state_->next_thread.load(), detail::kTimelineThreads);
  for (std::size_t i = 0; i < threads; ++i) state_->threads[i].ready.store(0, std::memory_order_relaxed);
  state_->next.store(0);
  state_->next_thread.store(0);
  state_->generation = 0;  // threads register their names again at the next attach()
}

}  // namespace selfperf
