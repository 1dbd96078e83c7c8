// check_preload_footprint.sh builds and profiles it: spins in a leaf without call-frame information (every
// sample there needs libunwind) until the preload library has loaded libunwind, as long again, then throws with
// every descriptor taken. Prints "libunwind loaded" or "libunwind not loaded", then "caught …".
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

extern "C" void spin_without_cfi(unsigned long n);
#if defined(__aarch64__)
asm(".text\n.globl spin_without_cfi\n.type spin_without_cfi, %function\nspin_without_cfi:\n"
    "1: subs x0, x0, #1\n b.ne 1b\n ret\n.size spin_without_cfi, .-spin_without_cfi\n");
#else
asm(".text\n.globl spin_without_cfi\n.type spin_without_cfi, @function\nspin_without_cfi:\n"
    "1: dec %rdi\n jnz 1b\n ret\n.size spin_without_cfi, .-spin_without_cfi\n");
#endif

bool libunwind_mapped() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.find("libunwind") != std::string::npos) return true;
  return false;
}

double cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

int main() {
  bool loaded = false;
  double until = 5;  // CPU seconds at most to wait for the load (a drain pass, 50 ms, after the first sample)
  while (cpu_seconds() < until) {
    spin_without_cfi(1'000'000);
    if (!loaded && (loaded = libunwind_mapped())) until = cpu_seconds() * 2 + 0.2;
  }
  std::printf("libunwind %s\n", loaded ? "loaded" : "not loaded");
  std::vector<int> taken;
  for (int fd; (fd = open("/dev/null", O_RDONLY)) >= 0;) taken.push_back(fd);
  try {
    throw std::runtime_error("thrown");
  } catch (const std::exception& e) {
    std::printf("caught with %zu descriptors taken\n", taken.size());
  }
  for (int fd : taken) close(fd);
}
