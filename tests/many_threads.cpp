// N threads (argv[1], default 1000), each burning MS ms of its own CPU (argv[2], default 20) and then waiting
// until all have: all alive at once, most of them runnable, far more than the CPUs. check_profile_many_threads.sh
// profiles it. Prints its peak RSS.
#include <pthread.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

namespace {

pthread_barrier_t g_barrier;
volatile unsigned long g_sink;
unsigned long g_burn_ns;

unsigned long thread_cpu_ns() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<unsigned long>(t.tv_sec) * 1'000'000'000ul + static_cast<unsigned long>(t.tv_nsec);
}

void* burn_then_wait(void*) {
  const unsigned long start = thread_cpu_ns();
  unsigned long x = 1;
  while (thread_cpu_ns() - start < g_burn_ns)
    for (int i = 0; i < 1000; ++i) g_sink = x = x * 6364136223846793005ul + 1;
  pthread_barrier_wait(&g_barrier);
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 1000;
  g_burn_ns = (argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 20) * 1'000'000ul;
  pthread_barrier_init(&g_barrier, nullptr, static_cast<unsigned>(n) + 1);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  std::vector<pthread_t> threads(static_cast<std::size_t>(n));
  for (auto& t : threads)
    if (pthread_create(&t, &attr, burn_then_wait, nullptr) != 0) {
      std::perror("pthread_create");
      return 1;
    }
  pthread_barrier_wait(&g_barrier);
  for (auto& t : threads) pthread_join(t, nullptr);
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("threads %d peak_rss_kb %ld\n", n, usage.ru_maxrss);
  return 0;
}
