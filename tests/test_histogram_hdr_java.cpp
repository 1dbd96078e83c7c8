// Histogram::to_hdr_text against HdrHistogram itself: Debian's libhdrhistogram-java prints the same data with
// its outputPercentileDistribution, and every row must agree. No Debian package reads .hgrm files (the plotter
// and HistogramLogAnalyzer are not packaged), so the reference implementation that writes them is the check.
// Needs java (with its compiler, for a single-file program) and /usr/share/java/hdrhistogram.jar; without them
// it says "skipped" and passes.
#include <doctest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "selfperf/histogram.hpp"

using selfperf::Histogram;

namespace {

constexpr const char* kJar = "/usr/share/java/hdrhistogram.jar";

// Reads "value count" lines, records them into a 2-significant-digit HdrHistogram (the layout selfperf's
// Histogram has) and prints its percentile distribution.
constexpr const char* kJavaProgram = R"(
import java.nio.file.*;
import org.HdrHistogram.Histogram;
public class HgrmReference {
  public static void main(String[] args) throws Exception {
    Histogram h = new Histogram(Long.MAX_VALUE, 2);
    for (String line : Files.readAllLines(Paths.get(args[0]))) {
      String[] f = line.trim().split(" ");
      h.recordValueWithCount(Long.parseLong(f[0]), Long.parseLong(f[1]));
    }
    h.outputPercentileDistribution(System.out, Integer.parseInt(args[1]), Double.parseDouble(args[2]));
  }
}
)";

bool have_java() { return std::system("command -v java >/dev/null 2>&1") == 0 && access(kJar, R_OK) == 0; }

std::string run(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  REQUIRE_MESSAGE(p != nullptr, "cannot run " << command);
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = pclose(p);
  REQUIRE_MESSAGE(status == 0, command << " failed with status " << status << ", output:\n" << out);
  return out;
}

std::vector<std::vector<std::string>> rows_of(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.rfind("#[", 0) == 0) break;
    std::istringstream fields(line);
    std::vector<std::string> cols;
    for (std::string f; fields >> f;) cols.push_back(f);
    rows.push_back(cols);
  }
  return rows;
}

void compare_with_java(const std::vector<std::pair<std::uint64_t, std::uint64_t>>& data, int ticks) {
  char dir[] = "/tmp/selfperf_hgrm_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  const std::string base = dir;
  std::ofstream(base + "/HgrmReference.java") << kJavaProgram;
  static Histogram h;
  h.reset();
  {
    std::ofstream values(base + "/values.txt");
    for (const auto& [value, count] : data) {
      values << value << ' ' << count << '\n';
      h.record(value, count);
    }
  }
  // -XX:-UsePerfData: no hsperfdata file in /tmp; serial GC, small heap: the machine is shared.
  const std::string java = run("java -XX:-UsePerfData -XX:+UseSerialGC -Xmx64m -cp " + std::string(kJar) + " " +
                               base + "/HgrmReference.java " + base + "/values.txt " + std::to_string(ticks) +
                               " 1.0 2>&1");
  std::remove((base + "/HgrmReference.java").c_str());
  std::remove((base + "/values.txt").c_str());
  rmdir(dir);

  const std::string ours = h.to_hdr_text(1.0, ticks);
  CHECK(ours.substr(0, ours.find('\n')) == java.substr(0, java.find('\n')));
  const auto ours_rows = rows_of(ours);
  const auto java_rows = rows_of(java);
  REQUIRE_MESSAGE(ours_rows.size() == java_rows.size(), "selfperf:\n" << ours << "HdrHistogram:\n" << java);
  for (std::size_t i = 0; i < ours_rows.size(); ++i) {
    CAPTURE(i);
    REQUIRE(ours_rows[i].size() == java_rows[i].size());
    // Percentile, TotalCount and 1/(1-Percentile) digit for digit.
    for (std::size_t c = 1; c < ours_rows[i].size(); ++c) CHECK(ours_rows[i][c] == java_rows[i][c]);
    // Value: the same bucket, which HdrHistogram reports by its highest value.
    const double value = std::stod(ours_rows[i][0]);
    const std::uint64_t bucket_high = Histogram::bucket_highest(Histogram::bucket_index(static_cast<std::uint64_t>(value)));
    CHECK(std::stod(java_rows[i][0]) == static_cast<double>(bucket_high));
  }
}

}  // namespace

TEST_CASE("hdr text: rows agree with HdrHistogram's own outputPercentileDistribution (libhdrhistogram-java)") {
  if (!have_java()) {
    MESSAGE("skipped: java or " << std::string(kJar) << " not installed (apt-get install default-jdk-headless libhdrhistogram-java)");
    return;
  }
  std::vector<std::pair<std::uint64_t, std::uint64_t>> uniform;
  for (std::uint64_t v = 1; v <= 10000; ++v) uniform.emplace_back(v, 1);
  compare_with_java(uniform, 5);
  compare_with_java(uniform, 2);

  std::vector<std::pair<std::uint64_t, std::uint64_t>> bimodal;
  for (std::uint64_t i = 0; i < 9900; ++i) bimodal.emplace_back(50000 + i, 1);
  for (std::uint64_t i = 0; i < 100; ++i) bimodal.emplace_back(5000000 + i * 1000, 3);
  bimodal.emplace_back(0, 17);  // zeros: HdrHistogram's first bucket starts at 0 too
  compare_with_java(bimodal, 5);
}
