// The arm64 PMUs' `rdpmc`/`long` format terms, found in a fake sysfs (runs on every architecture: only
// perf_event_open on aarch64 applies them).
#include <doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <linux/perf_event.h>

#include "events/arm64_user_access.hpp"

namespace fs = std::filesystem;
using namespace selfperf::detail;

namespace {

struct FakeSysfs {
  fs::path root;
  FakeSysfs() {
    std::string tmpl = (fs::temp_directory_path() / "selfperf-arm64-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    root = tmpl;
  }
  ~FakeSysfs() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  void write(const fs::path& rel, const std::string& content) const {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << content << "\n";
  }
};

}  // namespace

TEST_CASE("big.LITTLE: every PMU with an rdpmc term is found, with its type and long term") {
  FakeSysfs sys;
  sys.write("armv8_cortex_a53/type", "8");
  sys.write("armv8_cortex_a53/format/event", "config:0-15");
  sys.write("armv8_cortex_a53/format/rdpmc", "config1:1");
  sys.write("armv8_cortex_a53/format/long", "config1:0");
  sys.write("armv8_cortex_a72/type", "9");
  sys.write("armv8_cortex_a72/format/rdpmc", "config1:1");
  sys.write("software/type", "1");
  sys.write("cpu/type", "4");  // an x86 core PMU: no rdpmc term, rdpmc is a file beside format/
  sys.write("cpu/rdpmc", "1");
  const auto pmus = user_access_pmus(sys.root);
  REQUIRE(pmus.size() == 2);
  CHECK(pmus[0].name == "armv8_cortex_a53");
  CHECK(pmus[0].type == 8);
  CHECK(pmus[0].word == 1);
  CHECK(pmus[0].rdpmc_bits == 2);
  CHECK(pmus[0].long_bits == 1);
  CHECK(pmus[1].name == "armv8_cortex_a72");
  CHECK(pmus[1].long_bits == 0);

  perf_event_attr attr{};
  attr.type = 9;  // armv8_cortex_a72/event/
  REQUIRE(user_access_pmu_for(attr, pmus) == &pmus[1]);
  attr.type = PERF_TYPE_HARDWARE;  // generic cycles: the first CPU PMU's terms
  REQUIRE(user_access_pmu_for(attr, pmus) == &pmus[0]);
  attr.type = PERF_TYPE_SOFTWARE;
  CHECK(user_access_pmu_for(attr, pmus) == nullptr);

  attr.type = PERF_TYPE_HARDWARE;
  attr.config1 = 0x100;  // the caller's own config1 bits stay
  request_user_access(attr, pmus[0], true);
  CHECK(attr.config1 == 0x103);
  perf_event_attr narrow{};
  request_user_access(narrow, pmus[0], false);
  CHECK(narrow.config1 == 2);
  CHECK(narrow.config == 0);
}

TEST_CASE("no PMU with an rdpmc term (x86-64, a VM without PMU): nothing to request") {
  FakeSysfs sys;
  sys.write("cpu/type", "4");
  sys.write("cpu/format/event", "config:0-7");
  sys.write("broken/format/rdpmc", "config1:1");  // no type file: skipped, not fatal
  CHECK(user_access_pmus(sys.root).empty());
  CHECK(user_access_pmus(sys.root / "missing").empty());
  perf_event_attr attr{};
  attr.type = PERF_TYPE_HARDWARE;
  CHECK(user_access_pmu_for(attr, {}) == nullptr);
}
