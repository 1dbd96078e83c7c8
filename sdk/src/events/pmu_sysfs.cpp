#include "events/pmu_sysfs.hpp"

#include <cerrno>
#include <cstring>

#include <sys/stat.h>

#include "events/event_files.hpp"
#include "events/event_text.hpp"
#include "selfperf/error.hpp"

namespace selfperf::detail {
namespace {

bool is_companion_file(std::string_view name) {
  for (std::string_view suffix : {".scale", ".unit", ".per-pkg", ".snapshot"}) {
    if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix) return true;
  }
  return false;
}

bool is_plain_file(const std::filesystem::path& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

[[noreturn]] void unreadable(const std::filesystem::path& path, int err, std::string_view event_text) {
  std::string why = err == EFBIG ? "larger than a sysfs attribute" : std::strerror(err);
  throw Error("event " + quote_text(event_text) + ": cannot read " + path.string() + " (" + why + ")", err);
}

}  // namespace

std::vector<std::string> list_pmus(const std::filesystem::path& root) { return list_directory(root); }

PmuDirectory::PmuDirectory(const std::filesystem::path& root, std::string_view name)
    : dir_(root / std::string(name)), name_(name) {}

bool PmuDirectory::exists() const {
  int err = directory_access(dir_);
  return err == 0 || err == EACCES;  // an unreadable PMU exists; reading its files says why it fails
}

std::uint32_t PmuDirectory::type(std::string_view event_text) const {
  auto path = dir_ / "type";
  FileText file = read_small_file(path);
  if (file.error) unreadable(path, file.error, event_text);
  auto value = parse_number(file.text);
  if (!value || *value > UINT32_MAX)
    throw Error("event " + quote_text(event_text) + ": " + path.string() + " holds " + quote_text(file.text) +
                ", not a PMU type number");
  return static_cast<std::uint32_t>(*value);
}

std::optional<FormatField> PmuDirectory::format(std::string_view term, std::string_view event_text) const {
  auto path = dir_ / "format" / std::string(term);
  FileText file = read_small_file(path);
  if (file.error == ENOENT || file.error == ENOTDIR) return std::nullopt;
  if (file.error) unreadable(path, file.error, event_text);
  auto field = parse_format_field(file.text);
  if (!field)
    throw Error("event " + quote_text(event_text) + ": format term '" + std::string(term) + "' of PMU '" +
                name_ + "' is " + quote_text(file.text) + " (" + path.string() +
                "), which selfperf cannot place: expected config, config1 or config2 followed by bit ranges, "
                "e.g. config:0-7 or config1:0-3,8");
  return field;
}

std::vector<std::string> PmuDirectory::format_terms() const { return list_directory(dir_ / "format"); }

std::optional<std::string> PmuDirectory::alias(std::string_view alias_name,
                                               std::string_view event_text) const {
  if (is_companion_file(alias_name)) return std::nullopt;
  auto path = dir_ / "events" / std::string(alias_name);
  if (!is_plain_file(path)) return std::nullopt;
  FileText file = read_small_file(path);
  if (file.error) unreadable(path, file.error, event_text);
  return file.text;
}

std::vector<std::string> PmuDirectory::aliases() const {
  std::vector<std::string> out;
  for (auto& name : list_directory(dir_ / "events"))
    if (!is_companion_file(name)) out.push_back(std::move(name));
  return out;
}

std::vector<std::string> pmus_with_alias(const std::filesystem::path& root, std::string_view alias_name) {
  std::vector<std::string> out;
  if (is_companion_file(alias_name)) return out;
  for (auto& pmu : list_pmus(root))
    if (is_plain_file(root / pmu / "events" / std::string(alias_name))) out.push_back(std::move(pmu));
  return out;
}

std::vector<std::string> all_aliases(const std::filesystem::path& root) {
  // Uncore-heavy servers have hundreds of PMUs with the same aliases; a cap keeps suggestions cheap.
  constexpr std::size_t kMaxAliases = 20000;
  std::vector<std::string> out;
  for (const auto& pmu : list_pmus(root)) {
    for (auto& name : PmuDirectory(root, pmu).aliases()) {
      if (out.size() == kMaxAliases) return out;
      out.push_back(std::move(name));
    }
  }
  return out;
}

}  // namespace selfperf::detail
