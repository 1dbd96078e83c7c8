// selfperf list: the events that open here, found by opening each one user-only on this thread (as simpleperf
// does), grouped as perf list groups them; a group that is empty says why.
#include <linux/perf_event.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "commands.hpp"
#include "events/perf_syscall.hpp"
#include "selfperf/error.hpp"
#include "selfperf/event.hpp"

namespace fs = std::filesystem;

namespace selfperf::tool {
namespace {

constexpr const char* kUsage =
    "usage: selfperf list [hw|sw|cache|pmu|tracepoint]...\n"
    "  Lists the events that open on this machine for this user (each is opened once, user-only, to find\n"
    "  out), grouped; an empty group says why. Without arguments: every group.\n";

// Opens `spec` user-only on this thread; empty when it opens, else why not (perf_event_open's advice).
std::string try_open(const EventSpec& spec) {
  perf_event_attr attr = to_attr(spec);
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  int fd = detail::perf_event_open(attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd >= 0) {
    ::close(fd);
    return {};
  }
  return detail::open_error_message(errno, attr, spec.name);
}

struct Group {
  Group(const char* k, const char* t) : key(k), title(t) {}
  const char* key;
  const char* title;
  std::vector<std::string> opened;
  std::string first_refusal;
  std::size_t tried = 0;
};

void probe(Group& g, const std::string& name) {
  ++g.tried;
  try {
    EventSpec spec = parse_event(name);
    std::string why = try_open(spec);
    if (why.empty())
      g.opened.push_back(name);
    else if (g.first_refusal.empty())
      g.first_refusal = why;
  } catch (const Error& e) {
    if (g.first_refusal.empty()) g.first_refusal = e.what();
  }
}

void print(const Group& g) {
  std::printf("\n%s:\n", g.title);
  for (const auto& n : g.opened) std::printf("  %s\n", n.c_str());
  if (g.opened.empty())
    std::printf("  (none of %zu opens here: %s)\n", g.tried,
                g.first_refusal.empty() ? "none known" : g.first_refusal.c_str());
  else if (g.opened.size() < g.tried)
    std::printf("  (%zu more known that do not open here)\n", g.tried - g.opened.size());
}

void list_tracepoints(Group& g) {
  const fs::path roots[] = {"/sys/kernel/tracing/events", "/sys/kernel/debug/tracing/events"};
  std::error_code ec;
  for (const auto& root : roots) {
    if (!fs::is_directory(root, ec)) continue;
    for (const auto& subsys : fs::directory_iterator(root, ec)) {
      if (!subsys.is_directory(ec)) continue;
      for (const auto& ev : fs::directory_iterator(subsys.path(), ec))
        if (fs::exists(ev.path() / "id", ec))
          g.opened.push_back(subsys.path().filename().string() + ":" + ev.path().filename().string());
    }
    if (!g.opened.empty()) break;
  }
  std::sort(g.opened.begin(), g.opened.end());
  g.tried = g.opened.size();
  if (g.opened.empty())
    g.first_refusal = ::access("/sys/kernel/tracing/events", R_OK) == 0 || ::geteuid() == 0
                          ? "tracefs is not mounted: mount -t tracefs nodev /sys/kernel/tracing"
                          : "tracefs is not readable by this user (it is root's by default); run as root or "
                            "mount tracefs with mode=755";
}

}  // namespace

int list_main(int argc, char** argv) {
  std::vector<std::string> wanted;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a != "hw" && a != "sw" && a != "cache" && a != "pmu" && a != "tracepoint") {
      std::fprintf(stderr, "selfperf list: unknown group '%s'\n%s", a.c_str(), kUsage);
      return 2;
    }
    wanted.push_back(a);
  }
  auto want = [&](const char* key) {
    return wanted.empty() || std::find(wanted.begin(), wanted.end(), key) != wanted.end();
  };
  Group hw{"hw", "Hardware events"}, sw{"sw", "Software events"}, cache{"cache", "Hardware cache events"},
      pmu{"pmu", "PMU events (pmu/alias/)"}, tp{"tracepoint", "Tracepoints (subsystem:name)"};
  for (const auto& name : known_event_names()) {
    EventSpec spec;
    try {
      spec = parse_event(name);
    } catch (const Error&) {
      continue;
    }
    Group* g = spec.type == PERF_TYPE_HARDWARE   ? &hw
               : spec.type == PERF_TYPE_SOFTWARE ? &sw
               : spec.type == PERF_TYPE_HW_CACHE ? &cache
                                                 : nullptr;
    if (g && want(g->key)) probe(*g, name);
  }
  if (want("pmu")) {
    std::error_code ec;
    const fs::path pmus = "/sys/bus/event_source/devices";
    for (const auto& dir : fs::directory_iterator(pmus, ec)) {
      const std::string name = dir.path().filename().string();
      if (name == "software" || name == "tracepoint" || !fs::is_directory(dir.path() / "events", ec)) continue;
      for (const auto& alias : fs::directory_iterator(dir.path() / "events", ec)) {
        const std::string a = alias.path().filename().string();
        if (a.find('.') == std::string::npos) probe(pmu, name + "/" + a + "/");
      }
    }
    std::sort(pmu.opened.begin(), pmu.opened.end());
  }
  if (want("tracepoint")) list_tracepoints(tp);
  for (Group* g : {&hw, &sw, &cache, &pmu, &tp})
    if (want(g->key)) print(*g);
  return 0;
}

}  // namespace selfperf::tool
