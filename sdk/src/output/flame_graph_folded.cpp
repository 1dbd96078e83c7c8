// Folded stacks: the line format FlameGraph, inferno and speedscope import.
#include <istream>
#include <ostream>

#include "selfperf/error.hpp"
#include "selfperf/flame_graph.hpp"

namespace selfperf {
namespace {

// ';' separates frames and the last space separates the count, so names must not break either rule.
void append_frame(std::string& line, const std::string& name) {
  if (!line.empty()) line += ';';
  if (name.empty()) {
    line += "[unknown]";
    return;
  }
  for (char c : name) line += (c == ';') ? ':' : (c == '\n' || c == '\r') ? ' ' : c;
}

}  // namespace

void StackCounts::add(std::span<const std::string> root_first, std::uint64_t count) {
  if (root_first.empty() || count == 0) return;
  std::string line;
  for (const auto& name : root_first) append_frame(line, name);
  folded_[line] += count;
  total_ += count;
}

void StackCounts::add_leaf_first(std::span<const std::string> leaf_first, std::uint64_t count) {
  if (leaf_first.empty() || count == 0) return;
  std::string line;
  for (auto it = leaf_first.rbegin(); it != leaf_first.rend(); ++it) append_frame(line, *it);
  folded_[line] += count;
  total_ += count;
}

void StackCounts::write_folded(std::ostream& out) const {
  for (const auto& [stack, count] : folded_) out << stack << ' ' << count << '\n';
}

StackCounts StackCounts::read_folded(std::istream& in) {
  StackCounts out;
  std::string line;
  std::size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    auto space = line.rfind(' ');
    std::uint64_t count = 0;
    bool ok = space != std::string::npos && space > 0 && space + 1 < line.size();
    if (ok) {
      for (std::size_t i = space + 1; i < line.size() && ok; ++i) {
        ok = line[i] >= '0' && line[i] <= '9' && count <= (UINT64_MAX - 9) / 10;
        count = count * 10 + static_cast<std::uint64_t>(line[i] - '0');
      }
    }
    if (!ok)
      throw Error("folded stacks: line " + std::to_string(line_no) + " is not `frame;frame;… count`: " +
                  line.substr(0, 80));
    if (count == 0) continue;
    out.folded_[line.substr(0, space)] += count;
    out.total_ += count;
  }
  return out;
}

}  // namespace selfperf
