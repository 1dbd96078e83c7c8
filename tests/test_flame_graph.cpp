// Folded stacks, the SVG flame graph and the top-N table.
#include <doctest.h>

#include <sstream>

#include "selfperf/error.hpp"
#include "selfperf/flame_graph.hpp"

using namespace selfperf;

namespace {

StackCounts example() {
  StackCounts s;
  const std::vector<std::string> a = {"main", "work", "alpha"};
  const std::vector<std::string> b = {"beta", "work", "main"};  // leaf first
  s.add(a, 3);
  s.add_leaf_first(b, 1);
  s.add(std::vector<std::string>{"main"}, 0);  // nothing: zero counts are not stacks
  return s;
}

// The width of the rectangle titled `name (…)`; -1 when there is none. (No std::regex: GCC 12 warns inside it
// under -fsanitize=address.)
double rect_width(const std::string& svg, const std::string& name) {
  auto at = svg.find("<title>" + name + " (");
  if (at == std::string::npos) return -1;
  at = svg.find("</title><rect ", at);
  auto width = svg.find(" width=\"", at);
  if (at == std::string::npos || width == std::string::npos) return -1;
  return std::stod(svg.substr(width + 8));
}

// The texts drawn in frames (<text x=… y=…>label</text>).
std::vector<std::string> frame_labels(const std::string& svg) {
  std::vector<std::string> out;
  for (auto at = svg.find("<text x=\""); at != std::string::npos; at = svg.find("<text x=\"", at + 1)) {
    auto open = svg.find('>', at);
    auto close = svg.find("</text>", open);
    auto tag = svg.substr(at, open - at);
    if (tag.find("text-anchor") != std::string::npos) continue;  // the title, not a frame
    out.push_back(svg.substr(open + 1, close - open - 1));
  }
  return out;
}

}  // namespace

TEST_CASE("folded stacks list root first with counts, and read back") {
  auto s = example();
  CHECK(s.total() == 4);
  std::ostringstream out;
  s.write_folded(out);
  CHECK(out.str() == "main;work;alpha 3\nmain;work;beta 1\n");
  std::istringstream in(out.str() + "\n  \nmain;work;alpha 2\r\n");
  auto back = StackCounts::read_folded(in);
  CHECK(back.total() == 6);
  CHECK(back.folded().at("main;work;alpha") == 5);
}

TEST_CASE("folded names cannot break the format") {
  StackCounts s;
  s.add(std::vector<std::string>{"operator;weird", "", "line\nbreak"}, 2);
  std::ostringstream out;
  s.write_folded(out);
  CHECK(out.str() == "operator:weird;[unknown];line break 2\n");
}

TEST_CASE("malformed folded input names the line") {
  std::istringstream in("main;a 1\nmain;b x\n");
  CHECK_THROWS_WITH_AS(StackCounts::read_folded(in), doctest::Contains("line 2"), Error);
  std::istringstream no_count("just-a-name\n");
  CHECK_THROWS_AS(StackCounts::read_folded(no_count), Error);
}

TEST_CASE("top table gives self and inclusive shares, recursion counted once") {
  StackCounts s;
  s.add(std::vector<std::string>{"main", "rec", "rec", "leaf"}, 2);
  s.add(std::vector<std::string>{"main", "rec"}, 1);
  s.add(std::vector<std::string>{"main", "other"}, 1);
  auto top = top_functions(s, 10);
  REQUIRE(top.size() == 4);
  CHECK(top[0].name == "leaf");
  CHECK(top[0].self == 2);
  CHECK(top[0].self_percent == doctest::Approx(50.0));
  auto find = [&](const std::string& n) {
    for (const auto& f : top)
      if (f.name == n) return f;
    return FunctionShare{};
  };
  CHECK(find("rec").self == 1);
  CHECK(find("rec").inclusive == 3);  // not 5: the recursive frame counts once per stack
  CHECK(find("main").inclusive_percent == doctest::Approx(100.0));
  CHECK(find("main").self == 0);
  CHECK(top_functions(s, 2).size() == 2);
  auto table = format_top_table(s, 2);
  CHECK(table.find("Self%") != std::string::npos);
  CHECK(table.find(" 50.00%") != std::string::npos);
  CHECK(table.find("leaf") != std::string::npos);
  CHECK(table.find("other") == std::string::npos);  // beyond the top 2
}

TEST_CASE("SVG frames are proportional, titled with counts and percentages") {
  auto s = example();
  std::ostringstream out;
  FlameGraphOptions options;
  options.title = "Test <graph> & co";
  write_flame_graph_svg(s, out, options);
  const auto svg = out.str();
  CHECK(svg.find("<svg") != std::string::npos);
  CHECK(svg.rfind("</svg>") != std::string::npos);
  CHECK(svg.find("Test &lt;graph&gt; &amp; co") != std::string::npos);
  CHECK(svg.find("<title>alpha (3 samples, 75.00%)</title>") != std::string::npos);
  CHECK(svg.find("<title>beta (1 samples, 25.00%)</title>") != std::string::npos);
  CHECK(svg.find("<title>all (4 samples, 100.00%)</title>") != std::string::npos);
  const double alpha = rect_width(svg, "alpha"), beta = rect_width(svg, "beta"), all = rect_width(svg, "all");
  REQUIRE(beta > 0);
  CHECK(alpha / beta == doctest::Approx(3.0).epsilon(0.01));
  CHECK(rect_width(svg, "work") == doctest::Approx(all).epsilon(0.01));
  std::size_t opens = 0, closes = 0;
  for (auto at = svg.find("<g"); at != std::string::npos; at = svg.find("<g", at + 1)) ++opens;
  for (auto at = svg.find("</g>"); at != std::string::npos; at = svg.find("</g>", at + 1)) ++closes;
  CHECK(opens == 6);  // the frames' group, then all, main, work, alpha, beta
  CHECK(closes == opens);
}

TEST_CASE("SVG truncates long names to their frame and escapes them") {
  StackCounts s;
  const std::string long_name = "std::vector<int>::operator[](unsigned long) const & " + std::string(300, 'x');
  s.add(std::vector<std::string>{"main", long_name}, 30);  // ~350 px: room for ~50 characters
  s.add(std::vector<std::string>{"main", "wide"}, 70);
  std::ostringstream out;
  write_flame_graph_svg(s, out);
  const auto svg = out.str();
  CHECK(svg.find("std::vector&lt;int&gt;::operator[]") != std::string::npos);  // full name in the title
  CHECK(svg.find(std::string(300, 'x') + "</text>") == std::string::npos);     // but not drawn in full
  CHECK(svg.find(">wide</text>") != std::string::npos);
  const auto labels = frame_labels(svg);
  CHECK(labels.size() == 4);  // all, main, wide, the long name (truncated)
  for (const auto& label : labels) CHECK(label.size() < 1200 / (12 * 0.59));
  bool truncated = false;
  for (const auto& label : labels)
    truncated = truncated || (label.rfind("std::vector&lt;int&gt;", 0) == 0 && label.size() > 2 &&
                              label.compare(label.size() - 2, 2, "..") == 0);
  CHECK(truncated);
}

TEST_CASE("SVG of an empty profile says so") {
  std::ostringstream out;
  write_flame_graph_svg(StackCounts{}, out);
  CHECK(out.str().find("no samples") != std::string::npos);
  CHECK(out.str().find("<rect x=\"10") == std::string::npos);
}

TEST_CASE("SVG carries its zoom script after the frames, and data-x where a left-out sibling leaves a gap") {
  StackCounts s;
  s.add(std::vector<std::string>{"main", "a_tiny"}, 1);  // 1/101001 of 1180 px: under min_width, left out
  s.add(std::vector<std::string>{"main", "b_wide"}, 100000);
  s.add(std::vector<std::string>{"main", "c_mid"}, 1000);
  std::ostringstream out;
  write_flame_graph_svg(s, out);
  const auto svg = out.str();
  CHECK(svg.find("a_tiny") == std::string::npos);
  // The script places frames by their offset in counts: b_wide starts after the 1 count of a_tiny, which the
  // running sum of drawn siblings cannot know; main and all start where their parent does.
  CHECK(svg.find("<g data-x=\"1\"><title>b_wide (") != std::string::npos);
  CHECK(svg.find("<g data-x=\"100001\"><title>c_mid (") != std::string::npos);
  CHECK(svg.find("<g><title>main (") != std::string::npos);
  const auto frames = svg.find("<g id=\"frames\">"), script = svg.find("<script type=\"text/ecmascript\"><![CDATA[");
  REQUIRE(frames != std::string::npos);
  REQUIRE(script != std::string::npos);
  CHECK(frames < svg.find("<title>all ("));
  CHECK(svg.rfind("</g>", script) > svg.find("<title>c_mid ("));  // the frames' group closes before the script
  CHECK(svg.find("]]></script>\n</svg>") != std::string::npos);
  CHECK(svg.find("]]>") == svg.find("]]></script>"));  // one CDATA end, the script's own
  // The controls are made by the script, so without scripts the picture has none.
  CHECK(svg.substr(0, script).find("Reset zoom") == std::string::npos);
  CHECK(svg.substr(0, script).find("Search") == std::string::npos);
}

TEST_CASE("SVG script gets the count name as a string literal that cannot end it or its CDATA") {
  StackCounts s;
  s.add(std::vector<std::string>{"main"}, 3);
  FlameGraphOptions options;
  options.count_name = "it's ]]> </script> \\ (ns)";
  std::ostringstream out;
  write_flame_graph_svg(s, out, options);
  const auto svg = out.str();
  CHECK(svg.find("COUNT_NAME = 'it\\u0027s \\u005d\\u005d\\u003e \\u003c/script\\u003e \\u005c (ns)';") !=
        std::string::npos);
  CHECK(svg.find("]]>") == svg.find("]]></script>"));
}
