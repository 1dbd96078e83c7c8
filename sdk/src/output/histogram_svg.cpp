// Histogram::to_svg: the distribution as bars on a log value axis above the percentile curve.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "selfperf/histogram.hpp"
#include "output/xml_text.hpp"

namespace selfperf {

namespace {

void append(std::string& out, const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  out += buf;
}

// A panel maps data coordinates onto a pixel rectangle.
struct Panel {
  double left, top, width, height;
  double x0, x1, y0, y1;  // data ranges (x already transformed: log value or log 1/(1-p))
  double x(double v) const { return left + (x1 > x0 ? (v - x0) / (x1 - x0) : 0.5) * width; }
  double y(double v) const { return top + height - (y1 > y0 ? (v - y0) / (y1 - y0) : 0.0) * height; }
};

void axes(std::string& out, const Panel& p, const std::string& x_label, const std::string& y_label) {
  append(out, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='none' stroke='#888'/>\n", p.left, p.top,
         p.width, p.height);
  append(out, "<text x='%.1f' y='%.1f' text-anchor='middle'>%s</text>\n", p.left + p.width / 2,
         p.top + p.height + 34, detail::xml_escape(x_label).c_str());
  append(out, "<text x='%.1f' y='%.1f' text-anchor='middle' transform='rotate(-90 %.1f %.1f)'>%s</text>\n",
         p.left - 58, p.top + p.height / 2, p.left - 58, p.top + p.height / 2, detail::xml_escape(y_label).c_str());
}

void x_tick(std::string& out, const Panel& p, double x, const std::string& label) {
  append(out, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#888'/>\n", p.x(x), p.top + p.height, p.x(x),
         p.top + p.height + 5);
  append(out, "<text x='%.1f' y='%.1f' text-anchor='middle' font-size='11'>%s</text>\n", p.x(x),
         p.top + p.height + 17, detail::xml_escape(label).c_str());
}

void y_tick(std::string& out, const Panel& p, double y, const std::string& label) {
  append(out, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#ddd'/>\n", p.left, p.y(y), p.left + p.width,
         p.y(y));
  append(out, "<text x='%.1f' y='%.1f' text-anchor='end' font-size='11'>%s</text>\n", p.left - 4, p.y(y) + 4,
         detail::xml_escape(label).c_str());
}

}  // namespace

std::string Histogram::to_svg(const HistogramFormat& format) const {
  const double w = std::max(format.svg_width, 300), h = std::max(format.svg_height, 300);
  const auto fv = [&](std::uint64_t v) { return format_value(v, format.unit); };
  const std::string value_axis = format.unit.empty() ? "value" : "value (" + format.unit + ")";
  std::string out;
  append(out, "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' font-family='sans-serif' "
              "font-size='13'>\n<rect width='100%%' height='100%%' fill='white'/>\n", w, h);
  append(out, "<text x='%.1f' y='20' text-anchor='middle' font-size='15'>%s</text>\n", w / 2,
         detail::xml_escape((format.title.empty() ? std::string("histogram") : format.title) + " — " +
                    std::to_string(count()) + " values")
             .c_str());
  if (empty()) {
    append(out, "<text x='%.1f' y='%.1f' text-anchor='middle'>no values recorded</text>\n</svg>\n", w / 2, h / 2);
    return out;
  }

  // Top: one bar per non-empty bucket spanning [lowest, highest + 1) on a log axis; 0 is drawn as [0.5, 1).
  const auto log_edge = [](std::uint64_t v) { return std::log10(v == 0 ? 0.5 : static_cast<double>(v)); };
  std::uint64_t tallest = 0;
  std::size_t first = kBucketCount, last = 0;
  for (auto b : buckets()) {
    tallest = std::max(tallest, b.count);
    first = std::min(first, b.index);
    last = b.index;
  }
  const double lo = log_edge(bucket_lowest(first));
  const double hi = std::log10(static_cast<double>(bucket_highest(last)) + 1.0);
  const double pad = std::max(0.02, (hi - lo) * 0.03);
  const double plot_h = (h - 150) / 2;
  const Panel dist{80, 40, w - 110, plot_h, lo - pad, hi + pad, 0, static_cast<double>(tallest) * 1.05};
  axes(out, dist, value_axis + ", log scale", "count per bucket");
  for (int i = 0; i <= 5; ++i) {
    const double x = dist.x0 + (dist.x1 - dist.x0) * i / 5;
    x_tick(out, dist, x, fv(saturating_round(std::pow(10.0, x))));
  }
  for (int i = 0; i <= 4; ++i) {
    const double y = static_cast<double>(tallest) * i / 4;
    y_tick(out, dist, y, std::to_string(saturating_round(y)));
  }
  for (auto b : buckets()) {
    const double x0 = dist.x(log_edge(b.lowest));
    const double x1 = dist.x(std::log10(static_cast<double>(b.highest) + 1.0));
    const double y = dist.y(static_cast<double>(b.count));
    append(out, "<rect x='%.2f' y='%.2f' width='%.2f' height='%.2f' fill='#4a7ebb'><title>%s .. %s: %llu</title></rect>\n",
           x0, y, std::max(x1 - x0, 1.0), dist.top + dist.height - y, detail::xml_escape(fv(b.lowest)).c_str(),
           detail::xml_escape(fv(b.highest)).c_str(), static_cast<unsigned long long>(b.count));
  }

  // Bottom: value against percentile, x = log10(1/(1-p)), so 90%, 99%, 99.9% … are equally spaced.
  const double decades = std::max(1.0, std::ceil(std::log10(static_cast<double>(count()))));
  const auto px = [&](double fraction) {
    return fraction >= 1.0 ? decades : std::min(decades, -std::log10(1.0 - fraction));
  };
  const Panel curve{80, 40 + plot_h + 70, w - 110, plot_h, 0, decades, 0, static_cast<double>(max()) * 1.05};
  axes(out, curve, "percentile", value_axis);
  for (int d = 0; d <= static_cast<int>(decades); ++d) {
    char label[32];
    if (d == 0) std::snprintf(label, sizeof label, "0%%");
    else std::snprintf(label, sizeof label, "%.*f%%", d > 2 ? d - 2 : 0, 100.0 - 100.0 * std::pow(10.0, -d));
    x_tick(out, curve, d, label);
  }
  for (int i = 0; i <= 4; ++i) {
    const double y = static_cast<double>(max()) * i / 4;
    y_tick(out, curve, y, fv(saturating_round(y)));
  }
  std::string points, markers;
  std::uint64_t seen = 0;
  for (auto b : buckets()) {
    const double before = static_cast<double>(seen) / static_cast<double>(count());
    seen += b.count;
    const double after = static_cast<double>(seen) / static_cast<double>(count());
    const std::uint64_t value = std::clamp(b.value, min(), max());
    const double y = curve.y(static_cast<double>(value));
    append(points, "%.2f,%.2f %.2f,%.2f ", curve.x(px(before)), y, curve.x(px(after)), y);
    append(markers, "<circle cx='%.2f' cy='%.2f' r='2.5' fill='#c0392b'><title>p%.4g: %s (%llu values)</title></circle>\n",
           curve.x(px(after)), y, 100.0 * after, detail::xml_escape(fv(value)).c_str(),
           static_cast<unsigned long long>(b.count));
  }
  out += "<polyline fill='none' stroke='#c0392b' stroke-width='1.5' points='" + points + "'/>\n";
  out += markers;
  out += "</svg>\n";
  return out;
}

}  // namespace selfperf
