# Install tree, CMake package, pkg-config files and the .deb. Every destination is relative to the prefix, so
# the tree can be staged with DESTDIR, installed without root and moved after installation.
include(CMakePackageConfigHelpers)
set(SELFPERF_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/selfperf)

install(DIRECTORY sdk/include/selfperf DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT selfperfTargets NAMESPACE selfperf:: DESTINATION ${SELFPERF_CMAKEDIR})
# The Google Benchmark integration has its own export set: its target names benchmark::benchmark, which the
# core's users need not have; selfperfConfig.cmake loads it only for COMPONENTS benchmark.
if(TARGET selfperf_benchmark)
  install(EXPORT selfperfBenchmarkTargets NAMESPACE selfperf:: DESTINATION ${SELFPERF_CMAKEDIR})
endif()
configure_package_config_file(cmake/selfperfConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/selfperfConfig.cmake
  INSTALL_DESTINATION ${SELFPERF_CMAKEDIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/selfperfConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/selfperfConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/selfperfConfigVersion.cmake
  DESTINATION ${SELFPERF_CMAKEDIR})

# pkg-config: prefix found from the .pc file's own place (${pcfiledir}), so a moved tree still works.
set(SELFPERF_PCDIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(IS_ABSOLUTE "${SELFPERF_PCDIR}")
  set(SELFPERF_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH SELFPERF_PC_UP /prefix/${SELFPERF_PCDIR} /prefix)
  string(REGEX REPLACE "/$" "" SELFPERF_PC_UP "${SELFPERF_PC_UP}")
  set(SELFPERF_PC_PREFIX "\${pcfiledir}/${SELFPERF_PC_UP}")
endif()
# The thread hook under a name that does not depend on the config or the source's place, for pkg-config and
# plain g++ users (the CMake target selfperf::thread_hook names the copy install(TARGETS … OBJECTS) made).
install(FILES $<TARGET_OBJECTS:selfperf_thread_hook> DESTINATION ${CMAKE_INSTALL_LIBDIR}/selfperf RENAME thread_hook.o)
set(SELFPERF_PC_THREAD_HOOK "\${libdir}/selfperf/thread_hook.o")
configure_file(cmake/selfperf.pc.in ${CMAKE_CURRENT_BINARY_DIR}/pkgconfig/selfperf.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pkgconfig/selfperf.pc DESTINATION ${SELFPERF_PCDIR})
if(TARGET selfperf_benchmark)
  configure_file(cmake/selfperf-benchmark.pc.in ${CMAKE_CURRENT_BINARY_DIR}/pkgconfig/selfperf-benchmark.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pkgconfig/selfperf-benchmark.pc DESTINATION ${SELFPERF_PCDIR})
endif()

include(cmake/package_deb.cmake)
