#include "events/tracepoint_lookup.hpp"

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "events/event_files.hpp"
#include "events/event_suggest.hpp"
#include "events/event_text.hpp"
#include "selfperf/error.hpp"

namespace selfperf::detail {
namespace {

constexpr const char* kMountAdvice = "as root, mount it with: mount -t tracefs nodev /sys/kernel/tracing";
constexpr const char* kPermissionAdvice =
    "tracepoints need root (or CAP_PERFMON with read access to tracefs; root can grant that with "
    "mount -o remount,mode=755 /sys/kernel/tracing)";

// The events/ directory of the first mounted tracefs root this process can read.
std::filesystem::path find_events_dir(std::string_view text, const EventRoots& roots) {
  std::vector<std::string> missing, denied;
  for (const auto& root : roots.tracefs) {
    auto events = root / "events";
    int err = directory_access(events);
    if (err == 0) return events;
    if (err == EACCES || err == EPERM)
      denied.push_back(root.string());
    else
      missing.push_back(root.string());
  }
  std::string head = "tracepoint " + quote_text(text) + ": ";
  if (!denied.empty()) {
    std::string msg = head + "tracefs at " + join_names(denied) +
                      " is not readable by this user (permission denied); " + kPermissionAdvice;
    if (!missing.empty()) msg += "; tracefs is not mounted at " + join_names(missing);
    throw Error(msg, EACCES);
  }
  if (roots.tracefs.empty()) throw Error(head + "no tracefs root to look in; " + kMountAdvice, ENOENT);
  throw Error(head + "tracefs is not mounted (no events/ directory under " + join_names(missing) + "); " +
                  kMountAdvice,
              ENOENT);
}

[[noreturn]] void not_found(std::string_view what, std::string_view name, const std::filesystem::path& dir,
                            std::string_view text) {
  std::string msg = "tracepoint " + quote_text(text) + ": unknown " + std::string(what) + " " +
                    quote_text(name) + " (no " + (dir / std::string(name)).string() + ")";
  auto near = nearest_names(name, list_directory(dir));
  if (!near.empty()) msg += "; nearest: " + join_names(near);
  msg += "; `perf list tracepoint` lists them";
  throw Error(msg, ENOENT);
}

void check_directory(const std::filesystem::path& dir, std::string_view what, std::string_view name,
                     std::string_view text) {
  int err = directory_access(dir / std::string(name));
  if (err == 0) return;
  if (err == ENOENT || err == ENOTDIR) not_found(what, name, dir, text);
  throw Error("tracepoint " + quote_text(text) + ": cannot read " + (dir / std::string(name)).string() +
                  " (" + std::strerror(err) + "); " + kPermissionAdvice,
              err);
}

}  // namespace

EventSpec tracepoint_event(std::string_view subsys, std::string_view name, const Modifiers& mods,
                           std::string_view text, const EventRoots& roots) {
  if (!is_plain_name(subsys) || !is_plain_name(name))
    throw Error("malformed tracepoint " + quote_text(text) +
                ": write subsys:name (letters, digits, '_', '-', '.'), e.g. sched:sched_switch");
  // A tracepoint fires in kernel context; with the kernel excluded it would always read 0.
  if (mods.excludes_kernel())
    throw Error("tracepoint " + quote_text(text) +
                " would never count: tracepoints fire in the kernel, and ':" + modifier_letters(mods) +
                "' excludes it; drop the privilege modifier or use ':k'");
  auto events = find_events_dir(text, roots);
  check_directory(events, "tracepoint subsystem", subsys, text);
  auto subsys_dir = events / std::string(subsys);
  check_directory(subsys_dir, "tracepoint", name, text);
  auto id_path = subsys_dir / std::string(name) / "id";
  FileText id = read_small_file(id_path);
  if (id.error)
    throw Error("tracepoint " + quote_text(text) + ": cannot read " + id_path.string() + " (" +
                    (id.error == EFBIG ? "too large" : std::strerror(id.error)) + ")" +
                    (id.error == EACCES ? std::string("; ") + kPermissionAdvice : std::string()),
                id.error);
  auto value = parse_number(id.text);
  if (!value)
    throw Error("tracepoint " + quote_text(text) + ": " + id_path.string() + " holds " + quote_text(id.text) +
                ", not a tracepoint id");
  EventSpec spec;
  spec.type = PERF_TYPE_TRACEPOINT;
  spec.config = *value;
  spec.pmu = "tracepoint";
  apply_modifiers(mods, spec);
  std::string letters = modifier_letters(mods);
  spec.name = std::string(subsys) + ":" + std::string(name) + (letters.empty() ? "" : ":" + letters);
  return spec;
}

bool tracepoint_subsystem_exists(std::string_view subsys, const EventRoots& roots) {
  if (!is_plain_name(subsys)) return false;
  // The same root find_events_dir would pick: the first whose events/ is readable.
  for (const auto& root : roots.tracefs) {
    if (directory_access(root / "events") == 0)
      return directory_access(root / "events" / std::string(subsys)) == 0;
  }
  return false;
}

}  // namespace selfperf::detail
