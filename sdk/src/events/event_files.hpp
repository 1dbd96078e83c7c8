#pragma once
// Reading the small files of sysfs and tracefs with the errno kept, so a missing file and a file this user
// may not read give different advice.
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace selfperf::detail {

struct FileText {
  int error = 0;     // 0, or the errno of open/read (ENOENT, EACCES, …); EFBIG when over the size limit
  std::string text;  // surrounding whitespace trimmed
};

// sysfs attributes are at most a page; anything longer is not one of ours and is refused, not read on.
FileText read_small_file(const std::filesystem::path& path, std::size_t max_bytes = 4096);

// 0 when `path` is a directory this process may list and enter; otherwise ENOENT, ENOTDIR, EACCES, ….
int directory_access(const std::filesystem::path& path) noexcept;

// The plain names (see is_plain_name) in a directory, sorted; at most `max_entries` are looked at so a
// huge directory costs bounded work. Empty when the directory cannot be read.
std::vector<std::string> list_directory(const std::filesystem::path& path, std::size_t max_entries = 8192);

}  // namespace selfperf::detail
