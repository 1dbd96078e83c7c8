// libFuzzer target: any text given to parse_event or split_event_groups gives an EventSpec or a
// selfperf::Error, never a crash, a hang or another exception.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "selfperf/error.hpp"
#include "selfperf/event.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    (void)selfperf::parse_event(text);
  } catch (const selfperf::Error&) {
  }
  try {
    for (const auto& group : selfperf::split_event_groups(text))
      for (const auto& e : group) (void)e.size();
  } catch (const selfperf::Error&) {
  }
  return 0;
}
