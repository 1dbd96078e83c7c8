// Prints what this machine lets a process measure about itself.
#include <iostream>

#include <selfperf/selfperf.hpp>

int main() {
  std::cout << selfperf::probe();
  return 0;
}
