// fork(), defined in the preload library so that a forked child is profiled into a file of its own
// (selfperf::profile_after_fork_child), as exec'd programs are: a prefork server's workers, a shell's
// subshells, multiprocessing pools. Forwards to the next definition (glibc's, or another preload's), whose
// atfork handlers still run. vfork() and posix_spawn() are left alone: their children only exec.
#include <dlfcn.h>
#include <unistd.h>

#include "selfperf/profile.hpp"

extern "C" pid_t fork() {
  using Fork = pid_t (*)();
  static const Fork next = reinterpret_cast<Fork>(dlsym(RTLD_NEXT, "fork"));
  const pid_t pid = next();
  if (pid == 0) selfperf::profile_after_fork_child();
  return pid;
}
