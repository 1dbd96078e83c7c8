#pragma once
// One PMU's sysfs directory (`<root>/<pmu>/`): its type, format terms and event aliases.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "events/pmu_format.hpp"

namespace selfperf::detail {

// The PMU directories under `root`, sorted.
std::vector<std::string> list_pmus(const std::filesystem::path& root);

class PmuDirectory {
 public:
  // `name` must already be a plain name (is_plain_name).
  PmuDirectory(const std::filesystem::path& root, std::string_view name);

  const std::string& name() const noexcept { return name_; }
  bool exists() const;
  // perf_event_attr::type from `<pmu>/type`; throws selfperf::Error naming the file and `event_text`.
  std::uint32_t type(std::string_view event_text) const;

  // The term's bit field, nullopt when the PMU has no such format file; throws when the file is there but
  // unreadable or not a format we can place.
  std::optional<FormatField> format(std::string_view term, std::string_view event_text) const;
  std::vector<std::string> format_terms() const;

  // The alias's term string (`<pmu>/events/<alias>`), nullopt when there is no such alias; throws when it
  // is there but unreadable.
  std::optional<std::string> alias(std::string_view alias_name, std::string_view event_text) const;
  // Alias names, without the `.scale`/`.unit`/`.per-pkg`/`.snapshot` companions of perf's sysfs layout.
  std::vector<std::string> aliases() const;

 private:
  std::filesystem::path dir_;
  std::string name_;
};

// The PMUs under `root` whose events/ directory has `alias_name`.
std::vector<std::string> pmus_with_alias(const std::filesystem::path& root, std::string_view alias_name);

// Every alias of every PMU under `root` (for suggestions), bounded in count.
std::vector<std::string> all_aliases(const std::filesystem::path& root);

}  // namespace selfperf::detail
