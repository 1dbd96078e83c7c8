// Top-N table: self and inclusive shares per function, from folded stacks.
#include <algorithm>
#include <cstdio>
#include <set>
#include <unordered_map>

#include "selfperf/flame_graph.hpp"

namespace selfperf {

std::vector<FunctionShare> top_functions(const StackCounts& stacks, std::size_t n) {
  std::unordered_map<std::string, FunctionShare> by_name;
  for (const auto& [line, count] : stacks.folded()) {
    std::set<std::string_view> seen;  // recursion: a function counts once per stack for inclusive
    std::size_t start = 0;
    std::string_view text(line);
    while (true) {
      auto end = text.find(';', start);
      auto name = text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
      auto& share = by_name[std::string(name)];
      if (seen.insert(name).second) share.inclusive += count;
      if (end == std::string_view::npos) {
        share.self += count;
        break;
      }
      start = end + 1;
    }
  }
  std::vector<FunctionShare> out;
  out.reserve(by_name.size());
  const double total = static_cast<double>(stacks.total());
  for (auto& [name, share] : by_name) {
    share.name = name;
    share.self_percent = total > 0 ? 100.0 * static_cast<double>(share.self) / total : 0;
    share.inclusive_percent = total > 0 ? 100.0 * static_cast<double>(share.inclusive) / total : 0;
    out.push_back(std::move(share));
  }
  std::sort(out.begin(), out.end(), [](const FunctionShare& a, const FunctionShare& b) {
    if (a.self != b.self) return a.self > b.self;
    if (a.inclusive != b.inclusive) return a.inclusive > b.inclusive;
    return a.name < b.name;
  });
  if (out.size() > n) out.resize(n);
  return out;
}

namespace {

// For a table a reader scans: template arguments and parameter lists collapsed to "<…>" and "(…)", as
// perf's --no-demangle-args would show them. "(anonymous namespace)" is a scope, not a parameter list.
std::string short_name(std::string_view name) {
  std::string out;
  int angle = 0;
  int paren = 0;
  for (std::size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (paren == 0 && angle == 0 && c == '(' && name.substr(i).starts_with("(anonymous namespace)")) {
      out += "(anonymous namespace)";
      i += std::string_view("(anonymous namespace)").size() - 1;
      continue;
    }
    if (paren == 0 && c == '<' && !name.substr(0, i).ends_with("operator")) {
      if (angle++ == 0) out += "<…>";
      continue;
    }
    if (paren == 0 && c == '>' && angle > 0) {
      --angle;
      continue;
    }
    if (angle > 0) continue;
    if (c == '(' && paren == 0 && i + 1 < name.size() && name[i + 1] == ')') {
      out += "()";  // operator() and empty parameter lists stay as written
      ++i;
      continue;
    }
    if (c == '(') {
      if (paren++ == 0) out += "(…)";
      continue;
    }
    if (c == ')' && paren > 0) {
      --paren;
      continue;
    }
    if (paren == 0) out += c;
  }
  return out;
}

}  // namespace

std::string format_top_table(const StackCounts& stacks, std::size_t n) {
  std::string out = "   Self%    Incl%      Self   Inclusive  Function\n";
  char buf[96];
  for (const auto& f : top_functions(stacks, n)) {
    std::snprintf(buf, sizeof buf, "%7.2f%% %7.2f%% %9llu %11llu  ", f.self_percent, f.inclusive_percent,
                  static_cast<unsigned long long>(f.self), static_cast<unsigned long long>(f.inclusive));
    out += buf;
    out += short_name(f.name);
    out += '\n';
  }
  return out;
}

}  // namespace selfperf
