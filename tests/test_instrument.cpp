#include <doctest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <sstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "selfperf/selfperf.hpp"
#include "test_support.hpp"

// This file replaces the global operator new/delete with malloc/free. GCC 12 cannot see that the pair is
// matched once inlined into std::string and warns; the replacement is the standard-sanctioned one.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

// Counts this thread's allocations, to show that a warm SELFPERF_SCOPE allocates nothing.
namespace {
thread_local std::size_t allocations = 0;
}
void* operator new(std::size_t size) {
  ++allocations;
  if (void* p = std::malloc(size ? size : 1)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  ++allocations;
  return std::malloc(size ? size : 1);
}
void* operator new[](std::size_t size) { return operator new(size); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return operator new(size, std::nothrow); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

using selfperf::test::touch_fresh_pages;

void faulting_leaf() {
  SELFPERF_SCOPE("leaf");
  touch_fresh_pages(8);
}

void parent_work() {
  SELFPERF_SCOPE("parent");
  faulting_leaf();
  faulting_leaf();
}

void empty_scope() { SELFPERF_SCOPE("empty"); }


bool contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// The report's region of that name, parsed back.
nlohmann::json region_named(const std::string& name) {
  const auto report = nlohmann::json::parse(selfperf::report_json());
  for (const auto& r : report["regions"])
    if (r["name"] == name) return r;
  FAIL("no region " << name << " in " << report.dump());
  return {};
}

// The test binary decides the event set once, before any scope: deterministic across machines.
struct UseUserEvents {
  UseUserEvents() { selfperf::set_default_events({"task-clock:u", "page-faults:u"}); }
} use_user_events;

}  // namespace

TEST_CASE("an unknown event in the default set is refused with the event named") {
  CHECK_THROWS_WITH_AS(selfperf::set_default_events({"task-clock", "cylces"}), doctest::Contains("cylces"),
                       selfperf::Error);
  CHECK(selfperf::default_events() == std::vector<std::string>{"task-clock:u", "page-faults:u"});
  CHECK(contains(selfperf::default_events_reason(), "set_default_events"));
}

TEST_CASE("SELFPERF_SCOPE counts calls and nests, and the report shows both") {
  selfperf::reset_regions();
  for (int i = 0; i < 5; ++i) parent_work();
  const auto parent = region_named("parent");
  CHECK(parent["depth"] == 0);
  CHECK(parent["parent"].is_null());
  CHECK(parent["calls"] == 5);
  const auto leaf = region_named("leaf");
  CHECK(leaf["depth"] == 1);
  CHECK(leaf["parent"] == "parent");
  CHECK(leaf["calls"] == 10);
  const auto report = nlohmann::json::parse(selfperf::report_json());
  CHECK(report["events"] == nlohmann::json{"task-clock:u", "page-faults:u"});
  CHECK(contains(report["source"].get<std::string>(), "set_default_events"));
  std::ostringstream table;
  selfperf::report(table);
  CHECK(contains(table.str(), "task-clock:u page-faults:u (set by set_default_events())"));
  CHECK(contains(table.str(), "\n  leaf"));
  const std::string csv = selfperf::report_csv();
  CHECK(contains(csv, "region,depth,parent,calls,not_counted,event,unit,total,mean,min,max\r\n"));
  CHECK(contains(csv, "\r\nleaf,1,parent,10,0,page-faults:u,count,"));
}

TEST_CASE("regions count what their block did") {
  selfperf::reset_regions();
  parent_work();
  // 2 leaves x 8 fresh pages each: at least 16 faults in leaf, and the parent includes them.
  auto total_of = [&](const std::string& region) {
    return region_named(region)["events"]["page-faults:u"]["total"].get<double>();
  };
  CHECK(total_of("leaf") >= 16);
  CHECK(total_of("parent") >= total_of("leaf"));
}

TEST_CASE("threads get their own groups and are merged at report time") {
  selfperf::reset_regions();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([] {
      for (int i = 0; i < 3; ++i) parent_work();
    });
  for (auto& t : threads) t.join();
  CHECK(region_named("parent")["calls"] == 12);
  CHECK(region_named("leaf")["calls"] == 24);
}

TEST_CASE("a warm scope allocates nothing") {
  empty_scope();  // first entry on this thread: the region is created
  const std::size_t before = allocations;
  for (int i = 0; i < 1000; ++i) empty_scope();
  CHECK(allocations == before);
}

TEST_CASE("scope() by name is the same region as SELFPERF_SCOPE with that name") {
  selfperf::reset_regions();
  { auto s = selfperf::scope("leaf"); }
  faulting_leaf();
  CHECK(region_named("leaf")["calls"] == 2);
}
