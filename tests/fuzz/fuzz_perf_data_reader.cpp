// libFuzzer target: any bytes read as a perf.data file (file or pipe mode) give selfperf::Error or records,
// never a crash, a sanitizer report or an allocation driven by a size field (bad_alloc escapes and fails).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "selfperf/error.hpp"
#include "selfperf/perf_data_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    selfperf::PerfDataReader r(std::vector<std::uint8_t>(data, data + size), "fuzz.data");
    std::size_t work = r.cmdline().size() + r.build_ids().size();
    for (auto f : {selfperf::PerfFeature::hostname, selfperf::PerfFeature::arch})
      work += r.feature_string(f).size();
    work += r.nrcpus().has_value() + r.sample_time().has_value() + r.clock_data().has_value();
    selfperf::PerfRecord rec;
    while (r.next_record(rec)) {
      if (rec.type == PERF_RECORD_SAMPLE) work += r.decode_sample(rec).frames().size();
      if (rec.type == PERF_RECORD_COMM) work += r.decode_comm(rec).comm.size();
      if (rec.type == PERF_RECORD_MMAP2) work += r.decode_mmap(rec).filename.size();
      work += r.decode_sample_id(rec).pid;
    }
    (void)work;
  } catch (const selfperf::Error&) {
  }
  return 0;
}
