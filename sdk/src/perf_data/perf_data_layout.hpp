#pragma once
// On-disk structures of PERFILE2 (tools/perf/util/header.h, Documentation/perf.data-file-format.txt).
#include <cstddef>
#include <cstdint>

namespace selfperf::detail {

inline constexpr std::uint64_t kPerfMagic2 = 0x32454c4946524550ULL;  // "PERFILE2" read as a little-endian u64
inline constexpr std::uint64_t kPerfMagic2Swapped = 0x50455246494c4532ULL;

struct FileSection {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};

struct FileHeader {
  std::uint64_t magic = kPerfMagic2;
  std::uint64_t size = 0;       // sizeof(FileHeader)
  std::uint64_t attr_size = 0;  // one attrs entry: perf_event_attr (attr.size bytes) + FileSection of its ids
  FileSection attrs;
  FileSection data;
  FileSection event_types;
  std::uint64_t features[4] = {};  // 256-bit feature bitmap
};
static_assert(sizeof(FileHeader) == 104);

// perf 6.1 refuses attrs larger than the struct it was built with (PERF_ATTR_SIZE_VER7); PERF_ATTR_SIZE_VER0 is
// the oldest layout any reader accepts.
inline constexpr std::uint32_t kAttrSizeWritten = 128;
inline constexpr std::uint32_t kAttrSizeVer0 = 64;

// Strings in feature sections are padded to 64 bytes (NAME_ALIGN), record names to 8.
inline constexpr std::size_t kNameAlign = 64;
inline constexpr std::size_t align_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

// PERF_RECORD_MISC_BUILD_ID_SIZE: the build id record carries its size in byte 20 of the id.
inline constexpr std::uint16_t kMiscBuildIdSize = 1u << 15;
inline constexpr std::size_t kBuildIdRecordFixed = 8 + 4 + 24;  // header, pid, build_id[24]

}  // namespace selfperf::detail
