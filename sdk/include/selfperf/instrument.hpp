#pragma once
// Drop-in instrumentation: SELFPERF_SCOPE("name") measures the enclosing block on the calling thread with a
// process-wide event set, and selfperf::report() prints every region, merged over threads.
//
// Event set: set_default_events() before the first scope, else SELFPERF_EVENTS=cycles,instructions,…, else
// cycles,instructions,branch-misses where a hardware PMU exists (those of them it counts: QEMU's has no
// branch-misses), else task-clock,page-faults,context-switches (and the report says which and why). Each thread opens its own group lazily at its first scope; the
// first entry of each site on a thread allocates its region, every later start/stop pair allocates nothing.
// report() merges the regions of finished threads and of the calling thread; call it when other threads
// that use scopes are quiescent or joined (their live regions are read without synchronisation).
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "selfperf/region.hpp"

namespace selfperf {

// One SELFPERF_SCOPE call site (or one name given to scope()): a stable id shared by all threads.
class RegionSite {
 public:
  explicit RegionSite(std::string_view name);
  std::uint32_t id() const noexcept { return id_; }
  const std::string& name() const noexcept;

 private:
  std::uint32_t id_;
  const std::string* name_;
};

// Measures from construction to destruction into this thread's region for `site`.
class ScopedRegion {
 public:
  explicit ScopedRegion(const RegionSite& site);
  ~ScopedRegion();
  ScopedRegion(const ScopedRegion&) = delete;
  ScopedRegion& operator=(const ScopedRegion&) = delete;

 private:
  std::optional<Scope> scope_;  // empty when this thread's group could not be opened (see report())
};

// Function-style equivalent of SELFPERF_SCOPE for names known only at run time (a name lookup per call).
ScopedRegion scope(std::string_view name);

// Must be called before the first scope on any thread; throws Error for an unknown event.
void set_default_events(std::vector<std::string> events);
// The event set in use and, in words, where it came from.
std::vector<std::string> default_events();
std::string default_events_reason();

// Region table over all threads (sites in first-use order, nested ones indented).
void report(std::ostream& out);
void report();  // to stdout
// The same as JSON: {"events":[…],"source":"…","error":"…","notes":[…],"regions":[…]} with the regions as
// regions_json() (region.hpp) writes them; and as RFC 4180 CSV, as regions_csv() writes it.
std::string report_json();
std::string report_csv();
// Forgets all recorded calls (sites and event set stay).
void reset_regions();

}  // namespace selfperf

#define SELFPERF_DETAIL_CONCAT2(a, b) a##b
#define SELFPERF_DETAIL_CONCAT(a, b) SELFPERF_DETAIL_CONCAT2(a, b)
// Measures the enclosing block. The site is created once (a function-local static), so the per-call cost is
// a thread-local lookup plus two group reads.
#define SELFPERF_SCOPE(name)                                                                  \
  static const ::selfperf::RegionSite SELFPERF_DETAIL_CONCAT(selfperf_site_, __LINE__){name}; \
  const ::selfperf::ScopedRegion SELFPERF_DETAIL_CONCAT(selfperf_scope_, __LINE__) {          \
    SELFPERF_DETAIL_CONCAT(selfperf_site_, __LINE__)                                          \
  }
