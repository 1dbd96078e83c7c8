// A simulated game loop with uneven frames, watched by selfperf::FrameLoop: per-frame histograms of wall time
// and of every counter, and the frames that blew the budget with their counter deltas.
//
// Usage: frame_loop [out.svg]   (writes the wall-time distribution as SVG when a path is given)
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <sys/mman.h>

#include <selfperf/selfperf.hpp>
#include <selfperf/frame_loop.hpp>

namespace {

struct Particle {
  float x, y, vx, vy;
};

// The steady part of every frame: integrate a particle system.
[[gnu::noinline]] float simulate(std::vector<Particle>& particles, int steps) {
  float energy = 0;
  for (int s = 0; s < steps; ++s)
    for (auto& p : particles) {
      p.vy -= 0.001f;
      p.x += p.vx * 0.016f;
      p.y += p.vy * 0.016f;
      if (p.y < 0) {
        p.y = -p.y;
        p.vy = -p.vy * 0.9f;
      }
      energy += p.vx * p.vx + p.vy * p.vy;
    }
  return energy;
}

// An occasional spike: "path finding" over a grid, far more CPU than a normal frame.
[[gnu::noinline]] double path_finding(int size) {
  std::vector<double> cost(static_cast<std::size_t>(size) * size, 1.0);
  for (int pass = 0; pass < 6; ++pass)
    for (int y = 1; y < size; ++y)
      for (int x = 1; x < size; ++x) {
        auto i = static_cast<std::size_t>(y) * size + x;
        cost[i] = std::min(cost[i - 1], cost[i - size]) + std::sqrt(static_cast<double>(x ^ y) + 1.0);
      }
  return cost.back();
}

// Another kind of spike: "streaming in a level chunk" touches fresh memory, one page fault per page.
[[gnu::noinline]] std::size_t stream_chunk(char* arena, std::size_t pages) {
  std::size_t sum = 0;
  for (std::size_t p = 0; p < pages; ++p) {
    arena[p * 4096] = static_cast<char>(p);
    sum += static_cast<unsigned char>(arena[p * 4096]);
  }
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  const bool hardware = selfperf::probe().hardware_events;
  std::vector<std::string> events{"task-clock", "page-faults:u"};
  if (hardware) events.insert(events.end(), {"cycles:u", "instructions:u"});
  std::printf("frame_loop: counting");
  for (const auto& e : events) std::printf(" %s", e.c_str());
  std::printf("%s\n", hardware ? "" : " (no hardware PMU here: software events only)");

  selfperf::CounterGroup group(events);
  for (const auto& note : group.notes()) std::printf("note: %s\n", note.c_str());
  group.enable();

  // Budgets: 2 ms of CPU per frame (the simulation is scaled down from 16.6 ms so the sample runs in about a
  // second), and 64 page faults, since a frame that faults in memory stalls however fast the CPU is.
  selfperf::FrameLoop loop(group, {.over_budget_capacity = 32});
  loop.set_budget(0, 2'000'000);
  loop.set_budget(1, 64);

  constexpr int kFrames = 600;
  constexpr std::size_t kChunkPages = 256;
  const std::size_t arena_bytes = kChunkPages * 4096 * (kFrames / 97 + 1);
  void* arena_memory = mmap(nullptr, arena_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (arena_memory == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  madvise(arena_memory, arena_bytes, MADV_NOHUGEPAGE);  // one fault per page, as a real streaming pool sees
  char* arena = static_cast<char*>(arena_memory);
  std::size_t chunks = 0;

  std::vector<Particle> particles(4000);
  for (std::size_t i = 0; i < particles.size(); ++i)
    particles[i] = {static_cast<float>(i % 100), static_cast<float>(i / 100), 0.5f, 0.0f};

  double checksum = 0;
  for (int frame = 0; frame < kFrames; ++frame) {
    loop.mark();
    checksum += simulate(particles, 4);
    if (frame % 61 == 30) checksum += path_finding(700);                      // CPU spike
    if (frame % 97 == 50) checksum += static_cast<double>(stream_chunk(arena + chunks++ * kChunkPages * 4096, kChunkPages));
  }
  loop.mark();  // closes the last frame
  munmap(arena_memory, arena_bytes);

  std::printf("\n%s\n", loop.wall_histogram().to_text({.title = "frame wall time", .unit = "ns", .rows = 16}).c_str());
  std::printf("%s\n", loop.histogram(0).to_text({.title = "frame " + loop.event_name(0), .unit = "ns", .rows = 16}).c_str());
  std::printf("%s", loop.report().c_str());
  std::printf("\nread path: %.*s  (checksum %.3g)\n", static_cast<int>(group.read_path().size()),
              group.read_path().data(), checksum);

  if (argc > 1) {
    const std::string svg = loop.wall_histogram().to_svg({.title = "frame wall time", .unit = "ns"});
    std::FILE* out = std::fopen(argv[1], "w");
    if (out == nullptr || std::fwrite(svg.data(), 1, svg.size(), out) != svg.size() || std::fclose(out) != 0) {
      std::fprintf(stderr, "frame_loop: cannot write %s: %s\n", argv[1], std::strerror(errno));
      return 1;
    }
    std::printf("wrote %s (open it in a browser)\n", argv[1]);
  }
  return 0;
}
