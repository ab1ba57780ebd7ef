// Where each output pixel of TensorFlow's resize ops reads from, along one axis: shared by the
// CPU kernels (image_ops.cc) and the XLA lowerings, so both pick the pixels and weights
// TensorFlow's CPU kernels pick (image_resizer_state.h, computed in float).
#pragma once

#include <cstdint>
#include <vector>

namespace xlens::graph::resize {

// CalculateResizeScale: in/out, or (in-1)/(out-1) with align_corners and out > 1.
float Scale(int64_t in_size, int64_t out_size, bool align_corners);

// Bilinear: output i blends input `lower` and `upper` by `lerp` (0: all lower).
struct BilinearTap {
  int64_t lower = 0;
  int64_t upper = 0;
  float lerp = 0;
};
std::vector<BilinearTap> BilinearTaps(int64_t out_size, int64_t in_size, float scale,
                                      bool half_pixel_centers);

// Nearest neighbour: the input index each output index reads.
std::vector<int64_t> NearestTaps(int64_t out_size, int64_t in_size, float scale,
                                 bool align_corners, bool half_pixel_centers);

}  // namespace xlens::graph::resize
