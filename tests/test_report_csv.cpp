// Histogram::to_csv, FrameLoop::to_csv and FrameLoop::over_budget_csv read back with an independent RFC 4180
// reader (csv_reader.hpp): CRLF, a name holding a comma, a quote and a newline round-trips, every integer is
// exact above 2^53 (where a double would round), units in every table.
#include <doctest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "csv_reader.hpp"
#include "selfperf/counter_group.hpp"
#include "selfperf/frame_loop.hpp"
#include "selfperf/histogram.hpp"
#include "test_support.hpp"

using selfperf::FrameLoop;
using selfperf::GroupReading;
using selfperf::Histogram;
using selfperf::test::parse_csv;

using selfperf::test::reading;

namespace {

constexpr const char* kAwkwardName = "frame \"time\", ms\r\nnext line";
// Odd and above 2^53: no double holds it, so a value printed through one reads back different.
constexpr std::uint64_t kHuge = (std::uint64_t{1} << 62) + 12345;

std::map<std::string, std::size_t> columns(const std::vector<std::string>& header) {
  std::map<std::string, std::size_t> out;
  for (std::size_t i = 0; i < header.size(); ++i) out[header[i]] = i;
  return out;
}


}  // namespace

TEST_CASE("Histogram::to_csv: one exact row per bucket, awkward title round-trips, CRLF") {
  Histogram h;
  h.record(3, 2);
  h.record(1000);
  h.record(kHuge, 3);
  const auto rows = parse_csv(h.to_csv({.title = kAwkwardName, .unit = "ns"}));
  REQUIRE(rows.size() >= 2);
  const std::vector<std::string> header{"title", "unit", "lowest", "highest", "value", "count", "cumulative_count"};
  CHECK(rows[0] == header);
  std::vector<selfperf::HistogramBucket> buckets;
  for (const auto& b : h.buckets()) buckets.push_back(b);
  REQUIRE(rows.size() == buckets.size() + 1);
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    const auto& r = rows[i + 1];
    REQUIRE(r.size() == 7);
    CHECK(r[0] == kAwkwardName);
    CHECK(r[1] == "ns");
    CHECK(std::stoull(r[2]) == buckets[i].lowest);
    CHECK(std::stoull(r[3]) == buckets[i].highest);
    CHECK(std::stoull(r[4]) == buckets[i].value);
    CHECK(std::stoull(r[5]) == buckets[i].count);
    cumulative += buckets[i].count;
    CHECK(std::stoull(r[6]) == cumulative);
  }
  // The bucket of kHuge: its bounds are exact integers around it, not doubles rounded past it.
  const auto& last = rows.back();
  CHECK(std::stoull(last[2]) <= kHuge);
  CHECK(std::stoull(last[3]) >= kHuge);
  CHECK(std::stoull(last[3]) % 2 == 1);  // 2^53-wide buckets end on an odd number there: a double cannot say it
  CHECK(std::stoull(last[6]) == h.count());
}

TEST_CASE("Histogram::to_csv of an empty histogram is the header alone; the unit defaults to count") {
  CHECK(Histogram().to_csv() == "title,unit,lowest,highest,value,count,cumulative_count\r\n");
  Histogram h;
  h.record(7);
  const auto rows = parse_csv(h.to_csv());
  REQUIRE(rows.size() == 2);
  CHECK(rows[1][1] == "count");
}

TEST_CASE("FrameLoop::to_csv: wall and each event with unit, budget and exact statistics") {
  FrameLoop loop({kAwkwardName, "task-clock"}, {.over_budget_capacity = 8});
  loop.set_budget(kAwkwardName, 100);
  std::uint64_t a = 0, b = 0, t = 1000;
  loop.mark(reading({a, b}, t), t);
  const std::uint64_t a_deltas[] = {5, kHuge, 7, 200};
  for (std::uint64_t d : a_deltas) {
    a += d;
    b += 1000;
    t += 500;
    loop.mark(reading({a, b}, t), t);
  }
  const auto rows = parse_csv(loop.to_csv());
  REQUIRE(rows.size() == 4);
  const auto col = columns(rows[0]);
  for (const char* name : {"event", "unit", "budget", "not_counted", "count", "min", "max", "sum", "mean", "stddev",
                           "p50", "p90", "p99", "p99.9", "p99.99"})
    CHECK_MESSAGE(col.count(name) == 1, name);
  for (const auto& r : rows) CHECK(r.size() == rows[0].size());
  const auto& wall = rows[1];
  CHECK(wall[col.at("event")] == "wall");
  CHECK(wall[col.at("unit")] == "ns");
  CHECK(std::stoull(wall[col.at("count")]) == loop.frames());
  CHECK(std::stoull(wall[col.at("min")]) == 500);
  const auto& awkward = rows[2];
  CHECK(awkward[col.at("event")] == kAwkwardName);
  CHECK(awkward[col.at("unit")] == "count");
  CHECK(std::stoull(awkward[col.at("budget")]) == 100);
  CHECK(std::stoull(awkward[col.at("max")]) == kHuge);
  CHECK(std::stoull(awkward[col.at("max")]) == loop.histogram(0).max());
  CHECK(std::stoull(awkward[col.at("min")]) == 5);
  CHECK(awkward[col.at("sum")] == std::to_string(kHuge + 5 + 7 + 200));  // exact, as a uint64 here
  CHECK(std::stod(awkward[col.at("mean")]) == loop.histogram(0).mean());
  CHECK(std::stoull(awkward[col.at("p50")]) == loop.histogram(0).p50());
  CHECK(rows[3][col.at("event")] == "task-clock");
  CHECK(rows[3][col.at("unit")] == "ns");
}

TEST_CASE("FrameLoop::to_csv before any frame: counts 0, statistics empty rather than zero") {
  FrameLoop loop({"page-faults"});
  const auto rows = parse_csv(loop.to_csv());
  REQUIRE(rows.size() == 3);
  const auto col = columns(rows[0]);
  CHECK(rows[2][col.at("count")] == "0");
  CHECK(rows[2][col.at("min")].empty());
  CHECK(rows[2][col.at("mean")].empty());
  CHECK(rows[2][col.at("p99.99")].empty());
}

TEST_CASE("FrameLoop::over_budget_csv: a row per kept frame and member, deltas exact, not counted empty") {
  FrameLoop loop({kAwkwardName, "b"}, {.over_budget_capacity = 8});
  loop.set_budget(kAwkwardName, 100);
  std::uint64_t a = 0, t = 1000;
  loop.mark(reading({a, 0}, t), t);
  a += kHuge;
  t += 10;
  loop.mark(reading({a, 0}, t), t);  // over budget
  a += 1;
  t += 10;
  loop.mark(reading({a, 0}, t), t);  // within
  // Frame 2: event b not running at all (multiplexed out), a over budget.
  GroupReading r = reading({a + 500, 0}, t + 10);
  r[1].time_running = t;  // no running time in the frame
  loop.mark(r, t + 10);
  const auto frames = loop.over_budget_frames();
  REQUIRE(frames.size() == 2);
  const auto rows = parse_csv(loop.over_budget_csv());
  CHECK(rows[0] == std::vector<std::string>{"frame", "event", "unit", "value", "budget", "over_budget"});
  REQUIRE(rows.size() == 1 + frames.size() * 3);
  CHECK(rows[1] == std::vector<std::string>{"0", "wall", "ns", "10", "0", "0"});
  CHECK(rows[2] == std::vector<std::string>{"0", kAwkwardName, "count", std::to_string(kHuge), "100", "1"});
  CHECK(rows[3][0] == "0");
  CHECK(rows[3][1] == "b");
  CHECK(rows[5][0] == std::to_string(frames[1].index));
  CHECK(rows[5][3] == std::to_string(frames[1].deltas[0]));
  REQUIRE_FALSE(frames[1].counted[1]);
  CHECK(rows[6][1] == "b");
  CHECK(rows[6][3].empty());
}
