// PerfDataWriter: records stream through a bounded buffer. The header is valid from the start and its data
// size follows each flush, so a file cut short (SIGKILL, abort, _exit) is read up to its last flush; the
// features are written at close().
#include "selfperf/perf_data_writer.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include "perf_data/perf_data_features.hpp"
#include "perf_data/perf_data_layout.hpp"
#include "selfperf/error.hpp"

namespace selfperf {
namespace {

// Ids for events that came without kernel ids: far above what the kernel hands out, so they never collide.
constexpr std::uint64_t kMadeUpIdBase = 0xfffe'0000'0000'0000ULL;

// A record's size is a u16: at most this many frames (8 bytes each) and branches (24) fit beside the fixed
// fields. LBR holds 32 branches at most, BRBE 64.
constexpr std::size_t kMaxFrames = 4096;
constexpr std::size_t kMaxBranches = 1024;

std::uint64_t written_sample_type(const perf_event_attr& attr) {
  constexpr std::uint64_t asked = PERF_SAMPLE_ADDR | PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_WEIGHT | PERF_SAMPLE_BRANCH_STACK;
  return PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
         PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN | (attr.sample_type & asked) |
         ((attr.sample_type & PERF_SAMPLE_WEIGHT_STRUCT) ? PERF_SAMPLE_WEIGHT : 0);
}

// The kernel's text address (/proc/kallsyms' _text), 0 where it is hidden (kptr_restrict) or unreadable.
std::uint64_t kernel_text_address() {
  std::FILE* f = std::fopen("/proc/kallsyms", "re");
  if (f == nullptr) return 0;
  unsigned long long address = 0;
  char type = 0;
  char name[256];
  std::uint64_t found = 0;
  while (std::fscanf(f, "%llx %c %255s%*[^\n]", &address, &type, name) == 3)
    if (std::strcmp(name, "_text") == 0) {
      found = address;
      break;
    }
  std::fclose(f);
  return found;
}

void write_all(int fd, const void* bytes, std::size_t size, std::uint64_t offset, const std::string& path) {
  const auto* p = static_cast<const std::uint8_t*>(bytes);
  while (size > 0) {
    ssize_t n = ::pwrite(fd, p, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      throw Error("perf.data writer: writing " + path + " failed (" + std::strerror(err) +
                      "); check free disk space and permissions",
                  err);
    }
    p += n;
    size -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
}

// Pipe mode: in order, with write(2). SIGPIPE is blocked around the write and a SIGPIPE it raised is taken
// back, so a reader that went away is an Error here instead of the death of the profiled program.
void write_stream(int fd, const void* bytes, std::size_t size, const std::string& path) {
  sigset_t pipe_only, old;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  sigset_t pending;
  sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE) == 1;
  const auto* p = static_cast<const std::uint8_t*>(bytes);
  int err = 0;
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : EIO;
      break;
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  if (err == EPIPE && !was_pending) {
    const timespec zero{};
    while (sigtimedwait(&pipe_only, nullptr, &zero) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (err == EPIPE)
    throw Error("perf.data writer: the reader of " + path + " went away (EPIPE); keep perf report or the pipe's "
                "reader running until the writer closes",
                err);
  if (err != 0)
    throw Error("perf.data writer: writing " + path + " failed (" + std::strerror(err) + ")", err);
}

template <class T>
void put(std::vector<std::uint8_t>& out, const T& value) {
  // resize + memcpy rather than insert(end, p, p + n): GCC 12 at -O3 reports a false out-of-bounds
  // memmove for the latter on a just-cleared vector.
  const std::size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &value, sizeof(T));
}

}  // namespace

namespace {

int create_file(const std::filesystem::path& path) {
  if (path == "-") {
    // A copy, so that close() leaves the process's standard output open.
    int fd = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    if (fd < 0) {
      int err = errno;
      throw Error(std::string("perf.data writer: standard output is not open (") + std::strerror(err) +
                      "); redirect it to a pipe or a file",
                  err);
    }
    return fd;
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    int err = errno;
    throw Error("perf.data writer: cannot create " + path.string() + " (" + std::strerror(err) +
                    "); choose a writable path",
                err);
  }
  return fd;
}

}  // namespace

PerfDataWriter::PerfDataWriter(const std::filesystem::path& path, std::vector<EventDescription> events,
                               PerfDataWriterOptions options)
    : PerfDataWriter(create_file(path), path, std::move(events), std::move(options)) {}

PerfDataWriter::PerfDataWriter(int fd, const std::filesystem::path& path, std::vector<EventDescription> events,
                               PerfDataWriterOptions options)
    : path_(path == "-" ? "standard output" : path), events_(std::move(events)), options_(std::move(options)),
      fd_(fd) {
  if (path == "-") options_.pipe = true;
  try {
    init();
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

void PerfDataWriter::init() {
  if (events_.empty()) throw Error("perf.data writer: " + path_.string() + ": give at least one event");
  if (options_.buffer_bytes < 65536) options_.buffer_bytes = 65536;  // one maximal record always fits
  std::uint64_t next_id = kMadeUpIdBase;
  for (auto& ev : events_) {
    perf_event_attr attr{};
    std::memcpy(&attr, &ev.attr, std::min<std::size_t>(sizeof attr, detail::kAttrSizeWritten));
    attr.size = detail::kAttrSizeWritten;
    attr.sample_type = written_sample_type(ev.attr);
    if (!(attr.sample_type & PERF_SAMPLE_BRANCH_STACK)) attr.branch_sample_type = 0;
    attr.sample_id_all = 1;
    attr.read_format = 0;  // no PERF_SAMPLE_READ is written
    ev.attr = attr;
    if (ev.ids.empty()) ev.ids.push_back(next_id++);
  }
  buffer_.reserve(options_.buffer_bytes);
  scratch_.reserve(1024);
  if (options_.pipe) {
    write_pipe_start();
    write_kernel_mmap();
    return;
  }
  // header | ids of every event | attrs | data
  std::uint64_t offset = sizeof(detail::FileHeader);
  std::vector<std::uint8_t> ids_and_attrs;
  std::vector<detail::FileSection> id_sections;
  for (const auto& ev : events_) {
    id_sections.push_back({offset + ids_and_attrs.size(), ev.ids.size() * sizeof(std::uint64_t)});
    for (auto id : ev.ids) put(ids_and_attrs, id);
  }
  std::uint64_t attrs_offset = offset + ids_and_attrs.size();
  for (std::size_t i = 0; i < events_.size(); ++i) {
    const auto* a = reinterpret_cast<const std::uint8_t*>(&events_[i].attr);
    ids_and_attrs.insert(ids_and_attrs.end(), a, a + detail::kAttrSizeWritten);
    put(ids_and_attrs, id_sections[i]);
  }
  write_all(fd_, ids_and_attrs.data(), ids_and_attrs.size(), offset, path_.string());
  data_offset_ = offset + ids_and_attrs.size();
  (void)attrs_offset;
  write_header({});
  write_kernel_mmap();
}

// An event that counts kernel time needs perf's kernel map, as perf record synthesizes it: without one,
// perf report warns that "kernel samples can't be resolved" (Kernel address maps were restricted) for every
// file of the profiler run as root, though every sample it writes carries user addresses only.
void PerfDataWriter::write_kernel_mmap() {
  if (std::none_of(events_.begin(), events_.end(), [](const EventDescription& e) { return !e.attr.exclude_kernel; }))
    return;
  const std::uint64_t text = kernel_text_address();
  static constexpr char kName[] = "[kernel.kallsyms]_text";  // the symbol after "]" says what pgoff is
  scratch_.clear();
  put(scratch_, perf_event_header{PERF_RECORD_MMAP, PERF_RECORD_MISC_KERNEL, 0});
  put(scratch_, std::int32_t{-1});  // perf's host kernel "pid"
  put(scratch_, std::int32_t{0});
  put(scratch_, text);
  put(scratch_, ~std::uint64_t{0} - text);
  put(scratch_, text);
  scratch_.insert(scratch_.end(), kName, kName + sizeof kName - 1);
  scratch_.resize(detail::align_up(scratch_.size() + 1, 8), 0);
  append_sample_id(-1, 0, 0, 0);
  auto size = static_cast<std::uint16_t>(scratch_.size());
  std::memcpy(scratch_.data() + offsetof(perf_event_header, size), &size, sizeof size);
  append(scratch_.data(), scratch_.size());
}

void PerfDataWriter::write_pipe_start() {
  std::vector<std::uint8_t> out;
  put(out, detail::kPerfMagic2);
  put(out, std::uint64_t{16});  // the size of this header: what tells a reader it is a pipe-mode stream
  for (const auto& ev : events_) {
    const std::size_t size = sizeof(perf_event_header) + detail::kAttrSizeWritten + ev.ids.size() * 8;
    if (size > 0xffff)
      throw Error("perf.data writer: " + path_.string() + ": event " + ev.name + " has " +
                  std::to_string(ev.ids.size()) + " ids, more than a pipe-mode ATTR record holds (8174); write a "
                  "file instead, or give the writer fewer ids");
    put(out, perf_event_header{kPerfRecordHeaderAttr, 0, static_cast<std::uint16_t>(size)});
    const auto* a = reinterpret_cast<const std::uint8_t*>(&ev.attr);
    out.insert(out.end(), a, a + detail::kAttrSizeWritten);
    for (auto id : ev.ids) put(out, id);
  }
  detail::FeatureInputs in;
  in.events = &events_;
  in.cmdline = options_.cmdline.empty() ? detail::self_cmdline() : options_.cmdline;
  for (const auto& f : detail::build_features(in)) {
    // Build ids follow as records beside their mappings; the sample times are not known yet.
    if (f.bit == static_cast<unsigned>(PerfFeature::build_id) ||
        f.bit == static_cast<unsigned>(PerfFeature::sample_time))
      continue;
    const std::size_t size = sizeof(perf_event_header) + 8 + detail::align_up(f.bytes.size(), 8);
    if (size > 0xffff) continue;
    put(out, perf_event_header{kPerfRecordHeaderFeature, 0, static_cast<std::uint16_t>(size)});
    put(out, std::uint64_t{f.bit});
    out.insert(out.end(), f.bytes.begin(), f.bytes.end());
    out.resize(detail::align_up(out.size(), 8), 0);
  }
  // No HEADER_LAST_FEATURE mark (perf record sends one): its number grows with each perf release, and a perf
  // newer than the writer would take the mark for a feature and refuse the stream.
  write_stream(fd_, out.data(), out.size(), path_.string());
}

void PerfDataWriter::append_build_id(const std::string& file) {
  std::vector<std::uint8_t> record;
  if (detail::put_build_id_entry(record, file, kPerfRecordHeaderBuildId)) append(record.data(), record.size());
}

PerfDataWriter::~PerfDataWriter() {
  if (fd_ < 0) return;
  try {
    close();
  } catch (const Error&) {
    // Destructors cannot throw; callers who care about the result call close() themselves.
  }
  if (fd_ >= 0) ::close(fd_);
}

std::size_t PerfDataWriter::event_for(const Sample& sample) const {
  if (events_.size() == 1) return 0;
  for (std::size_t i = 0; i < events_.size(); ++i)
    if (std::find(events_[i].ids.begin(), events_[i].ids.end(), sample.id) != events_[i].ids.end()) return i;
  throw Error("perf.data writer: sample id " + std::to_string(sample.id) +
              " belongs to none of the writer's events; pass the event index or the ids from PERF_EVENT_IOC_ID");
}

void PerfDataWriter::append(const void* bytes, std::size_t size) {
  if (buffer_.size() + size > options_.buffer_bytes) flush();
  const auto* p = static_cast<const std::uint8_t*>(bytes);
  buffer_.insert(buffer_.end(), p, p + size);
}

void PerfDataWriter::flush() {
  if (buffer_.empty()) return;
  if (options_.pipe) {
    write_stream(fd_, buffer_.data(), buffer_.size(), path_.string());
    data_size_ += buffer_.size();
    buffer_.clear();
    return;
  }
  write_all(fd_, buffer_.data(), buffer_.size(), data_offset_ + data_size_, path_.string());
  data_size_ += buffer_.size();
  buffer_.clear();
  // The records first, then the size that covers them: a process killed between the two leaves a header
  // that names only complete records.
  const detail::FileSection data{data_offset_, data_size_};
  write_at(offsetof(detail::FileHeader, data), &data, sizeof data);
}

void PerfDataWriter::sync() {
  if (fd_ < 0) throw Error("perf.data writer: " + path_.string() + " is closed");
  flush();
}

void PerfDataWriter::write_header(const std::array<std::uint64_t, 4>& feature_bits) {
  detail::FileHeader header;
  std::copy(feature_bits.begin(), feature_bits.end(), header.features);
  header.size = sizeof(detail::FileHeader);
  header.attr_size = detail::kAttrSizeWritten + sizeof(detail::FileSection);
  std::uint64_t ids_bytes = 0;
  for (const auto& ev : events_) ids_bytes += ev.ids.size() * sizeof(std::uint64_t);
  header.attrs = {sizeof(detail::FileHeader) + ids_bytes, events_.size() * header.attr_size};
  header.data = {data_offset_, data_size_};
  write_at(0, &header, sizeof header);
}

void PerfDataWriter::append_sample_id(std::int32_t pid, std::int32_t tid, std::uint64_t time, std::uint32_t cpu) {
  // sample_id_all trailer in sample_type order: TID, TIME, CPU, IDENTIFIER (same sample_type for all events).
  put(scratch_, pid);
  put(scratch_, tid);
  put(scratch_, time);
  put(scratch_, cpu);
  put(scratch_, std::uint32_t{0});
  put(scratch_, events_[0].ids[0]);
}

void PerfDataWriter::write_sample(const Sample& sample) { write_sample(sample, event_for(sample)); }

void PerfDataWriter::write_sample(const Sample& sample, std::size_t event_index) {
  if (fd_ < 0) throw Error("perf.data writer: " + path_.string() + " is closed");
  if (event_index >= events_.size())
    throw Error("perf.data writer: event index " + std::to_string(event_index) + " out of range");
  if (options_.synthesize_process) {
    if (!process_synthesized_) synthesize_self_mmaps();
    // Threads of this process get their COMM the first time they are seen, so perf names them.
    if (sample.pid == ::getpid() && sample.tid != sample.pid && named_threads_.insert(sample.tid).second)
      write_comm(sample.pid, sample.tid, detail::thread_comm(sample.tid));
  }
  const auto& ev = events_[event_index];
  const std::uint64_t type = ev.attr.sample_type;
  const std::uint64_t id =
      std::find(ev.ids.begin(), ev.ids.end(), sample.id) != ev.ids.end() ? sample.id : ev.ids[0];
  const std::size_t nframes = std::min(sample.frames.size(), kMaxFrames);

  scratch_.clear();
  put(scratch_, perf_event_header{PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER, 0});
  put(scratch_, id);                                                  // IDENTIFIER
  put(scratch_, nframes ? sample.frames[0] : std::uint64_t{0});       // IP
  put(scratch_, static_cast<std::int32_t>(sample.pid));               // TID
  put(scratch_, static_cast<std::int32_t>(sample.tid));
  put(scratch_, sample.time);                                         // TIME
  if (type & PERF_SAMPLE_ADDR) put(scratch_, sample.addr);
  put(scratch_, sample.cpu);                                          // CPU
  put(scratch_, std::uint32_t{0});
  put(scratch_, sample.period);                                       // PERIOD
  put(scratch_, static_cast<std::uint64_t>(nframes + 1));             // CALLCHAIN
  put(scratch_, static_cast<std::uint64_t>(PERF_CONTEXT_USER));
  for (std::size_t i = 0; i < nframes; ++i) put(scratch_, sample.frames[i]);
  if (type & PERF_SAMPLE_BRANCH_STACK) {  // { u64 nr; [u64 hw_idx;] perf_branch_entry[nr] }
    const std::size_t nbranches = std::min(sample.branches.size(), kMaxBranches);
    put(scratch_, static_cast<std::uint64_t>(nbranches));
    if (ev.attr.branch_sample_type & PERF_SAMPLE_BRANCH_HW_INDEX) put(scratch_, sample.branch_hw_index);
    for (std::size_t i = 0; i < nbranches; ++i) put(scratch_, sample.branches[i]);
  }
  if (type & PERF_SAMPLE_WEIGHT) put(scratch_, sample.weight);
  if (type & PERF_SAMPLE_DATA_SRC) put(scratch_, sample.data_src);
  auto size = static_cast<std::uint16_t>(scratch_.size());
  std::memcpy(scratch_.data() + offsetof(perf_event_header, size), &size, sizeof size);
  append(scratch_.data(), scratch_.size());

  if (samples_ == 0 || sample.time < first_time_) first_time_ = sample.time;
  last_time_ = std::max(last_time_, sample.time);
  ++samples_;
}

void PerfDataWriter::write_lost(std::uint64_t lost, std::size_t event_index) {
  if (fd_ < 0) throw Error("perf.data writer: " + path_.string() + " is closed");
  if (event_index >= events_.size())
    throw Error("perf.data writer: event index " + std::to_string(event_index) + " out of range");
  scratch_.clear();
  put(scratch_, perf_event_header{PERF_RECORD_LOST, 0, 0});
  put(scratch_, events_[event_index].ids[0]);
  put(scratch_, lost);
  append_sample_id(static_cast<std::int32_t>(::getpid()), static_cast<std::int32_t>(::getpid()), last_time_, 0);
  auto size = static_cast<std::uint16_t>(scratch_.size());
  std::memcpy(scratch_.data() + offsetof(perf_event_header, size), &size, sizeof size);
  append(scratch_.data(), scratch_.size());
  lost_ += lost;
}

void PerfDataWriter::write_comm(std::int32_t pid, std::int32_t tid, const std::string& comm, std::uint64_t time,
                                bool exec) {
  if (fd_ < 0) throw Error("perf.data writer: " + path_.string() + " is closed");
  scratch_.clear();
  put(scratch_, perf_event_header{PERF_RECORD_COMM, exec ? std::uint16_t{PERF_RECORD_MISC_COMM_EXEC} : std::uint16_t{0}, 0});
  put(scratch_, pid);
  put(scratch_, tid);
  std::string name = comm.substr(0, 15);  // TASK_COMM_LEN
  scratch_.insert(scratch_.end(), name.begin(), name.end());
  scratch_.resize(detail::align_up(scratch_.size() + 1, 8), 0);
  append_sample_id(pid, tid, time, 0);
  auto size = static_cast<std::uint16_t>(scratch_.size());
  std::memcpy(scratch_.data() + offsetof(perf_event_header, size), &size, sizeof size);
  append(scratch_.data(), scratch_.size());
}

void PerfDataWriter::write_mmap2(const Mmap2Info& map, std::uint64_t time) {
  if (fd_ < 0) throw Error("perf.data writer: " + path_.string() + " is closed");
  if (map.filename.size() > 4096)
    throw Error("perf.data writer: mapping file name longer than PATH_MAX: " + map.filename.substr(0, 64) + "…");
  scratch_.clear();
  put(scratch_, perf_event_header{PERF_RECORD_MMAP2, PERF_RECORD_MISC_USER, 0});
  put(scratch_, map.pid);
  put(scratch_, map.tid);
  put(scratch_, map.start);
  put(scratch_, map.len);
  put(scratch_, map.pgoff);
  put(scratch_, map.maj);
  put(scratch_, map.min);
  put(scratch_, map.ino);
  put(scratch_, map.ino_generation);
  put(scratch_, map.prot);
  put(scratch_, map.flags);
  scratch_.insert(scratch_.end(), map.filename.begin(), map.filename.end());
  scratch_.resize(detail::align_up(scratch_.size() + 1, 8), 0);
  append_sample_id(map.pid, map.tid, time, 0);
  auto size = static_cast<std::uint16_t>(scratch_.size());
  std::memcpy(scratch_.data() + offsetof(perf_event_header, size), &size, sizeof size);
  const bool first_of_file =
      !map.filename.empty() && map.filename[0] == '/' && mapped_files_.insert(map.filename).second;
  // Pipe mode has no BUILD_ID feature at the end: the id goes before the file's first mapping.
  if (options_.pipe && first_of_file) append_build_id(map.filename);
  append(scratch_.data(), scratch_.size());
}

void PerfDataWriter::write_task(bool exit, std::int32_t pid, std::int32_t ppid, std::int32_t tid,
                                std::int32_t ptid, std::uint64_t time) {
  if (fd_ < 0) throw Error("perf.data writer: " + path_.string() + " is closed");
  scratch_.clear();
  put(scratch_, perf_event_header{exit ? std::uint32_t{PERF_RECORD_EXIT} : std::uint32_t{PERF_RECORD_FORK}, 0, 0});
  put(scratch_, pid);
  put(scratch_, ppid);
  put(scratch_, tid);
  put(scratch_, ptid);
  put(scratch_, time);
  append_sample_id(pid, tid, time, 0);
  auto size = static_cast<std::uint16_t>(scratch_.size());
  std::memcpy(scratch_.data() + offsetof(perf_event_header, size), &size, sizeof size);
  append(scratch_.data(), scratch_.size());
}

void PerfDataWriter::synthesize_self_mmaps() {
  if (!process_synthesized_) {
    process_synthesized_ = true;
    auto pid = static_cast<std::int32_t>(::getpid());
    write_comm(pid, pid, detail::self_comm());
  }
  for (const auto& map : read_self_executable_maps()) {
    if (!mapped_starts_.insert(map.start).second) continue;
    write_mmap2(map);
  }
}

void PerfDataWriter::write_finished_round() {
  if (fd_ < 0) throw Error("perf.data writer: " + path_.string() + " is closed");
  perf_event_header h{kPerfRecordFinishedRound, 0, sizeof(perf_event_header)};
  append(&h, sizeof h);
}

void PerfDataWriter::write_at(std::uint64_t offset, const void* bytes, std::size_t size) {
  write_all(fd_, bytes, size, offset, path_.string());
}

void PerfDataWriter::write_features() {
  detail::FeatureInputs in;
  in.events = &events_;
  in.cmdline = options_.cmdline.empty() ? detail::self_cmdline() : options_.cmdline;
  in.mapped_files.assign(mapped_files_.begin(), mapped_files_.end());
  in.first_time = first_time_;
  in.last_time = last_time_;
  auto features = detail::build_features(in);

  std::uint64_t table_offset = data_offset_ + data_size_;
  std::uint64_t offset = table_offset + features.size() * sizeof(detail::FileSection);
  std::vector<std::uint8_t> table, payload;
  std::array<std::uint64_t, 4> bits{};
  for (const auto& f : features) {
    bits[f.bit / 64] |= 1ULL << (f.bit % 64);
    put(table, detail::FileSection{offset + payload.size(), f.bytes.size()});
    payload.insert(payload.end(), f.bytes.begin(), f.bytes.end());
  }
  write_at(table_offset, table.data(), table.size());
  write_at(table_offset + table.size(), payload.data(), payload.size());
  write_header(bits);  // last: until now the header names no features, whose table may be half written
}

void PerfDataWriter::abandon() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  buffer_.clear();
}

void PerfDataWriter::close() {
  if (fd_ < 0) return;
  if (options_.synthesize_process && !process_synthesized_) synthesize_self_mmaps();
  write_finished_round();
  flush();
  if (!options_.pipe) write_features();
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    int err = errno;
    throw Error("perf.data writer: closing " + path_.string() + " failed (" + std::strerror(err) + ")", err);
  }
}

}  // namespace selfperf
