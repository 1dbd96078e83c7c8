// Timeline: scopes and frames recorded as Chrome Trace Event JSON, parsed back with nlohmann::json.
#include <doctest.h>
#include <pthread.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "counting_new.hpp"
#include "selfperf/selfperf.hpp"
#include "test_support.hpp"

using nlohmann::json;
using selfperf::test::touch_fresh_pages;

namespace {

const std::vector<std::string> kEvents = {"page-faults:u", "task-clock:u"};
constexpr const char* kFaults = "page-faults:u (count)";
constexpr const char* kClock = "task-clock:u (ns)";

struct Span {
  std::string name, cat;
  std::int64_t begin = 0, end = 0;  // ns
  json args;
};

// The "X" events of one thread, in ns, ordered as a reader nests them (start, then the longer first).
std::map<std::int64_t, std::vector<Span>> spans_by_thread(const json& trace) {
  std::map<std::int64_t, std::vector<Span>> out;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    Span s;
    s.name = e.at("name");
    s.cat = e.at("cat");
    s.begin = std::llround(e.at("ts").get<double>() * 1000.0);
    s.end = s.begin + std::llround(e.at("dur").get<double>() * 1000.0);
    s.args = e.at("args");
    CHECK(e.at("pid").get<std::int64_t>() == static_cast<std::int64_t>(getpid()));
    out[e.at("tid").get<std::int64_t>()].push_back(s);
  }
  // std::sort, not stable_sort: stable_sort's buffer comes from the nothrow operator new, which counting_new.hpp
  // does not replace, and ASan then reports its release through the replaced delete as a mismatch.
  for (auto& [tid, spans] : out)
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
      if (a.begin != b.begin) return a.begin < b.begin;
      if (a.end != b.end) return a.end > b.end;
      return a.name < b.name;
    });
  return out;
}

// Every span either lies inside the innermost open one or starts after it ends (no partial overlap); returns
// each span's enclosing span's name ("" at top level) in order.
std::vector<std::pair<std::string, std::string>> nesting(const std::vector<Span>& spans) {
  std::vector<std::pair<std::string, std::string>> out;
  std::vector<const Span*> open;
  for (const Span& s : spans) {
    while (!open.empty() && open.back()->end <= s.begin) open.pop_back();
    if (!open.empty()) CHECK_MESSAGE(s.end <= open.back()->end, s.name << " overlaps " << open.back()->name);
    out.emplace_back(s.name, open.empty() ? "" : open.back()->name);
    open.push_back(&s);
  }
  return out;
}

std::map<std::int64_t, std::string> thread_names(const json& trace) {
  std::map<std::int64_t, std::string> out;
  for (const json& e : trace.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("name") == "thread_name") out[e.at("tid")] = e.at("args").at("name");
  return out;
}

struct WorkerRegions {
  selfperf::Region outer{"outer"}, fault{"fault"}, wrap{"wrap"}, leaf{"leaf"};
  std::int64_t tid = 0;
};

constexpr int kCalls = 20;

void worker(WorkerRegions& r, const char* name) {
  pthread_setname_np(pthread_self(), name);
  r.tid = gettid();
  selfperf::CounterGroup group(kEvents);
  group.enable();
  for (int i = 0; i < kCalls; ++i) {
    selfperf::Scope outer(group, r.outer);
    {
      selfperf::Scope fault(group, r.fault);
      touch_fresh_pages(4);
    }
    selfperf::Scope wrap(group, r.wrap);
    selfperf::Scope leaf(group, r.leaf);
    touch_fresh_pages(1);
  }
}

}  // namespace

TEST_CASE("Timeline: nested scopes on two threads, every call with its deltas, named threads") {
  selfperf::Timeline timeline(selfperf::TimelineOptions{.capacity = 1024, .event_names = kEvents});
  WorkerRegions a, b;
  timeline.attach();
  CHECK(timeline.attached());
  std::thread ta(worker, std::ref(a), "tl-worker-a");
  std::thread tb(worker, std::ref(b), "tl-worker-b");
  ta.join();
  tb.join();
  timeline.detach();
  CHECK_FALSE(timeline.attached());
  CHECK(timeline.size() == 2 * 4 * kCalls);
  CHECK(timeline.dropped() == 0);

  const json trace = json::parse(timeline.to_chrome_trace_json());
  CHECK(trace.at("otherData").at("events") == json(kEvents));
  CHECK(trace.at("otherData").at("dropped") == 0);
  const auto names = thread_names(trace);
  CHECK(names.at(a.tid) == "tl-worker-a");
  CHECK(names.at(b.tid) == "tl-worker-b");
  const auto spans = spans_by_thread(trace);
  CHECK(spans.size() == 2);

  for (WorkerRegions* w : {&a, &b}) {
    CAPTURE(w->tid);
    REQUIRE(spans.count(w->tid) == 1);
    const std::vector<Span>& mine = spans.at(w->tid);
    // Every call, each under the scope that enclosed it.
    std::map<std::pair<std::string, std::string>, int> pairs;
    for (const auto& p : nesting(mine)) ++pairs[p];
    CHECK(pairs[{"outer", ""}] == kCalls);
    CHECK(pairs[{"fault", "outer"}] == kCalls);
    CHECK(pairs[{"wrap", "outer"}] == kCalls);
    CHECK(pairs[{"leaf", "wrap"}] == kCalls);
    CHECK(pairs.size() == 4);
    // The deltas add up to what the Region totals say.
    for (const selfperf::Region* region : {&w->outer, &w->fault, &w->wrap, &w->leaf}) {
      CAPTURE(region->name());
      double faults = 0, clock = 0;
      int calls = 0;
      for (const Span& s : mine) {
        if (s.name != region->name()) continue;
        ++calls;
        CHECK(s.cat == "scope");
        REQUIRE(s.args.contains(kFaults));
        faults += s.args.at(kFaults).get<double>();
        clock += s.args.at(kClock).get<double>();
      }
      CHECK(calls == static_cast<int>(region->calls()));
      CHECK(region->not_counted() == 0);
      CHECK(faults == doctest::Approx(region->totals(0).sum).epsilon(1e-12));
      CHECK(clock == doctest::Approx(region->totals(1).sum).epsilon(1e-12));
    }
    // Each "fault" call touched four fresh pages.
    for (const Span& s : mine)
      if (s.name == "fault") CHECK(s.args.at(kFaults).get<double>() >= 4);
  }
}

TEST_CASE("Timeline: FrameLoop frames enclose their scopes and carry the frame's deltas") {
  selfperf::CounterGroup group(kEvents);
  group.enable();
  selfperf::FrameLoop loop(group, {.wall_budget = std::chrono::nanoseconds(1)});  // every frame over budget
  selfperf::Region work("work");
  selfperf::Timeline timeline(group, 256);
  timeline.attach();
  constexpr int kFrames = 10;
  for (int f = 0; f < kFrames; ++f) {
    loop.begin();
    {
      selfperf::Scope s(group, work);
      touch_fresh_pages(2);
    }
    loop.end();
  }
  timeline.detach();

  const json trace = json::parse(timeline.to_chrome_trace_json());
  const auto spans = spans_by_thread(trace);
  REQUIRE(spans.size() == 1);
  const std::vector<Span>& mine = spans.begin()->second;
  std::map<std::pair<std::string, std::string>, int> pairs;
  for (const auto& p : nesting(mine)) ++pairs[p];
  CHECK(pairs[{"frame", ""}] == kFrames);
  CHECK(pairs[{"work", "frame"}] == kFrames);
  std::uint64_t next_index = 0, wall = 0;
  double faults = 0;
  for (const Span& s : mine) {
    if (s.cat != "frame") continue;
    CHECK(s.args.at("index") == next_index++);
    CHECK(s.args.at("wall (ns)").get<std::int64_t>() == s.end - s.begin);
    CHECK(s.args.at("over_budget") == json::array({"wall"}));
    wall += s.args.at("wall (ns)").get<std::uint64_t>();
    faults += s.args.at(kFaults).get<double>();
  }
  CHECK(next_index == kFrames);
  CHECK(wall == static_cast<std::uint64_t>(loop.wall_histogram().sum()));
  CHECK(faults == static_cast<double>(static_cast<std::uint64_t>(loop.histogram(0).sum())));
  CHECK(faults >= 2 * kFrames);
}

TEST_CASE("Timeline: a full timeline counts what it drops, and recording allocates nothing") {
  selfperf::CounterGroup group(kEvents);
  group.enable();
  selfperf::Region region("r");
  selfperf::Timeline timeline(group, 5);
  timeline.attach();
  { selfperf::Scope warm(group, region); }  // this thread's first record: its id and name
  const unsigned long before = selfperf::test::allocations.load();
  for (int i = 0; i < 7; ++i) selfperf::Scope s(group, region);
  const unsigned long allocated = selfperf::test::allocations.load() - before;
  timeline.detach();
  CHECK(allocated == 0);
  CHECK(timeline.size() == 5);
  CHECK(timeline.dropped() == 3);
  const json trace = json::parse(timeline.to_chrome_trace_json());
  CHECK(trace.at("otherData").at("dropped") == 3);
  CHECK(spans_by_thread(trace).begin()->second.size() == 5);

  // Detached: nothing more is recorded. clear() forgets.
  { selfperf::Scope s(group, region); }
  CHECK(timeline.dropped() == 3);
  timeline.clear();
  CHECK(timeline.size() == 0);
  CHECK(timeline.dropped() == 0);
  CHECK(spans_by_thread(json::parse(timeline.to_chrome_trace_json())).empty());
}

TEST_CASE("Timeline: one attached at a time, clear only when detached, errors name the file") {
  selfperf::Timeline first(selfperf::TimelineOptions{.capacity = 4, .event_names = kEvents});
  selfperf::Timeline second(selfperf::TimelineOptions{.capacity = 4, .event_names = kEvents});
  first.attach();
  CHECK_THROWS_WITH_AS(second.attach(), doctest::Contains("detach"), selfperf::Error);
  CHECK_THROWS_WITH_AS(first.clear(), doctest::Contains("detach"), selfperf::Error);
  first.detach();
  second.attach();
  CHECK(second.attached());
  second.detach();
  CHECK_THROWS_WITH_AS(first.write_chrome_trace("/nonexistent-dir/trace.json"),
                       doctest::Contains("/nonexistent-dir/trace.json"), selfperf::Error);
  CHECK_THROWS_AS(selfperf::Timeline(selfperf::TimelineOptions{.capacity = 0}), selfperf::Error);
}

TEST_CASE("Timeline: SELFPERF_SCOPE regions are recorded, deltas named after the default events") {
  selfperf::Timeline timeline(selfperf::TimelineOptions{.capacity = 64});
  timeline.attach();
  for (int i = 0; i < 3; ++i) {
    SELFPERF_SCOPE("timeline-site");
  }
  timeline.detach();
  const json trace = json::parse(timeline.to_chrome_trace_json());
  CHECK(trace.at("otherData").at("events") == json(selfperf::default_events()));
  int seen = 0;
  for (const auto& [tid, spans] : spans_by_thread(trace))
    for (const Span& s : spans) seen += s.name == "timeline-site";
  // Where this thread's group cannot be opened SELFPERF_SCOPE measures nothing, and so records nothing.
  if (selfperf::default_events_reason().empty()) MESSAGE("no default events");
  CHECK((seen == 3 || seen == 0));
  if (seen == 0) MESSAGE("SELFPERF_SCOPE recorded nothing: the default event group did not open here");
}
