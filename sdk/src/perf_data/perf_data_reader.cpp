// PerfDataReader: header, attrs, feature table and the record stream, every offset checked against the file.
#include "selfperf/perf_data_reader.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perf_data/byte_cursor.hpp"
#include "perf_data/perf_data_layout.hpp"
#include "selfperf/error.hpp"

namespace selfperf {
namespace {

// No perf attr is near this large; a bigger entry size is corruption, not a future ABI.
constexpr std::uint64_t kMaxAttrEntry = 4096;

}  // namespace

namespace {

// A whole stream read into memory (a pipe cannot be read at offsets).
std::vector<std::uint8_t> slurp(int fd, const std::string& name) {
  std::vector<std::uint8_t> bytes;
  std::uint8_t buf[65536];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      throw Error("perf.data reader: reading " + name + " failed (" + std::strerror(err) + ")", err);
    }
    if (n == 0) return bytes;
    bytes.insert(bytes.end(), buf, buf + n);
  }
}

}  // namespace

PerfDataReader::PerfDataReader(const std::filesystem::path& path) : name_(path.string()) {
  if (path == "-") {
    name_ = "standard input";
    memory_ = slurp(STDIN_FILENO, name_);
    in_memory_ = true;
    file_size_ = memory_.size();
    load();
    return;
  }
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    int err = errno;
    throw Error("perf.data reader: cannot open " + name_ + " (" + std::strerror(err) + ")", err);
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || S_ISDIR(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    throw Error("perf.data reader: " + name_ + " is not a regular file");
  }
  if (!S_ISREG(st.st_mode)) {  // a FIFO or a character device: only a pipe-mode stream can come this way
    try {
      memory_ = slurp(fd_, name_);
    } catch (...) {
      ::close(fd_);
      fd_ = -1;
      throw;
    }
    ::close(fd_);
    fd_ = -1;
    in_memory_ = true;
    file_size_ = memory_.size();
    load();
    return;
  }
  file_size_ = static_cast<std::uint64_t>(st.st_size);
  try {
    load();
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

PerfDataReader::PerfDataReader(std::vector<std::uint8_t> bytes, std::string name)
    : name_(std::move(name)), memory_(std::move(bytes)), in_memory_(true) {
  file_size_ = memory_.size();
  load();
}

PerfDataReader::~PerfDataReader() {
  if (fd_ >= 0) ::close(fd_);
}

PerfDataReader::PerfDataReader(PerfDataReader&& other) noexcept
    : name_(std::move(other.name_)),
      fd_(std::exchange(other.fd_, -1)),
      memory_(std::move(other.memory_)),
      in_memory_(other.in_memory_),
      file_size_(other.file_size_),
      attr_size_(other.attr_size_),
      data_offset_(other.data_offset_),
      data_size_(other.data_size_),
      events_(std::move(other.events_)),
      attr_sizes_(std::move(other.attr_sizes_)),
      features_(std::move(other.features_)),
      build_id_records_(std::move(other.build_id_records_)),
      cursor_(other.cursor_),
      pipe_mode_(other.pipe_mode_),
      truncated_bytes_(other.truncated_bytes_),
      record_(std::move(other.record_)) {}

void PerfDataReader::read_at(std::uint64_t offset, std::uint64_t size, std::uint8_t* out, const char* what) const {
  if (offset > file_size_ || size > file_size_ - offset)
    throw Error("perf.data reader: " + name_ + ": " + what + " at file offset " + std::to_string(offset) + " (" +
                std::to_string(size) + " bytes) runs past the end of the file (" + std::to_string(file_size_) +
                " bytes); the file is truncated or corrupt");
  if (size == 0) return;
  if (in_memory_) {
    std::memcpy(out, memory_.data() + offset, static_cast<std::size_t>(size));
    return;
  }
  while (size > 0) {
    ssize_t n = ::pread(fd_, out, static_cast<std::size_t>(size), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : 0;
      throw Error("perf.data reader: " + name_ + ": reading " + what + " at file offset " + std::to_string(offset) +
                      " failed" + (err ? std::string(" (") + std::strerror(err) + ")" : std::string(" (short file)")),
                  err);
    }
    out += n;
    offset += static_cast<std::uint64_t>(n);
    size -= static_cast<std::uint64_t>(n);
  }
}

std::vector<std::uint8_t> PerfDataReader::read_bytes(std::uint64_t offset, std::uint64_t size,
                                                     const char* what) const {
  if (offset > file_size_ || size > file_size_ - offset) read_at(offset, size, nullptr, what);  // throws
  std::vector<std::uint8_t> out(static_cast<std::size_t>(size));
  read_at(offset, size, out.data(), what);
  return out;
}

void PerfDataReader::load() {
  detail::FileHeader h;
  // A pipe-mode header is 16 bytes (magic, size 16), shorter than the file header: look at those first.
  std::uint64_t start[2] = {0, 0};
  read_at(0, sizeof start, reinterpret_cast<std::uint8_t*>(start), "file header");
  if (start[0] == detail::kPerfMagic2 && start[1] == sizeof start) return load_pipe();
  read_at(0, sizeof h, reinterpret_cast<std::uint8_t*>(&h), "file header");
  if (h.magic == detail::kPerfMagic2Swapped)
    throw Error("perf.data reader: " + name_ + " was written on a machine of the other byte order; convert it "
                "there (perf script / perf inject) or read it on such a machine");
  if (h.magic != detail::kPerfMagic2)
    throw Error("perf.data reader: " + name_ + " is not a perf.data file (no PERFILE2 magic at offset 0); version-1 "
                "files are not supported");
  if (h.size < sizeof h)
    throw Error("perf.data reader: " + name_ + ": header size " + std::to_string(h.size) +
                " at file offset 8 is smaller than a PERFILE2 header (104)");
  const std::uint64_t ids_section = sizeof(detail::FileSection);
  if (h.attr_size < detail::kAttrSizeVer0 + ids_section || h.attr_size > kMaxAttrEntry)
    throw Error("perf.data reader: " + name_ + ": attr entry size " + std::to_string(h.attr_size) +
                " at file offset 16 is outside " + std::to_string(detail::kAttrSizeVer0 + ids_section) + ".." +
                std::to_string(kMaxAttrEntry));
  attr_size_ = h.attr_size;
  if (h.data.offset > file_size_ || h.data.size > file_size_ - h.data.offset)
    throw Error("perf.data reader: " + name_ + ": data section [" + std::to_string(h.data.offset) + ", +" +
                std::to_string(h.data.size) + ") (header, file offset 40) runs past the end of the file (" +
                std::to_string(file_size_) + " bytes); the file is truncated (was perf record interrupted?)");
  data_offset_ = h.data.offset;
  data_size_ = h.data.size;
  cursor_ = data_offset_;

  // Attrs: each entry is the attr (attr_size - 16 bytes here) followed by the file section of its ids.
  auto attrs = read_bytes(h.attrs.offset, h.attrs.size, "attrs section");
  const std::uint64_t n_attrs = h.attrs.size / h.attr_size;
  const std::uint64_t attr_bytes = h.attr_size - ids_section;
  detail::ByteCursor cur(attrs, h.attrs.offset, name_, "attrs section");
  std::uint64_t ids_total = 0;
  for (std::uint64_t i = 0; i < n_attrs; ++i) {
    auto raw = cur.take(attr_bytes);
    EventDescription ev;
    std::memcpy(&ev.attr, raw.data(), std::min<std::size_t>(raw.size(), sizeof ev.attr));
    attr_sizes_.push_back(ev.attr.size);
    auto ids_offset = cur.u64();
    auto ids_size = cur.u64();
    // Honest files store each event's ids once: more ids than file bytes is corruption, not a reason to allocate.
    if (ids_size > file_size_ - std::min(ids_total, file_size_))
      throw Error("perf.data reader: " + name_ + ": ids of attr " + std::to_string(i) + " (entry at file offset " +
                  std::to_string(cur.offset() - 16) + ") add up to more bytes than the file holds");
    ids_total += ids_size;
    auto ids = read_bytes(ids_offset, ids_size, "event ids");
    ev.ids.resize(ids.size() / sizeof(std::uint64_t));
    if (!ev.ids.empty()) std::memcpy(ev.ids.data(), ids.data(), ev.ids.size() * sizeof(std::uint64_t));
    ev.name = "event " + std::to_string(i);
    events_.push_back(std::move(ev));
  }
  if (events_.empty())
    throw Error("perf.data reader: " + name_ + ": the attrs section (file offset " + std::to_string(h.attrs.offset) +
                ") describes no event");

  // Feature sections: one FileSection per set bit, in bit order, right after the data.
  unsigned n_features = 0;
  for (auto word : h.features) n_features += static_cast<unsigned>(std::popcount(word));
  const std::uint64_t table_offset = data_offset_ + data_size_;
  auto table = read_bytes(table_offset, std::uint64_t{n_features} * ids_section, "feature section table");
  detail::ByteCursor tc(table, table_offset, name_, "feature section table");
  for (unsigned bit = 0; bit < kPerfFeatureBits; ++bit) {
    if (!(h.features[bit / 64] >> (bit % 64) & 1)) continue;
    FeatureSectionInfo f{bit, tc.u64(), 0};
    f.size = tc.u64();
    if (f.offset > file_size_ || f.size > file_size_ - f.offset)
      throw Error("perf.data reader: " + name_ + ": feature " + perf_feature_name(bit) + " section [" +
                  std::to_string(f.offset) + ", +" + std::to_string(f.size) + ") (table entry at file offset " +
                  std::to_string(tc.offset() - ids_section) + ") runs past the end of the file");
    features_.push_back(f);
  }
  read_event_desc();
}

std::uint64_t PerfDataReader::pipe_record_span(std::uint64_t offset, const perf_event_header& h) const {
  if (h.type != kPerfRecordHeaderTracingData) return h.size;
  // perf writes the tracing data itself after the record, padded to 8 bytes.
  std::uint32_t size = 0;
  read_at(offset + sizeof h, sizeof size, reinterpret_cast<std::uint8_t*>(&size), "TRACING_DATA size");
  return h.size + ((std::uint64_t{size} + 7) & ~std::uint64_t{7});
}

void PerfDataReader::load_pipe() {
  pipe_mode_ = true;
  data_offset_ = 16;
  std::uint64_t at = data_offset_;
  while (at < file_size_) {
    perf_event_header h{};
    if (file_size_ - at < sizeof h) break;
    read_at(at, sizeof h, reinterpret_cast<std::uint8_t*>(&h), "record header");
    if (h.size < sizeof h)
      throw Error("perf.data reader: " + name_ + ": pipe-mode record at offset " + std::to_string(at) + " has size " +
                  std::to_string(h.size) + "; the stream is corrupt");
    if (h.size > file_size_ - at) break;
    const std::uint64_t span = pipe_record_span(at, h);
    if (span > file_size_ - at) break;
    if (h.type == kPerfRecordHeaderAttr) {
      // The attr (attr.size bytes), then the event's ids to the end of the record.
      auto bytes = read_bytes(at + sizeof h, h.size - sizeof h, "ATTR record");
      std::uint32_t attr_size = 0;
      if (bytes.size() >= 8) std::memcpy(&attr_size, bytes.data() + 4, sizeof attr_size);
      if (attr_size == 0) attr_size = detail::kAttrSizeVer0;
      if (attr_size > bytes.size() || attr_size > kMaxAttrEntry)
        throw Error("perf.data reader: " + name_ + ": ATTR record at offset " + std::to_string(at) +
                    " declares an attr of " + std::to_string(attr_size) + " bytes in a record of " +
                    std::to_string(h.size));
      EventDescription ev;
      std::memcpy(&ev.attr, bytes.data(), std::min<std::size_t>(attr_size, sizeof ev.attr));
      attr_sizes_.push_back(ev.attr.size);
      ev.ids.resize((bytes.size() - attr_size) / sizeof(std::uint64_t));
      if (!ev.ids.empty()) std::memcpy(ev.ids.data(), bytes.data() + attr_size, ev.ids.size() * sizeof(std::uint64_t));
      ev.name = "event " + std::to_string(events_.size());
      attr_size_ = std::max<std::uint64_t>(attr_size_, attr_size + sizeof(detail::FileSection));
      events_.push_back(std::move(ev));
    } else if (h.type == kPerfRecordHeaderFeature && h.size >= sizeof h + 8) {
      std::uint64_t bit = 0;
      read_at(at + sizeof h, sizeof bit, reinterpret_cast<std::uint8_t*>(&bit), "HEADER_FEATURE record");
      // The section's bytes follow in the stream, so the file-mode feature parsers read them in place.
      if (bit < kPerfFeatureBits && !find_feature(static_cast<PerfFeature>(bit)))
        features_.push_back({static_cast<unsigned>(bit), at + sizeof h + 8, h.size - sizeof h - 8});
    } else if (h.type == kPerfRecordHeaderBuildId) {
      build_id_records_.push_back({static_cast<unsigned>(PerfFeature::build_id), at, h.size});
    }
    at += span;
  }
  data_size_ = at - data_offset_;
  truncated_bytes_ = file_size_ - at;
  cursor_ = data_offset_;
  if (events_.empty())
    throw Error("perf.data reader: " + name_ + ": pipe-mode stream with no ATTR record" +
                (truncated_bytes_ ? " (the stream ends after " + std::to_string(file_size_) + " bytes, cut short)"
                                  : std::string()));
  read_event_desc();
}

const FeatureSectionInfo* PerfDataReader::find_feature(PerfFeature f) const noexcept {
  for (const auto& s : features_)
    if (s.bit == static_cast<unsigned>(f)) return &s;
  return nullptr;
}

bool PerfDataReader::has_feature(PerfFeature f) const noexcept { return find_feature(f) != nullptr; }

template <class Parse>
auto PerfDataReader::parse_feature(PerfFeature f, const char* what, Parse parse) const {
  using Result = decltype(parse(std::declval<detail::ByteCursor&>()));
  const auto* s = find_feature(f);
  if (!s) return std::optional<Result>{};
  auto bytes = read_bytes(s->offset, s->size, what);
  detail::ByteCursor c(bytes, s->offset, name_, what);
  return std::optional<Result>{parse(c)};
}

std::vector<std::uint8_t> PerfDataReader::feature_bytes(PerfFeature f) const {
  const auto* s = find_feature(f);
  if (!s) return {};
  return read_bytes(s->offset, s->size, "feature section");
}

void PerfDataReader::read_event_desc() {
  auto names = parse_feature(PerfFeature::event_desc, "EVENT_DESC feature", [](detail::ByteCursor& c) {
    auto nr = c.u32();
    auto size = c.u32();
    if (size < detail::kAttrSizeVer0) c.fail("attr size " + std::to_string(size) + " is below 64");
    std::vector<std::string> out;
    for (std::uint32_t i = 0; i < nr; ++i) {
      c.skip(size);
      auto nr_ids = c.u32();
      out.push_back(c.header_string());
      c.skip(std::uint64_t{nr_ids} * sizeof(std::uint64_t));
    }
    return out;
  });
  if (!names) return;
  for (std::size_t i = 0; i < names->size() && i < events_.size(); ++i) events_[i].name = (*names)[i];
}

std::string PerfDataReader::feature_string(PerfFeature f) const {
  return parse_feature(f, "string feature", [](detail::ByteCursor& c) { return c.header_string(); })
      .value_or(std::string{});
}

std::vector<std::string> PerfDataReader::cmdline() const {
  auto parsed = parse_feature(PerfFeature::cmdline, "CMDLINE feature", [](detail::ByteCursor& c) {
    auto nr = c.u32();
    std::vector<std::string> out;
    // Each string takes at least its 4-byte length, so nr cannot ask for more than the section holds.
    for (std::uint32_t i = 0; i < nr; ++i) {
      if (c.remaining() < 4) c.fail("declares " + std::to_string(nr) + " strings but holds fewer");
      out.push_back(c.header_string());
    }
    return out;
  });
  return parsed.value_or(std::vector<std::string>{});
}

std::optional<NrCpus> PerfDataReader::nrcpus() const {
  return parse_feature(PerfFeature::nrcpus, "NRCPUS feature", [](detail::ByteCursor& c) {
    NrCpus n;
    n.available = c.u32();
    n.online = c.u32();
    return n;
  });
}

std::optional<std::uint64_t> PerfDataReader::total_mem_kb() const {
  return parse_feature(PerfFeature::total_mem, "TOTAL_MEM feature", [](detail::ByteCursor& c) { return c.u64(); });
}

std::optional<std::pair<std::uint64_t, std::uint64_t>> PerfDataReader::sample_time() const {
  return parse_feature(PerfFeature::sample_time, "SAMPLE_TIME feature", [](detail::ByteCursor& c) {
    auto first = c.u64();
    return std::pair{first, c.u64()};
  });
}

std::optional<std::uint64_t> PerfDataReader::clockid_resolution_ns() const {
  return parse_feature(PerfFeature::clockid, "CLOCKID feature", [](detail::ByteCursor& c) { return c.u64(); });
}

std::optional<ClockData> PerfDataReader::clock_data() const {
  return parse_feature(PerfFeature::clock_data, "CLOCK_DATA feature", [](detail::ByteCursor& c) {
    ClockData d;
    d.version = c.u32();
    d.clockid = c.u32();
    d.wall_clock_ns = c.u64();
    d.clockid_time_ns = c.u64();
    return d;
  });
}

namespace {

// perf's build id entries: the BUILD_ID feature's body, or one pipe-mode HEADER_BUILD_ID record.
std::vector<BuildIdEntry> parse_build_ids(detail::ByteCursor& c) {
  std::vector<BuildIdEntry> out;
  while (c.remaining() > 0) {
    auto h = c.get<perf_event_header>();
    if (h.size < detail::kBuildIdRecordFixed) c.fail("build id record size " + std::to_string(h.size) + " too small");
    BuildIdEntry e;
    e.misc = h.misc;
    e.pid = c.get<std::int32_t>();
    auto raw = c.take(24);
    // Without MISC_BUILD_ID_SIZE (perf before 5.12) the id is a 20-byte SHA-1.
    std::size_t n = (h.misc & detail::kMiscBuildIdSize) ? std::min<std::size_t>(raw[20], 20) : 20;
    e.build_id.assign(raw.begin(), raw.begin() + static_cast<std::ptrdiff_t>(n));
    e.filename = c.string_in(h.size - detail::kBuildIdRecordFixed);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

std::vector<BuildIdEntry> PerfDataReader::build_ids() const {
  auto out = parse_feature(PerfFeature::build_id, "BUILD_ID feature", parse_build_ids)
                 .value_or(std::vector<BuildIdEntry>{});
  for (const auto& r : build_id_records_) {
    auto bytes = read_bytes(r.offset, r.size, "HEADER_BUILD_ID record");
    detail::ByteCursor c(bytes, r.offset, name_, "HEADER_BUILD_ID record");
    for (auto& e : parse_build_ids(c)) out.push_back(std::move(e));
  }
  return out;
}

bool PerfDataReader::next_record(PerfRecord& record) {
  const std::uint64_t end = data_offset_ + data_size_;
  perf_event_header h{};
  while (true) {
    if (cursor_ >= end) return false;
    if (end - cursor_ < sizeof h)
      throw Error("perf.data reader: " + name_ + ": record header at file offset " + std::to_string(cursor_) +
                  " is cut off by the end of the data section; the file is truncated or corrupt");
    read_at(cursor_, sizeof h, reinterpret_cast<std::uint8_t*>(&h), "record header");
    if (h.size < sizeof h || h.size > end - cursor_)
      throw Error("perf.data reader: " + name_ + ": record at file offset " + std::to_string(cursor_) + " has size " +
                  std::to_string(h.size) + ", outside 8.." + std::to_string(std::min<std::uint64_t>(end - cursor_, 65535)) +
                  "; the file is truncated or corrupt");
    // In a pipe-mode stream, the stand-ins for the file header were read by load_pipe().
    bool stand_in = pipe_mode_ && (h.type == kPerfRecordHeaderAttr || h.type == kPerfRecordHeaderEventType ||
                                   h.type == kPerfRecordHeaderTracingData || h.type == kPerfRecordHeaderFeature ||
                                   h.type == kPerfRecordHeaderBuildId);
    if (!stand_in) break;
    cursor_ += pipe_record_span(cursor_, h);
  }
  record_.resize(h.size);  // at most 64 KiB: the size field is a u16
  read_at(cursor_, h.size, record_.data(), "record");
  record.type = h.type;
  record.misc = h.misc;
  record.size = h.size;
  record.offset = cursor_;
  record.bytes = record_;
  cursor_ += h.size;
  return true;
}

}  // namespace selfperf
