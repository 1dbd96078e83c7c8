// Timeline::to_chrome_trace_json: the records as Chrome Trace Event JSON (Perfetto UI, chrome://tracing,
// speedscope).
#include <errno.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "output/report_format.hpp"
#include "selfperf/error.hpp"
#include "selfperf/instrument.hpp"
#include "counting/timeline_state.hpp"

namespace selfperf {

namespace {

// ns as µs, the trace format's unit; fractional, so that nothing finer than a µs is lost.
double microseconds(std::uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

std::string process_name() {
  std::ifstream comm("/proc/self/comm");
  std::string name;
  std::getline(comm, name);
  return name.empty() ? std::string("selfperf") : name;
}

}  // namespace

std::string Timeline::to_chrome_trace_json() const {
  using nlohmann::json;
  std::vector<std::string> names = state_->event_names;
  if (names.empty()) names = default_events();
  std::vector<std::string> keys;  // "<event> (<unit>)"
  for (std::size_t i = 0; i < kMaxGroupMembers; ++i) {
    const std::string name = i < names.size() ? names[i] : "event " + std::to_string(i);
    keys.push_back(name + " (" + detail::event_unit(name) + ")");
  }

  std::vector<const detail::TimelineRecord*> records;
  for (std::size_t i = 0; i < size(); ++i)
    if (state_->records[i].ready.load(std::memory_order_acquire) != 0) records.push_back(&state_->records[i]);
  // Per thread by start time, an enclosing event before the ones it encloses (the longer first on a tie):
  // records are written when a scope ends, so an inner scope comes before its outer one.
  std::sort(records.begin(), records.end(), [](const detail::TimelineRecord* a, const detail::TimelineRecord* b) {
    if (a->tid != b->tid) return a->tid < b->tid;
    if (a->begin_ns != b->begin_ns) return a->begin_ns < b->begin_ns;
    return a->end_ns > b->end_ns;
  });

  const int pid = static_cast<int>(getpid());
  json events = json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", pid},
                    {"args", {{"name", process_name()}}}});
  std::map<std::int32_t, std::string> threads;
  const std::size_t thread_slots = std::min(state_->next_thread.load(), detail::kTimelineThreads);
  for (std::size_t i = 0; i < thread_slots; ++i) {
    const detail::TimelineThread& t = state_->threads[i];
    if (t.ready.load(std::memory_order_acquire) != 0) threads[t.tid] = t.name;
  }
  for (const auto& [tid, name] : threads)
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});

  for (const detail::TimelineRecord* r : records) {
    const bool frame = r->kind == detail::TimelineKind::frame;
    json args = json::object();
    if (frame) {
      args["index"] = r->frame_index;
      args["wall (ns)"] = r->end_ns - r->begin_ns;
      json exceeded = json::array();
      if (r->over_budget_mask & 1u) exceeded.push_back("wall");
      for (std::size_t i = 0; i < r->events; ++i)
        if ((r->over_budget_mask >> (i + 1)) & 1u) exceeded.push_back(i < names.size() ? names[i] : keys[i]);
      args["over_budget"] = exceeded;
    }
    if (!r->counted) {
      args["not_counted"] = true;
    } else {
      for (std::size_t i = 0; i < r->events; ++i) args[keys[i]] = r->deltas[i];
    }
    events.push_back({{"name", r->name},
                      {"cat", frame ? "frame" : "scope"},
                      {"ph", "X"},
                      {"ts", microseconds(r->begin_ns)},
                      {"dur", microseconds(r->end_ns >= r->begin_ns ? r->end_ns - r->begin_ns : 0)},
                      {"pid", pid},
                      {"tid", r->tid},
                      {"args", std::move(args)}});
  }

  json trace = {{"traceEvents", std::move(events)},
                {"displayTimeUnit", "ns"},
                {"otherData",
                 {{"clock", "CLOCK_MONOTONIC"},
                  {"events", names},
                  {"dropped", dropped()},
                  {"capacity", capacity()}}}};
  // Region names are the program's own strings: replace invalid UTF-8 rather than throw.
  return trace.dump(-1, ' ', false, json::error_handler_t::replace);
}

void Timeline::write_chrome_trace(const std::string& path) const {
  const std::string text = to_chrome_trace_json();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (out) out.close();
  if (!out)
    throw Error("Timeline::write_chrome_trace: cannot write " + path + ": " + std::strerror(errno) +
                    " (check that the directory exists and is writable)",
                errno);
}

}  // namespace selfperf
