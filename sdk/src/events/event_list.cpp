// split_event_groups: perf's -e list syntax. Only the structure is read here (commas, braces, a PMU event's
// slashes); each item is parsed later by parse_event, which names what is wrong with it.
#include <string>
#include <vector>

#include "events/event_text.hpp"
#include "selfperf/error.hpp"
#include "selfperf/event.hpp"

namespace selfperf {

std::vector<std::vector<std::string>> split_event_groups(std::string_view input) {
  using detail::quote_text;
  if (input.size() > detail::kMaxEventText)
    throw Error("event list of " + std::to_string(input.size()) + " bytes is too long (at most " +
                std::to_string(detail::kMaxEventText) + ")");
  std::vector<std::vector<std::string>> groups;
  std::vector<std::string> group;
  std::string item;
  bool in_braces = false, in_slashes = false;
  auto fail = [&](const std::string& why) -> void {
    throw Error("event list " + quote_text(input) + ": " + why +
                "; a list is written a,b,{c,d} (braces group events, as in perf stat -e)");
  };
  auto end_item = [&] {
    std::string_view t = detail::trim(item);
    if (t.empty()) fail("empty event between separators");
    group.emplace_back(t);
    item.clear();
    if (!in_braces) groups.push_back(std::move(group)), group.clear();
  };
  for (std::size_t i = 0; i < input.size(); ++i) {
    char c = input[i];
    if (c == '/') in_slashes = !in_slashes;
    if (in_slashes) {
      item += c;
      continue;
    }
    if (c == '{') {
      if (in_braces) fail("nested '{'");
      if (!detail::trim(item).empty()) fail("'{' after " + quote_text(item));
      in_braces = true;
    } else if (c == '}') {
      if (!in_braces) fail("'}' without '{'");
      end_item();
      in_braces = false;
      groups.push_back(std::move(group)), group.clear();
      // perf allows modifiers after a group (`{a,b}:u`); selfperf does not apply them to the members.
      if (i + 1 < input.size() && input[i + 1] != ',')
        fail("text after '}' (group modifiers such as {a,b}:u are not supported: put them on each event)");
      if (i + 1 < input.size()) ++i;  // the ',' after the group
    } else if (c == ',') {
      end_item();
    } else {
      item += c;
    }
  }
  if (in_slashes) fail("unbalanced '/'");
  if (!detail::trim(input).empty() && detail::trim(input).back() == ',') fail("empty event after the last ','");
  if (in_braces) fail("'{' without '}'");
  if (!detail::trim(item).empty() || (groups.empty() && group.empty())) end_item();
  return groups;
}

}  // namespace selfperf
