// check_record_pid.sh's target: a process that selfperf record -p attaches to. Its main thread spins in
// main_spin_leaf (called by main_spin_caller); on SIGUSR1 it starts a second thread, which writes its tid to
// the file named by argv[1] and spins in late_spin_leaf (called by late_spin_caller), and after SIGUSR2 for
// argv[2] more calls; the process exits when that thread is done. Without SIGUSR1 it spins until killed.
// With --fork EXE PID_FILE CALLS, SIGUSR1 forks a child instead, which execs EXE (a link to this program under
// another name) as --child PID_FILE CALLS: it writes its pid to PID_FILE, spins in child_spin_leaf (called by
// child_spin_caller), and after SIGUSR2 for CALLS more calls; the parent spins until the child has exited.
// Built with frame pointers and without tail calls, so the kernel's frame-pointer walk finds every caller; the
// spinning touches no memory, so that no sanitizer adds calls of its own to the loops.
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

std::atomic<bool> go{false};
std::atomic<bool> count_down{false};
std::atomic<bool> late_done{false};
const char* tid_file = nullptr;
long late_calls = 0;
// Both threads store their results here: atomics, so that the stores are no data race.
std::atomic<unsigned long> sink{0};
std::atomic<const void*> frame_seen{nullptr};

void on_usr1(int) { go.store(true, std::memory_order_relaxed); }
void on_usr2(int) { count_down.store(true, std::memory_order_relaxed); }

// 100000 steps in a register, inlined into each leaf; `xor_steps` keeps the two leaves' code different, so
// that the linker's identical-code folding cannot merge them under one name.
__attribute__((always_inline)) inline unsigned long spin_in_registers(bool xor_steps) {
  unsigned long x = 0;
  for (unsigned long i = 0; i < 100000; ++i) {
    x = xor_steps ? x ^ (i * 3) : x + i;
    asm volatile("" : "+r"(x));  // kept, and kept out of memory
  }
  return x;
}

}  // namespace

extern "C" {

// GCC sets up no frame in a leaf that needs none, whatever -fno-omit-frame-pointer says; the walk would then
// skip the caller. Taking the frame's address makes it build one.
__attribute__((noinline)) void main_spin_leaf() {
  frame_seen.store(__builtin_frame_address(0), std::memory_order_relaxed);
  sink.store(spin_in_registers(false), std::memory_order_relaxed);
}
__attribute__((noinline)) void main_spin_caller() {
  main_spin_leaf();
  asm volatile("" ::: "memory");  // a call, not a jump: the caller's frame stays on the stack
}
__attribute__((noinline)) void late_spin_leaf() {
  frame_seen.store(__builtin_frame_address(0), std::memory_order_relaxed);
  sink.store(spin_in_registers(true), std::memory_order_relaxed);
}
__attribute__((noinline)) void late_spin_caller() {
  late_spin_leaf();
  asm volatile("" ::: "memory");
}
__attribute__((noinline)) void child_spin_leaf() {
  frame_seen.store(__builtin_frame_address(0), std::memory_order_relaxed);
  sink.store(spin_in_registers(true) + 1, std::memory_order_relaxed);
}
__attribute__((noinline)) void child_spin_caller() {
  child_spin_leaf();
  asm volatile("" ::: "memory");
}

}  // extern "C"

namespace {

void write_id(const char* path, long id) {
  if (FILE* f = std::fopen(path, "w")) {
    std::fprintf(f, "%ld\n", id);
    std::fclose(f);
  }
}

void* late_thread(void*) {
  write_id(tid_file, static_cast<long>(::syscall(SYS_gettid)));
  while (!count_down.load(std::memory_order_relaxed)) late_spin_caller();
  for (long i = 0; i < late_calls; ++i) late_spin_caller();
  late_done.store(true);
  return nullptr;
}

int run_child(const char* pid_file, long calls) {
  std::signal(SIGUSR2, on_usr2);
  write_id(pid_file, static_cast<long>(::getpid()));
  while (!count_down.load(std::memory_order_relaxed)) child_spin_caller();
  for (long i = 0; i < calls; ++i) child_spin_caller();
  return 0;
}

int run_forking(const char* exe, const char* pid_file, const char* calls) {
  std::signal(SIGUSR1, on_usr1);
  while (!go.load(std::memory_order_relaxed)) main_spin_caller();
  const pid_t child = ::fork();
  if (child < 0) return 1;
  if (child == 0) {
    ::execl(exe, exe, "--child", pid_file, calls, static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(child, &status, WNOHANG) == 0) main_spin_caller();
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--child") == 0) return run_child(argv[2], std::atol(argv[3]));
  if (argc == 5 && std::strcmp(argv[1], "--fork") == 0) return run_forking(argv[2], argv[3], argv[4]);
  if (argc != 3) {
    std::fprintf(stderr, "usage: record_pid_target TID_FILE LATE_CALLS | --fork EXE PID_FILE CALLS\n");
    return 2;
  }
  tid_file = argv[1];
  late_calls = std::atol(argv[2]);
  std::signal(SIGUSR2, on_usr2);
  std::signal(SIGUSR1, on_usr1);
  while (!go.load(std::memory_order_relaxed)) main_spin_caller();
  pthread_t t;
  if (pthread_create(&t, nullptr, late_thread, nullptr) != 0) return 1;
  while (!late_done.load()) main_spin_caller();
  pthread_join(t, nullptr);
  return 0;
}
