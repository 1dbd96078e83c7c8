// selfperf record's merge: PerfDataReader per process file → one PerfDataWriter (merge.hpp).
#include "merge.hpp"

#include <algorithm>
#include <fstream>
#include <set>

#include "selfperf/error.hpp"
#include "selfperf/flame_graph.hpp"
#include "selfperf/perf_data_reader.hpp"
#include "selfperf/perf_data_symbolizer.hpp"
#include "selfperf/perf_data_writer.hpp"

namespace selfperf::tool {
namespace {

bool same_event(const EventDescription& a, const EventDescription& b) {
  return a.attr.type == b.attr.type && a.attr.config == b.attr.config;
}

// What a first pass over a process file finds: its pid and the time of its first sample.
struct FileStart {
  std::uint32_t pid = 0;
  std::uint64_t first_time = 0;  // 0: no sample
};

FileStart scan(PerfDataReader& reader) {
  FileStart f;
  PerfRecord rec;
  bool any_sample = false;
  while (reader.next_record(rec)) {
    if (rec.type == PERF_RECORD_COMM && f.pid == 0) {
      const auto c = reader.decode_comm(rec);
      if (c.pid == c.tid) f.pid = c.pid;
    }
    if (rec.type != PERF_RECORD_SAMPLE) continue;
    const auto s = reader.decode_sample(rec);
    if (!any_sample || s.time < f.first_time) f.first_time = s.time;
    if (f.pid == 0) f.pid = s.pid;
    any_sample = true;
  }
  reader.rewind();
  return f;
}

// Copies one process file's records into `writer`; returns what it held. `exec`: an earlier file held another
// image of this pid, which this one's exec replaced.
ProcessSummary copy_process(PerfDataReader& reader, const FileStart& start, bool exec, PerfDataWriter& writer,
                            std::set<std::uint32_t>& tids) {
  ProcessSummary p;
  // Just before the first sample: after the samples of an image this pid ran before exec.
  const std::uint64_t records_time = start.first_time > 0 ? start.first_time - 1 : 0;
  std::set<std::uint32_t> own_tids;
  PerfRecord rec;
  while (reader.next_record(rec)) {
    switch (rec.type) {
      case PERF_RECORD_SAMPLE: {
        const auto d = reader.decode_sample(rec);
        const auto frames = d.frames();
        Sample s;
        s.pid = static_cast<pid_t>(d.pid);
        s.tid = static_cast<pid_t>(d.tid);
        s.time = d.time;
        s.period = d.period;
        s.cpu = d.cpu;
        s.frames = frames;
        writer.write_sample(s, 0);
        ++p.samples;
        own_tids.insert(d.tid);
        tids.insert(d.tid);
        if (p.pid == 0) p.pid = d.pid;
        break;
      }
      case PERF_RECORD_COMM: {
        const auto c = reader.decode_comm(rec);
        // The process's own name marks the exec, so that a reader drops the old image's mappings: without it
        // perf and our symbolizer kept them, and ours named the new image's libc by the old one's address
        // ([libc.so.6] in every stack of a program exec'd by a process that had taken samples).
        const bool process = c.pid == c.tid;
        writer.write_comm(static_cast<std::int32_t>(c.pid), static_cast<std::int32_t>(c.tid), c.comm, records_time,
                          exec && process);
        if (process && p.comm.empty()) p.comm = c.comm;
        break;
      }
      case PERF_RECORD_MMAP:
      case PERF_RECORD_MMAP2:
        writer.write_mmap2(reader.decode_mmap(rec), records_time);
        break;
      case PERF_RECORD_LOST: {
        const auto l = reader.decode_lost(rec);
        writer.write_lost(l.lost, 0);
        p.lost += l.lost;
        break;
      }
      default:  // FINISHED_ROUND: each file's rounds say nothing of the others'; perf sorts the whole file
        break;
    }
  }
  p.threads = own_tids.size();
  return p;
}

}  // namespace

MergeSummary merge_profiles(const std::vector<std::filesystem::path>& inputs, const std::filesystem::path& out,
                            const std::vector<std::string>& cmdline) {
  MergeSummary summary;
  if (inputs.empty()) return summary;
  std::vector<PerfDataReader> readers;
  readers.reserve(inputs.size());
  for (const auto& in : inputs) readers.emplace_back(in);
  // The event's name is in HEADER_EVENT_DESC, which a process that ended in _exit or a signal never wrote
  // (sh, dash among them, leaves by _exit): take it from a file that has it.
  EventDescription event = readers.front().events().at(0);
  for (const auto& r : readers)
    if (r.has_feature(PerfFeature::event_desc) && !r.events().empty() && same_event(r.events()[0], event)) {
      event = r.events()[0];
      break;
    }
  PerfDataWriterOptions options;
  options.synthesize_process = false;
  options.cmdline = cmdline;
  PerfDataWriter writer(out, {event}, options);
  // The images of one pid in the order they ran (their files' names do not say it: OUT.<pid>.10 sorts before
  // OUT.<pid>.2), so that each later one is an exec of the one before.
  std::vector<FileStart> starts;
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < readers.size(); ++i) {
    starts.push_back(scan(readers[i]));
    order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return starts[a].first_time < starts[b].first_time; });
  std::set<std::uint32_t> tids;
  std::set<std::uint32_t> pids;
  for (const std::size_t i : order) {
    if (readers[i].events().empty() || !same_event(readers[i].events()[0], event))
      throw Error("selfperf record: " + inputs[i].string() + " sampled another event than " + inputs[0].string() +
                  "; profile the tree with one SELFPERF_EVENT");
    const bool exec = starts[i].pid != 0 && !pids.insert(starts[i].pid).second;
    auto p = copy_process(readers[i], starts[i], exec, writer, tids);
    p.file = inputs[i];
    summary.samples += p.samples;
    summary.lost += p.lost;
    summary.processes.push_back(std::move(p));
  }
  summary.threads = tids.size();
  writer.close();
  return summary;
}

std::uint64_t render_merged(const std::filesystem::path& merged, const std::filesystem::path& folded,
                            const std::filesystem::path& svg, const std::string& title) {
  PerfDataReader reader{merged};
  const StackCounts stacks = perf_data_stacks(reader, {.comm_root = true});
  std::ofstream f(folded);
  stacks.write_folded(f);
  std::ofstream s(svg);
  FlameGraphOptions options;
  options.title = title;
  write_flame_graph_svg(stacks, s, options);
  if (!f || !s) throw Error("selfperf record: cannot write " + folded.string() + " or " + svg.string());
  return stacks.total();
}

}  // namespace selfperf::tool
