// Instrumenting a hot loop with scoped regions: the events a perf user would name, a region table with the
// derived ratios, and which read path ran and why.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <vector>

#include <selfperf/selfperf.hpp>

namespace {

struct Body {
  double x, y, vx, vy;
};

[[gnu::noinline]] void integrate(std::vector<Body>& bodies) {
  SELFPERF_SCOPE("integrate");
  for (auto& b : bodies) {
    b.vy -= 9.81e-3;
    b.x += b.vx * 1e-3;
    b.y += b.vy * 1e-3;
  }
}

[[gnu::noinline]] double collide(std::vector<Body>& bodies) {
  SELFPERF_SCOPE("collide");
  double energy = 0;
  for (auto& b : bodies) {
    if (b.y < 0) {
      b.y = -b.y;
      b.vy = -0.9 * b.vy;
    }
    energy += std::sqrt(b.vx * b.vx + b.vy * b.vy);
  }
  return energy;
}

[[gnu::noinline]] std::vector<Body> spawn(std::size_t n) {
  SELFPERF_SCOPE("spawn");  // fresh memory: page faults show up here
  std::vector<Body> bodies(n);
  for (std::size_t i = 0; i < n; ++i) bodies[i] = {double(i % 100), double(i % 37), 1.0, 0.0};
  return bodies;
}

}  // namespace

int main() {
  std::printf("events: ");
  for (const auto& e : selfperf::default_events()) std::printf("%s ", e.c_str());
  std::printf("(%s)\n\n", selfperf::default_events_reason().c_str());

  double energy = 0;
  {
    SELFPERF_SCOPE("simulation");
    auto bodies = spawn(1 << 18);
    for (int step = 0; step < 200; ++step) {
      SELFPERF_SCOPE("step");
      integrate(bodies);
      energy += collide(bodies);
    }
  }
  selfperf::report(std::cout);

  // The path a read took on this machine, and why.
  selfperf::CounterGroup group(selfperf::default_events());
  group.enable();
  (void)group.read();
  std::printf("\nread path: %.*s\n", static_cast<int>(group.read_path().size()), group.read_path().data());
  std::printf("(energy %.1f)\n", energy);
  return 0;
}
