// selfperf dump: a perf.data file the way `perf report -D` shows it: header, attrs, feature sections, then
// every record (pipe-mode streams too).
//
//   selfperf dump [-i] FILE [--header-only]
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>

#include "commands.hpp"
#include "selfperf/error.hpp"
#include "selfperf/perf_data_reader.hpp"

namespace selfperf::tool {
namespace {

void dump_header(const selfperf::PerfDataReader& r) {
  std::printf("# file size   : %" PRIu64 "\n# attr size   : %" PRIu64 "\n# data offset : %" PRIu64
              "\n# data size   : %" PRIu64 "\n",
              r.file_size(), r.attr_size(), r.data_offset(), r.data_size());
  for (std::size_t i = 0; i < r.events().size(); ++i) {
    const auto& ev = r.events()[i];
    std::printf("# event %zu   : name = %s, type = %u, config = %#" PRIx64 ", size = %u, sample_type = %#" PRIx64
                ", sample_id_all = %u, ids =",
                i, ev.name.c_str(), ev.attr.type, static_cast<std::uint64_t>(ev.attr.config), r.attr_sizes()[i],
                static_cast<std::uint64_t>(ev.attr.sample_type), static_cast<unsigned>(ev.attr.sample_id_all));
    for (auto id : ev.ids) std::printf(" %" PRIu64, id);
    std::printf("\n");
  }
  for (const auto& f : r.features())
    std::printf("# feature %-15s offset %" PRIu64 " size %" PRIu64 "\n", selfperf::perf_feature_name(f.bit).c_str(),
                f.offset, f.size);
  using F = selfperf::PerfFeature;
  for (F f : {F::hostname, F::osrelease, F::version, F::arch, F::cpudesc, F::cpuid})
    if (r.has_feature(f))
      std::printf("# %-11s : %s\n", selfperf::perf_feature_name(static_cast<unsigned>(f)).c_str(),
                  r.feature_string(f).c_str());
  if (auto n = r.nrcpus()) std::printf("# nrcpus      : online %u, available %u\n", n->online, n->available);
  if (auto m = r.total_mem_kb()) std::printf("# total mem   : %" PRIu64 " kB\n", *m);
  if (r.has_feature(F::cmdline)) {
    std::printf("# cmdline     :");
    for (const auto& arg : r.cmdline()) std::printf(" %s", arg.c_str());
    std::printf("\n");
  }
  if (auto t = r.sample_time()) std::printf("# sample time : %" PRIu64 " .. %" PRIu64 "\n", t->first, t->second);
  if (auto c = r.clock_data())
    std::printf("# clock data  : clockid %u, wall %" PRIu64 " ns = clock %" PRIu64 " ns\n", c->clockid,
                c->wall_clock_ns, c->clockid_time_ns);
  for (const auto& b : r.build_ids())
    std::printf("# build id    : %s %s\n", selfperf::build_id_hex(b.build_id).c_str(), b.filename.c_str());
}

void dump_record(const selfperf::PerfDataReader& r, const selfperf::PerfRecord& rec) {
  std::printf("%#" PRIx64 " [%#x]: PERF_RECORD_%s", rec.offset, rec.size,
              selfperf::perf_record_type_name(rec.type).c_str());
  switch (rec.type) {
    case PERF_RECORD_SAMPLE: {
      auto s = r.decode_sample(rec);
      std::printf("(IP, %#x): %u/%u: %#" PRIx64 " period: %" PRIu64 " time: %" PRIu64 " cpu: %u", rec.misc, s.pid,
                  s.tid, s.ip, s.period, s.time, s.cpu);
      if (s.sample_type & PERF_SAMPLE_ADDR) std::printf(" addr: %#" PRIx64, s.addr);
      if (s.sample_type & PERF_SAMPLE_DATA_SRC) std::printf(" data_src: %#" PRIx64, s.data_src);
      if (s.sample_type & PERF_SAMPLE_WEIGHT) std::printf(" weight: %" PRIu64, s.weight);
      std::printf("\n");
      if (!s.callchain.empty()) {
        std::printf("... FP chain: nr:%zu\n", s.callchain.size());
        for (std::size_t i = 0; i < s.callchain.size(); ++i)
          std::printf(".....  %2zu: %016" PRIx64 "\n", i, s.callchain[i]);
      }
      return;
    }
    case PERF_RECORD_COMM: {
      auto c = r.decode_comm(rec);
      std::printf(": %s:%u/%u\n", c.comm.c_str(), c.pid, c.tid);
      return;
    }
    case PERF_RECORD_MMAP:
    case PERF_RECORD_MMAP2: {
      auto m = r.decode_mmap(rec);
      std::printf(" %d/%d: [%#" PRIx64 "(%#" PRIx64 ") @ %#" PRIx64 " %02x:%02x %" PRIu64 "]: %s\n", m.pid, m.tid,
                  m.start, m.len, m.pgoff, m.maj, m.min, m.ino, m.filename.c_str());
      return;
    }
    case PERF_RECORD_LOST:
    case PERF_RECORD_LOST_SAMPLES: {
      auto l = r.decode_lost(rec);
      std::printf(": id %" PRIu64 " lost %" PRIu64 "\n", l.id, l.lost);
      return;
    }
    default:
      std::printf("\n");
  }
}

}  // namespace

int dump_main(int argc, char** argv) {
  std::string file;
  bool header_only = false;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::printf("usage: selfperf dump [-i] FILE [--header-only]\n  FILE - reads a pipe-mode stream from standard input\n");
      return 0;
    }
    if (a == "--header-only") {
      header_only = true;
    } else if (a == "-i" && i + 1 < argc) {
      file = argv[++i];
    } else if (!a.empty() && a[0] == '-' && a != "-") {
      std::fprintf(stderr, "selfperf dump: unknown option '%s'\nusage: selfperf dump [-i] FILE [--header-only]\n", a.c_str());
      return 2;
    } else {
      file = a;
    }
  }
  if (file.empty()) {
    std::fprintf(stderr, "selfperf dump: no file\nusage: selfperf dump [-i] FILE [--header-only]\n");
    return 2;
  }
  try {
    selfperf::PerfDataReader reader{std::filesystem::path(file)};
    dump_header(reader);
    if (header_only) return 0;
    std::printf("\n");
    selfperf::PerfRecord rec;
    std::uint64_t records = 0, samples = 0, lost = 0;
    while (reader.next_record(rec)) {
      dump_record(reader, rec);
      ++records;
      if (rec.type == PERF_RECORD_SAMPLE) ++samples;
      if (rec.type == PERF_RECORD_LOST || rec.type == PERF_RECORD_LOST_SAMPLES) lost += reader.decode_lost(rec).lost;
    }
    std::printf("\n# %" PRIu64 " records, %" PRIu64 " samples, %" PRIu64 " lost\n", records, samples, lost);
  } catch (const selfperf::Error& e) {
    std::fprintf(stderr, "selfperf dump: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace selfperf::tool
