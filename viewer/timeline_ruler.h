// The timeline's time axis: tick marks at 1-2-5 steps and durations written as people read them.
#pragma once

#include <cstdint>
#include <vector>

#include <QString>

namespace xlens::viewer {

struct RulerTick {
  double t_ns = 0;     // on the trace's clock
  bool major = false;  // labelled
  QString label;       // time since `origin_ns`, for major ticks
};

// Ticks over [t0, t1) drawn `width_px` wide: labelled ones at least ~`min_label_px` apart on a
// 1, 2, 5 x 10^n ns step, four unlabelled between; labels count from `origin_ns`.
std::vector<RulerTick> RulerTicks(double t0, double t1, double width_px, double origin_ns, double min_label_px = 90);

// A time on the ruler, in the unit its size asks for with the decimals `resolution_ns` needs:
// 150.123 ms at a 1 us resolution, 150 ms at 10 ms.
QString FormatTimeOffset(double ns, double resolution_ns);

// "850 ns", "12.5 us", "3.25 ms", "1.5 s": three significant digits in the largest unit that
// keeps the number at least 1.
QString FormatDuration(double ns);

}  // namespace xlens::viewer
