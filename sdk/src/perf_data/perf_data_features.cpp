// Feature sections: what perf report --header shows about the host, the command and the events.
#include "perf_data/perf_data_features.hpp"

#include <algorithm>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include <sys/utsname.h>
#include <unistd.h>

#include "perf_data/perf_data_layout.hpp"
#include "selfperf/perf_data.hpp"

namespace selfperf::detail {
namespace {

template <class T>
void put(std::vector<std::uint8_t>& out, const T& value) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(&value);
  out.insert(out.end(), p, p + sizeof(T));
}

std::string cpuinfo_field(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    auto name = line.substr(0, colon);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.pop_back();
    if (name != key) continue;
    auto value = line.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.erase(0, 1);
    return value;
  }
  return {};
}

std::uint64_t total_mem_kb() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::uint64_t kb = 0;
  while (in >> key) {
    if (key == "MemTotal:") {
      in >> kb;
      return kb;
    }
    in.ignore(1 << 12, '\n');
  }
  return 0;
}

std::vector<std::uint8_t> string_feature(const std::string& text) {
  std::vector<std::uint8_t> out;
  put_header_string(out, text);
  return out;
}

std::uint64_t now_ns(clockid_t clock) {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<std::uint64_t>(ts.tv_nsec);
}

}  // namespace

void put_header_string(std::vector<std::uint8_t>& out, const std::string& text) {
  auto len = static_cast<std::uint32_t>(align_up(text.size() + 1, kNameAlign));
  put(out, len);
  out.insert(out.end(), text.begin(), text.end());
  out.resize(out.size() + (len - text.size()), 0);
}

bool put_build_id_entry(std::vector<std::uint8_t>& out, const std::string& file, std::uint32_t type) {
  auto id = read_elf_build_id(file);
  if (id.empty()) return false;
  std::size_t name_len = align_up(file.size() + 1, kNameAlign);
  put(out, perf_event_header{type, static_cast<std::uint16_t>(PERF_RECORD_MISC_USER | kMiscBuildIdSize),
                             static_cast<std::uint16_t>(kBuildIdRecordFixed + name_len)});
  put(out, std::int32_t{-1});  // perf's HOST_KERNEL_ID: the host machine
  std::uint8_t raw[24] = {};
  std::memcpy(raw, id.data(), std::min<std::size_t>(id.size(), 20));
  raw[20] = static_cast<std::uint8_t>(std::min<std::size_t>(id.size(), 20));
  out.insert(out.end(), raw, raw + sizeof raw);
  out.insert(out.end(), file.begin(), file.end());
  out.resize(out.size() + (name_len - file.size()), 0);
  return true;
}

std::string self_comm() {
  std::ifstream in("/proc/self/comm");
  std::string comm;
  std::getline(in, comm);
  return comm;
}

std::string thread_comm(int tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/comm");
  std::string comm;
  if (!std::getline(in, comm) || comm.empty()) return self_comm();
  return comm;
}

std::vector<std::string> self_cmdline() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> args;
  std::string arg;
  while (std::getline(in, arg, '\0')) args.push_back(arg);
  return args;
}

std::vector<FeatureSection> build_features(const FeatureInputs& in) {
  std::vector<FeatureSection> out;
  auto add = [&](PerfFeature f, std::vector<std::uint8_t> bytes) {
    out.push_back({static_cast<unsigned>(f), std::move(bytes)});
  };

  std::vector<std::uint8_t> build_ids;
  for (const auto& file : in.mapped_files) put_build_id_entry(build_ids, file);
  add(PerfFeature::build_id, std::move(build_ids));

  utsname uts{};
  ::uname(&uts);
  add(PerfFeature::hostname, string_feature(uts.nodename));
  add(PerfFeature::osrelease, string_feature(uts.release));
  add(PerfFeature::version, string_feature("selfperf 0.1.0"));
  add(PerfFeature::arch, string_feature(uts.machine));

  std::vector<std::uint8_t> nrcpus;
  put(nrcpus, static_cast<std::uint32_t>(::sysconf(_SC_NPROCESSORS_CONF)));
  put(nrcpus, static_cast<std::uint32_t>(::sysconf(_SC_NPROCESSORS_ONLN)));
  add(PerfFeature::nrcpus, std::move(nrcpus));

  add(PerfFeature::cpudesc, string_feature(cpuinfo_field("model name")));
  auto vendor = cpuinfo_field("vendor_id");
  add(PerfFeature::cpuid, string_feature(vendor.empty() ? std::string(uts.machine)
                                                         : vendor + "," + cpuinfo_field("cpu family") + "," +
                                                               cpuinfo_field("model") + "," +
                                                               cpuinfo_field("stepping")));
  std::vector<std::uint8_t> mem;
  put(mem, total_mem_kb());
  add(PerfFeature::total_mem, std::move(mem));

  std::vector<std::uint8_t> cmdline;
  put(cmdline, static_cast<std::uint32_t>(in.cmdline.size()));
  for (const auto& arg : in.cmdline) put_header_string(cmdline, arg);
  add(PerfFeature::cmdline, std::move(cmdline));

  std::vector<std::uint8_t> desc;
  put(desc, static_cast<std::uint32_t>(in.events->size()));
  put(desc, kAttrSizeWritten);
  for (const auto& ev : *in.events) {
    const auto* a = reinterpret_cast<const std::uint8_t*>(&ev.attr);
    desc.insert(desc.end(), a, a + kAttrSizeWritten);
    put(desc, static_cast<std::uint32_t>(ev.ids.size()));
    put_header_string(desc, ev.name);
    for (auto id : ev.ids) put(desc, id);
  }
  add(PerfFeature::event_desc, std::move(desc));

  // Empty (perf record writes nothing in it either): the bit tells perf report to show branch mode.
  if (std::any_of(in.events->begin(), in.events->end(),
                  [](const EventDescription& ev) { return (ev.attr.sample_type & PERF_SAMPLE_BRANCH_STACK) != 0; }))
    add(PerfFeature::branch_stack, {});

  std::vector<std::uint8_t> times;
  put(times, in.first_time);
  put(times, in.last_time);
  add(PerfFeature::sample_time, std::move(times));

  // Timestamps are only convertible to wall-clock time when the events named their clock.
  const auto& attr0 = in.events->front().attr;
  if (attr0.use_clockid) {
    auto clock = static_cast<clockid_t>(attr0.clockid);
    timespec res{};
    ::clock_getres(clock, &res);
    std::vector<std::uint8_t> clockid;
    put(clockid, static_cast<std::uint64_t>(res.tv_sec * 1'000'000'000LL + res.tv_nsec));
    add(PerfFeature::clockid, std::move(clockid));
    std::vector<std::uint8_t> data;
    put(data, std::uint32_t{1});  // version
    put(data, static_cast<std::uint32_t>(attr0.clockid));
    put(data, now_ns(CLOCK_REALTIME));
    put(data, now_ns(clock));
    add(PerfFeature::clock_data, std::move(data));
  }
  return out;
}

}  // namespace selfperf::detail
