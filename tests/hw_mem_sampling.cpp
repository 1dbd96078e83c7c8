// Memory-access sampling on real hardware: precise load samples (Intel PEBS mem-loads, AMD IBS op) carry a
// data address inside the buffer the test reads and a data source that decodes to a load.
#include <doctest.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "selfperf/error.hpp"
#include "selfperf/mem_data_src.hpp"
#include "selfperf/sampling_event.hpp"

using namespace selfperf;

namespace {

const std::filesystem::path kPmus = "/sys/bus/event_source/devices";

std::string read_line(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  return s;
}

[[noreturn]] void skip(const std::string& why) {
  std::printf("skipped: %s\n", why.c_str());
  std::fflush(stdout);
  std::_Exit(77);
}

// Puts `value` into the bits a sysfs format file names ("config1:0-15", "config:0-7,21").
void place(perf_event_attr& attr, const std::string& format, std::uint64_t value) {
  const auto colon = format.find(':');
  const std::string field = format.substr(0, colon);
  __u64* target = field == "config" ? &attr.config : field == "config1" ? &attr.config1 : &attr.config2;
  std::stringstream ranges(format.substr(colon + 1));
  std::string range;
  unsigned consumed = 0;
  while (std::getline(ranges, range, ',')) {
    const auto dash = range.find('-');
    const unsigned lo = static_cast<unsigned>(std::stoul(range.substr(0, dash)));
    const unsigned hi = dash == std::string::npos ? lo : static_cast<unsigned>(std::stoul(range.substr(dash + 1)));
    for (unsigned bit = lo; bit <= hi; ++bit, ++consumed)
      if ((value >> consumed) & 1u) *target |= std::uint64_t{1} << bit;
  }
}

// The attr of a sysfs event alias such as cpu/events/mem-loads ("event=0xcd,umask=0x1,ldlat=3"), with
// `overrides` (ldlat=30) applied, resolved through the PMU's format files.
bool alias_attr(const std::string& pmu, const std::string& alias, const std::map<std::string, std::uint64_t>& overrides,
                perf_event_attr& attr) {
  const std::string terms = read_line(kPmus / pmu / "events" / alias);
  if (terms.empty()) return false;
  attr = perf_event_attr{};
  attr.size = sizeof attr;
  attr.type = static_cast<std::uint32_t>(std::stoul(read_line(kPmus / pmu / "type")));
  std::map<std::string, std::uint64_t> values;
  std::stringstream ss(terms);
  std::string term;
  while (std::getline(ss, term, ',')) {
    const auto eq = term.find('=');
    values[term.substr(0, eq)] = eq == std::string::npos ? 1 : std::stoull(term.substr(eq + 1), nullptr, 0);
  }
  for (const auto& [k, v] : overrides) values[k] = v;
  for (const auto& [k, v] : values) {
    const std::string format = read_line(kPmus / pmu / "format" / k);
    if (format.empty()) return false;
    place(attr, format, v);
  }
  return true;
}

volatile std::uint64_t g_sink;

}  // namespace

TEST_CASE("precise load sampling: addresses in our buffer, data sources that decode") {
  if (!has_precise_memory_pmu()) skip("no hardware PMU");

  // The library's own path first (needs the full event parser for PMU aliases).
  std::string library_note;
  try {
    SamplingEvent probe = open_memory_sampling();
  } catch (const Error& e) {
    library_note = e.what();
  }

  perf_event_attr base{};
  std::string name;
  for (const char* pmu : {"cpu", "cpu_core"}) {
    if (alias_attr(pmu, "mem-loads", {{"ldlat", 30}}, base)) {
      name = std::string(pmu) + "/mem-loads,ldlat=30/P";
      break;
    }
  }
  bool ibs = false;
  if (name.empty() && std::filesystem::exists(kPmus / "ibs_op")) {
    base = perf_event_attr{};
    base.size = sizeof base;
    base.type = static_cast<std::uint32_t>(std::stoul(read_line(kPmus / "ibs_op" / "type")));
    name = "ibs_op//";
    ibs = true;
  }
  if (name.empty()) skip("no hardware PMU with a mem-loads event or IBS");

  EventSpec spec;
  spec.type = base.type;
  spec.config = base.config;
  spec.config1 = base.config1;
  spec.config2 = base.config2;
  spec.name = name;
  spec.pmu = ibs ? "ibs_op" : "cpu";
  MemorySamplingOptions options;
  options.period = ibs ? 10000 : 2000;
  perf_event_attr attr = memory_sampling_attr(spec, options);
  if (ibs) attr.precise_ip = 0;  // IBS is precise by construction and takes no precise_ip
  std::vector<std::uint64_t> buffer(8u << 20);  // 64 MiB, far beyond the caches
  std::optional<SamplingEvent> event;
  try {
    event.emplace(attr, name, 0, 64);
  } catch (const Error& e) {
    if (e.errno_value() == ENOENT || e.errno_value() == EOPNOTSUPP || e.errno_value() == EINVAL)
      skip(std::string("precise memory sampling unavailable: ") + e.what());
    throw;
  }
  event->enable();
  std::uint64_t x = 88172645463325252ull, sum = 0;
  for (int pass = 0; pass < 8; ++pass) {
    for (std::size_t i = 0; i < buffer.size(); ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      sum += buffer[x % buffer.size()];
    }
  }
  g_sink = sum;
  event->disable();

  const auto lo = reinterpret_cast<std::uint64_t>(buffer.data());
  const auto hi = lo + buffer.size() * sizeof buffer[0];
  std::size_t samples = 0, in_buffer = 0, loads = 0, with_level = 0;
  std::map<std::string, std::size_t> kinds;
  event->read_samples([&](const SampleRecord& s) {
    ++samples;
    if (s.addr >= lo && s.addr < hi) ++in_buffer;
    const MemDataSrc src = decode_mem_data_src(s.data_src);
    if (src.access() == MemOp::load) ++loads;
    if (src.level() != MemLevel::not_available) ++with_level;
    ++kinds[to_string(src)];
  });
  MESSAGE(name << ": " << samples << " samples, " << in_buffer << " in the buffer, " << loads << " loads; lost "
               << event->ring().stats().total_lost() << (library_note.empty() ? "" : "; library path: ")
               << library_note);
  for (const auto& [kind, n] : kinds) MESSAGE("  " << n << "  " << kind);
  REQUIRE(samples > 0);
  CHECK(event->undecodable() == 0);
  CHECK(in_buffer * 2 > samples);
  CHECK(loads * 2 > samples);
  CHECK(with_level > 0);
}
