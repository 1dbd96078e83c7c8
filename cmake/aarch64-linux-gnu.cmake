# Cross build for 64-bit Arm with Debian's toolchain (g++-aarch64-linux-gnu). The arm64 libraries the library
# links (libunwind, libdw and their dependencies) come from a sysroot of unpacked Debian packages, made by
# tests/emulated/make_sysroot.sh, never from a multiarch install (which would upgrade host packages).
#   tests/emulated/make_sysroot.sh build-arm64/sysroot
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DSELFPERF_BUILD_BENCH=OFF
# (tests/emulated/cross_build.sh does both). SELFPERF_AARCH64_SYSROOT names another sysroot.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

if(NOT SELFPERF_AARCH64_SYSROOT)
  set(SELFPERF_AARCH64_SYSROOT ${CMAKE_BINARY_DIR}/sysroot)
endif()
set(SELFPERF_AARCH64_SYSROOT ${SELFPERF_AARCH64_SYSROOT} CACHE PATH "Unpacked arm64 packages (tests/emulated/make_sysroot.sh)")
# try_compile projects read this file again in their own build folder: hand them the same sysroot.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES SELFPERF_AARCH64_SYSROOT)
if(NOT EXISTS ${SELFPERF_AARCH64_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig/libdw.pc)
  message(FATAL_ERROR "no arm64 sysroot at ${SELFPERF_AARCH64_SYSROOT}: run tests/emulated/make_sysroot.sh "
                      "${SELFPERF_AARCH64_SYSROOT} first (or set SELFPERF_AARCH64_SYSROOT)")
endif()

# The toolchain keeps its own libc (/usr/aarch64-linux-gnu); the sysroot only adds the libraries on top of it.
set(CMAKE_FIND_ROOT_PATH ${SELFPERF_AARCH64_SYSROOT} /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config reads only the sysroot's .pc files and prefixes their paths with it.
set(ENV{PKG_CONFIG_LIBDIR} ${SELFPERF_AARCH64_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${SELFPERF_AARCH64_SYSROOT}/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_SYSROOT_DIR} ${SELFPERF_AARCH64_SYSROOT})
set(ENV{PKG_CONFIG_PATH} "")

# libdw.so needs libelf, zlib, liblzma, libbz2, libzstd at link time: the linker finds them through -rpath-link.
set(_selfperf_libdirs
    ${SELFPERF_AARCH64_SYSROOT}/usr/lib/aarch64-linux-gnu ${SELFPERF_AARCH64_SYSROOT}/lib/aarch64-linux-gnu)
string(REPLACE ";" ":" _selfperf_rpath_link "${_selfperf_libdirs}")
foreach(kind EXE SHARED MODULE)
  set(CMAKE_${kind}_LINKER_FLAGS_INIT "-Wl,-rpath-link,${_selfperf_rpath_link}")
endforeach()
