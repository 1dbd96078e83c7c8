#include "events/event_files.hpp"

#include <algorithm>
#include <cerrno>
#include <system_error>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "events/event_text.hpp"

namespace selfperf::detail {

FileText read_small_file(const std::filesystem::path& path, std::size_t max_bytes) {
  FileText out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    out.error = errno;
    return out;
  }
  std::string buf(max_bytes + 1, '\0');
  std::size_t used = 0;
  while (used < buf.size()) {
    ssize_t n = ::read(fd, buf.data() + used, buf.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      out.error = errno;
      break;
    }
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (out.error) return out;
  if (used > max_bytes) {
    out.error = EFBIG;
    return out;
  }
  buf.resize(used);
  out.text = std::string(trim(buf));
  return out;
}

int directory_access(const std::filesystem::path& path) noexcept {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return errno;
  if (!S_ISDIR(st.st_mode)) return ENOTDIR;
  // Effective ids, as the kernel checks them when we open what is inside.
  if (::faccessat(AT_FDCWD, path.c_str(), R_OK | X_OK, AT_EACCESS) != 0) return errno;
  return 0;
}

std::vector<std::string> list_directory(const std::filesystem::path& path, std::size_t max_entries) {
  std::vector<std::string> names;
  std::error_code ec;
  std::filesystem::directory_iterator it(path, ec), end;
  for (std::size_t seen = 0; !ec && it != end && seen < max_entries; it.increment(ec), ++seen) {
    std::string name = it->path().filename().string();
    if (is_plain_name(name)) names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace selfperf::detail
