#include "output/debuginfo_lookup.hpp"

#include <cstdlib>

namespace selfperf::detail {

int find_debuginfo(Dwfl_Module* mod, void** userdata, const char* modname, GElf_Addr base,
                   const char* file_name, const char* debuglink_file, GElf_Word debuglink_crc,
                   char** debuginfo_file_name) {
  const char* urls = std::getenv("DEBUGINFOD_URLS");
  if (urls != nullptr && urls[0] != '\0')
    return dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file, debuglink_crc,
                                        debuginfo_file_name);
  return dwfl_build_id_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file, debuglink_crc,
                                      debuginfo_file_name);
}

}  // namespace selfperf::detail
