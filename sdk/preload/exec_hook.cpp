// The exec family, defined in the preload library so that the profile is stopped and written before the
// process image is replaced (selfperf::profile_before_exec says why). glibc's exec functions call its internal
// __execve, not the interposable execve, so each entry point is wrapped, and forwards to the next definition
// (glibc's, or another preload's).
#include <dlfcn.h>
#include <unistd.h>

#include <alloca.h>
#include <cerrno>
#include <cstdarg>
#include <cstddef>

#include "selfperf/profile.hpp"

namespace {

template <class Fn>
Fn next(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

// The execl forms take their arguments as a null-terminated list starting at `arg0` (execle's envp follows
// the null). Gathers the list into an argv on this stack and runs `exec(argv, envp)` while it lives.
template <class Exec>
int exec_with_list(const char* arg0, va_list* args, bool envp_follows, Exec exec) {
  va_list counting;
  va_copy(counting, *args);
  std::size_t n = 0;
  for (const char* a = arg0; a != nullptr; a = va_arg(counting, const char*)) ++n;
  va_end(counting);
  auto** argv = static_cast<char**>(alloca((n + 1) * sizeof(char*)));
  for (std::size_t i = 0; i < n; ++i) argv[i] = const_cast<char*>(i == 0 ? arg0 : va_arg(*args, const char*));
  if (n > 0) va_arg(*args, const char*);  // the terminating null
  argv[n] = nullptr;
  char* const* envp = envp_follows ? va_arg(*args, char* const*) : nullptr;
  return exec(argv, envp);
}

using Execve = int (*)(const char*, char* const[], char* const[]);
using Execv = int (*)(const char*, char* const[]);

}  // namespace

extern "C" {

int execve(const char* path, char* const argv[], char* const envp[]) {
  selfperf::profile_before_exec();
  return next<Execve>("execve")(path, argv, envp);
}

int execv(const char* path, char* const argv[]) {
  selfperf::profile_before_exec();
  return next<Execv>("execv")(path, argv);
}

int execvp(const char* file, char* const argv[]) {
  selfperf::profile_before_exec();
  return next<Execv>("execvp")(file, argv);
}

int execvpe(const char* file, char* const argv[], char* const envp[]) {
  selfperf::profile_before_exec();
  return next<Execve>("execvpe")(file, argv, envp);
}

int fexecve(int fd, char* const argv[], char* const envp[]) {
  selfperf::profile_before_exec();
  return next<int (*)(int, char* const[], char* const[])>("fexecve")(fd, argv, envp);
}

int execveat(int dirfd, const char* path, char* const argv[], char* const envp[], int flags) {
  selfperf::profile_before_exec();
  return next<int (*)(int, const char*, char* const[], char* const[], int)>("execveat")(dirfd, path, argv, envp,
                                                                                        flags);
}

// execl, execlp, execle: gather the list, then as execv, execvp, execve (each stops the profile).
int execl(const char* path, const char* arg0, ...) {
  va_list args;
  va_start(args, arg0);
  const int rc = exec_with_list(arg0, &args, false, [&](char** argv, char* const*) { return execv(path, argv); });
  va_end(args);
  return rc;
}

int execlp(const char* file, const char* arg0, ...) {
  va_list args;
  va_start(args, arg0);
  const int rc = exec_with_list(arg0, &args, false, [&](char** argv, char* const*) { return execvp(file, argv); });
  va_end(args);
  return rc;
}

int execle(const char* path, const char* arg0, ...) {
  va_list args;
  va_start(args, arg0);
  const int rc =
      exec_with_list(arg0, &args, true, [&](char** argv, char* const* envp) { return execve(path, argv, envp); });
  va_end(args);
  return rc;
}

}  // extern "C"
