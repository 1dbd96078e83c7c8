// check_record_pid_dwarf.sh's target, built without frame pointers (-fomit-frame-pointer): the kernel's
// frame-pointer walk cannot find the callers of its hot function, the DWARF CFI can. One function,
// nofp_hot_leaf, is reached by two paths: main -> nofp_outer_a -> nofp_middle_a on the main thread, and
// nofp_thread_main -> nofp_outer_b -> nofp_middle_b on a second thread, started at once. Each middle function
// keeps a buffer on its stack, so the CFA is rsp plus an offset only the CFI knows. With ROUNDS > 0 each
// thread calls its path that many times and the process exits; with 0 it runs until SIGTERM or SIGINT, and
// SIGUSR1 makes it load libcrypt (dlopen: code mapped after an attach) and start a third thread,
// nofp_library_thread, which calls its SHA-512 crypt through nofp_in_library.
// Spinning in registers, as record_pid_target does, so that no sanitizer adds calls of its own to the loop.
#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>

namespace {

std::atomic<bool> stop{false};
std::atomic<bool> load_library{false};
std::atomic<unsigned long> sink{0};
long rounds = 0;
using Crypt = char* (*)(const char*, const char*);
Crypt crypt_fn = nullptr;

void on_stop(int) { stop.store(true, std::memory_order_relaxed); }
void on_usr1(int) { load_library.store(true, std::memory_order_relaxed); }

}  // namespace

extern "C" {

__attribute__((noinline)) void nofp_hot_leaf() {
  unsigned long x = 0;
  for (unsigned long i = 0; i < 100000; ++i) {
    x += i;
    asm volatile("" : "+r"(x));
  }
  sink.store(x, std::memory_order_relaxed);
}

// The buffer (written through an asm the compiler cannot see into) moves rsp away from the return address.
__attribute__((noinline)) void nofp_middle_a() {
  volatile char buffer[200];
  buffer[0] = 1;
  asm volatile("" ::"r"(buffer) : "memory");
  nofp_hot_leaf();
  asm volatile("" ::: "memory");  // a call, not a jump: this frame stays on the stack
}
__attribute__((noinline)) void nofp_outer_a() {
  nofp_middle_a();
  asm volatile("" ::: "memory");
}
__attribute__((noinline)) void nofp_middle_b() {
  volatile char buffer[360];
  buffer[0] = 2;
  asm volatile("" ::"r"(buffer) : "memory");
  nofp_hot_leaf();
  asm volatile("" ::: "memory");
}
__attribute__((noinline)) void nofp_outer_b() {
  nofp_middle_b();
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void nofp_in_library() {
  const char* hash = crypt_fn("password", "$6$rounds=20000$saltsalt$");
  sink.store(hash != nullptr ? static_cast<unsigned char>(hash[0]) : 0, std::memory_order_relaxed);
  asm volatile("" ::: "memory");
}
__attribute__((noinline)) void* nofp_library_thread(void*) {
  while (!stop.load(std::memory_order_relaxed)) nofp_in_library();
  return nullptr;
}

__attribute__((noinline)) void* nofp_thread_main(void*) {
  for (long i = 0; rounds == 0 ? !stop.load(std::memory_order_relaxed) : i < rounds; ++i) nofp_outer_b();
  return nullptr;
}

}  // extern "C"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: record_pid_nofp_target ROUNDS (0: until SIGTERM)\n");
    return 2;
  }
  rounds = std::atol(argv[1]);
  std::signal(SIGTERM, on_stop);
  std::signal(SIGINT, on_stop);
  std::signal(SIGUSR1, on_usr1);
  pthread_t t, library_thread;
  bool library_started = false;
  if (pthread_create(&t, nullptr, nofp_thread_main, nullptr) != 0) return 1;
  for (long i = 0; rounds == 0 ? !stop.load(std::memory_order_relaxed) : i < rounds; ++i) {
    nofp_outer_a();
    if (library_started || !load_library.load(std::memory_order_relaxed)) continue;
    void* library = ::dlopen("libcrypt.so.1", RTLD_NOW | RTLD_LOCAL);
    crypt_fn = library != nullptr ? reinterpret_cast<Crypt>(::dlsym(library, "crypt")) : nullptr;
    if (crypt_fn == nullptr || pthread_create(&library_thread, nullptr, nofp_library_thread, nullptr) != 0) {
      const char* why = ::dlerror();
      std::fprintf(stderr, "record_pid_nofp_target: cannot run libcrypt.so.1's crypt on a thread: %s\n",
                   why != nullptr ? why : "pthread_create failed");
      return 1;
    }
    library_started = true;
  }
  pthread_join(t, nullptr);
  if (library_started) pthread_join(library_thread, nullptr);
  return 0;
}
