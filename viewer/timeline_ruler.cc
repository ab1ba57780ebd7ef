#include "viewer/timeline_ruler.h"

#include <algorithm>
#include <cmath>

namespace xlens::viewer {

std::vector<RulerTick> RulerTicks(double t0, double t1, double width_px, double origin_ns, double min_label_px) {
  std::vector<RulerTick> ticks;
  if (!(t1 > t0) || !(width_px > 0) || !std::isfinite(t0) || !std::isfinite(t1)) return ticks;
  const double ns_per_px = (t1 - t0) / width_px;
  const double wanted = std::max(ns_per_px * min_label_px, 1.0);
  // The smallest 1, 2, 5 x 10^n step at least `wanted`.
  double step = std::pow(10.0, std::floor(std::log10(wanted)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (step * m >= wanted) {
      step *= m;
      break;
    }
  }
  const double minor = step / 5;
  // Ticks are on the grid of `origin_ns`, so labels read 0, 1 ms, 2 ms... from the trace's start.
  double first = origin_ns + std::ceil((t0 - origin_ns) / minor) * minor;
  for (int k = 0;; ++k) {
    double t = first + k * minor;
    if (t >= t1 || k > 10000) break;
    double steps = (t - origin_ns) / step;
    bool major = std::fabs(steps - std::round(steps)) < 1e-6;
    ticks.push_back({t, major, major ? FormatTimeOffset(std::round(steps) * step, step) : QString()});
  }
  return ticks;
}

QString FormatTimeOffset(double ns, double resolution_ns) {
  if (!std::isfinite(ns) || !(resolution_ns > 0)) return QStringLiteral("?");
  double magnitude = std::fabs(ns);
  if (magnitude < 1e3) return QStringLiteral("%1 ns").arg(std::round(ns));
  double unit = magnitude >= 1e9 ? 1e9 : magnitude >= 1e6 ? 1e6 : 1e3;
  const char* name = unit == 1e9 ? "s" : unit == 1e6 ? "ms" : "us";
  // Enough decimals that neighbouring ticks differ, no more.
  int decimals = std::clamp(static_cast<int>(std::ceil(std::log10(unit / resolution_ns) - 1e-9)), 0, 9);
  return QStringLiteral("%1 %2").arg(QString::number(ns / unit, 'f', decimals), QLatin1String(name));
}

QString FormatDuration(double ns) {
  if (!std::isfinite(ns)) return QStringLiteral("?");
  // Rounded to three significant digits first, so 999.96 us is "1 ms", not "1e+03 us".
  if (std::fabs(ns) >= 1) {
    double unit_of_third_digit = std::pow(10.0, std::floor(std::log10(std::fabs(ns))) - 2);
    ns = std::round(ns / unit_of_third_digit) * unit_of_third_digit;
  }
  double magnitude = std::fabs(ns);
  const char* unit = "ns";
  double scaled = ns;
  if (magnitude >= 1e9) {
    unit = "s";
    scaled = ns / 1e9;
  } else if (magnitude >= 1e6) {
    unit = "ms";
    scaled = ns / 1e6;
  } else if (magnitude >= 1e3) {
    unit = "us";
    scaled = ns / 1e3;
  }
  if (magnitude < 1e3) return QStringLiteral("%1 ns").arg(std::round(ns));
  return QStringLiteral("%1 %2").arg(QString::number(scaled, 'g', 3), QLatin1String(unit));
}

}  // namespace xlens::viewer
