#pragma once
// Where libdwfl looks for a module's separate debug information.
#include <elfutils/libdwfl.h>

namespace selfperf::detail {

// dwfl_standard_find_debuginfo, without its last resort unless the user asked for it: for a module with no
// local debug file (a stripped distro binary: gzip, bash) libdw 0.188 dlopens libdebuginfod, and with it
// libcurl, gnutls, krb5, ldap (tens of ms in every profiled process that sampled such a binary; libcrypto's
// finalizer once crashed a profiled bash at exit), even where no server is configured. So debuginfod is
// asked only with DEBUGINFOD_URLS set, as its client would do anyway; otherwise the debug file is looked up
// by build ID (/usr/lib/debug/.build-id, where Debian's -dbgsym packages put it). A file found only through
// .gnu_debuglink beside the binary is then not used: the module's own symbol tables name its functions.
int find_debuginfo(Dwfl_Module* mod, void** userdata, const char* modname, GElf_Addr base,
                   const char* file_name, const char* debuglink_file, GElf_Word debuglink_crc,
                   char** debuginfo_file_name);

}  // namespace selfperf::detail
