// seccomp_deny ENOSYS|EPERM program [args…]: runs the program with perf_event_open failing with that errno,
// as under Docker's default seccomp profile, so tests can check what selfperf does there. Any user may run it
// (PR_SET_NO_NEW_PRIVS instead of CAP_SYS_ADMIN).
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace {

#if defined(__x86_64__)
constexpr unsigned kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr unsigned kArch = AUDIT_ARCH_AARCH64;
#else
#error "seccomp_deny: add this architecture's AUDIT_ARCH_ value"
#endif

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || (std::strcmp(argv[1], "ENOSYS") != 0 && std::strcmp(argv[1], "EPERM") != 0)) {
    std::fprintf(stderr, "usage: %s ENOSYS|EPERM program [args...]\n", argv[0]);
    return 2;
  }
  const unsigned err = std::strcmp(argv[1], "ENOSYS") == 0 ? ENOSYS : EPERM;
  sock_filter filter[] = {
      // Another architecture's system call numbers mean other calls: let them through untouched.
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_perf_event_open, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (err & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
    std::fprintf(stderr, "seccomp_deny: cannot install the filter: %s\n", std::strerror(errno));
    return 3;
  }
  execvp(argv[2], argv + 2);
  std::fprintf(stderr, "seccomp_deny: cannot run %s: %s\n", argv[2], std::strerror(errno));
  return 127;
}
