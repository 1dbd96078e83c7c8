// selfperf record's JSON summary: the merged totals, plus what only the processes knew (losses by cause, rate
// lowered, threads the signal never reached), summed, and each process's own summary.
#include "record_summary.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "selfperf/error.hpp"

namespace fs = std::filesystem;

namespace selfperf::tool {
namespace {

using json = nlohmann::ordered_json;

// The profiler's JSON with every key the sums below read: nothing here throws for a file cut short.
bool is_summary(const json& j) {
  if (j.is_discarded() || !j.is_object() || j.value("format", "") != "selfperf-profile-summary") return false;
  auto count = [](const json& v) { return v.is_number_unsigned(); };
  const json* lost = j.contains("lost") ? &j["lost"] : nullptr;
  if (!lost || !lost->is_object()) return false;
  for (const char* key : {"total", "buffer_full", "kernel", "coalesced"})
    if (!lost->contains(key) || !count((*lost)[key])) return false;
  for (const char* key : {"pid", "threads", "samples", "samples_dropped", "throttled", "rate_lowered",
                          "threads_not_signalled", "attach_failed"})
    if (!j.contains(key) || !count(j[key])) return false;
  return j.contains("files") && j["files"].is_object() && j["files"].contains("perf_data");
}

std::vector<json> process_summaries(const fs::path& dir) {
  std::vector<json> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    json j = json::parse(text, nullptr, false);
    // A process killed while writing it: said, and counted in processes_without_summary, not fatal.
    if (!is_summary(j)) {
      std::fprintf(stderr, "selfperf record: %s is no profiler summary (its process cut off?); left out\n",
                   e.path().filename().c_str());
      continue;
    }
    out.push_back(std::move(j));
  }
  std::sort(out.begin(), out.end(),
            [](const json& a, const json& b) { return a.value("pid", 0) < b.value("pid", 0); });
  return out;
}

std::uint64_t sum(const std::vector<json>& processes, const char* key, const char* inner = nullptr) {
  std::uint64_t total = 0;
  for (const auto& p : processes) {
    const json& value = inner ? p.at(key).at(inner) : p.at(key);
    total += value.get<std::uint64_t>();
  }
  return total;
}

}  // namespace

std::string record_summary_json(const RecordOutcome& o, const fs::path& dir) {
  std::vector<json> processes = process_summaries(dir);
  json out;
  out["format"] = "selfperf-record-summary";
  out["version"] = 1;
  out["units"] = {{"default", "count"}, {"per_process.frequency_hz", "Hz"}, {"per_process.per_thread.rate_hz", "Hz"}};
  out["command"] = o.command;
  out["exit_status"] = o.exit_status;
  // Totals of what the merged perf.data holds: processes killed before their summary count here too.
  out["processes"] = o.merged ? o.merged->processes.size() : 0;
  out["threads"] = o.merged ? o.merged->threads : sum(processes, "threads");
  out["samples"] = o.merged ? o.merged->samples : 0;
  out["folded_samples"] = o.folded_samples;
  // Per cause, from the summaries (a perf.data holds only the total): they may fall short of the total by
  // the losses of a process that died before writing its summary, which processes_without_summary counts.
  out["lost"] = {{"total", o.merged ? o.merged->lost : sum(processes, "lost", "total")},
                 {"buffer_full", sum(processes, "lost", "buffer_full")},
                 {"kernel", sum(processes, "lost", "kernel")},
                 {"coalesced", sum(processes, "lost", "coalesced")}};
  out["samples_dropped"] = sum(processes, "samples_dropped");
  out["throttled"] = sum(processes, "throttled");
  out["rate_lowered"] = sum(processes, "rate_lowered");
  out["threads_not_signalled"] = sum(processes, "threads_not_signalled");
  out["attach_failed"] = sum(processes, "attach_failed");
  std::size_t without = 0;
  if (o.merged) {
    for (const auto& merged : o.merged->processes) {
      const bool found = std::any_of(processes.begin(), processes.end(), [&](const json& p) {
        const json& file = p.at("files").at("perf_data");
        return file.is_string() && file.get<std::string>() == merged.file.string();
      });
      without += found ? 0 : 1;
    }
  }
  out["processes_without_summary"] = without;
  const bool written = o.merged != nullptr;
  auto file = [&](const std::filesystem::path& path) {  // empty: not written (-o - writes no side files)
    return written && !path.empty() ? json(path.string()) : json();
  };
  out["files"] = {{"perf_data", file(o.perf_data)}, {"folded", file(o.folded)}, {"svg", file(o.svg)}};
  auto& per_process = out["per_process"] = json::array();
  for (auto& p : processes) {
    // Their files were temporary, merged into the files above, and are gone.
    for (const char* key : {"format", "version", "units", "files"}) p.erase(key);
    per_process.push_back(std::move(p));
  }
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

void write_text_file(const fs::path& path, const std::string& json) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << json << '\n';
  out.close();
  if (!out) {
    const int err = errno;
    throw selfperf::Error("selfperf record: cannot write " + path.string() + " (" + std::strerror(err) +
                              "); give --summary-json a path in a writable directory",
                          err);
  }
}

}  // namespace selfperf::tool
