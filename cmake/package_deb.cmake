# `cpack -G DEB` (from the build dir): one .deb with the library, headers, CMake and pkg-config files, the
# doctor and the LD_PRELOAD profiler, installed under /usr.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME selfperf)
set(CPACK_PACKAGE_VENDOR selfperf)
set(CPACK_PACKAGE_CONTACT "selfperf maintainers <selfperf@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "self-profiling with perf_event_open: counters, sampling, perf.data")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
# Runtime dependencies (libdw1, libelf1, libunwind8, libstdc++6, libc6…) come from dpkg-shlibdeps on the doctor
# and the preload library. The static archive's users link libdw and libunwind themselves, and the CMake package
# finds them with pkg-config: hence the -dev packages.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libdw-dev, libelf-dev, libunwind-dev, pkg-config")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libbenchmark-dev, linux-perf")
# The only shared object is the LD_PRELOAD profiler, loaded by its path, never through the ldconfig cache: no
# ldconfig maintainer scripts.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POSTINST OFF)
# Strips the doctor and the preload library (as `cmake --install --strip`); archives keep their debug info.
set(CPACK_STRIP_FILES ON)
include(CPack)
