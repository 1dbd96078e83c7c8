#pragma once
// Shared pieces of the machine-readable reports: RFC 4180 CSV fields, numbers that read back exactly, and the
// unit an event counts in.
#include <string>
#include <string_view>

namespace selfperf::detail {

// One CSV field per RFC 4180: quoted when it holds a comma, a quote, CR or LF, with embedded quotes doubled.
std::string csv_field(std::string_view text);

// The shortest decimal that reads back as exactly `value` (integers up to 2^53 print as integers, no exponent
// below 1e21); "" for NaN and the infinities, which CSV has no way to say.
std::string csv_number(double value);

// The exact decimal of an unsigned integer of up to 128 bits (a Histogram's sum), which a double would round.
std::string decimal(unsigned __int128 value);

// "ns" for the software clocks (task-clock, cpu-clock), "count" for every other event.
std::string event_unit(std::string_view event);

}  // namespace selfperf::detail
