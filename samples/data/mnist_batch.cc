#include "samples/data/mnist_batch.h"

namespace xlens::samples {

std::pair<graph::Tensor, graph::Tensor> MakeBatch(const ImageSet& set, int64_t first, int64_t size) {
  const int64_t n = set.pixels_per_image();
  graph::Tensor x(graph::DT_FLOAT, {size, n});
  graph::Tensor y(graph::DT_INT64, {size});
  auto xs = x.flat<float>();
  auto ys = y.flat<int64_t>();
  for (int64_t r = 0; r < size; ++r) {
    const int64_t image = set.count == 0 ? 0 : (first + r) % set.count;
    const uint8_t* p = &set.pixels[image * n];
    // Divided in double then rounded, as NumPy's images_u8 / 255 fed to a float32 placeholder.
    for (int64_t c = 0; c < n; ++c) xs[r * n + c] = static_cast<float>(p[c] / 255.0);
    ys[r] = set.labels[image];
  }
  return {std::move(x), std::move(y)};
}

std::pair<graph::Tensor, graph::Tensor> MakeBatch(const graph::Tensor& images,
                                                  const graph::Tensor& labels, int64_t first,
                                                  int64_t size) {
  const int64_t n = images.dims().empty() || images.dims()[0] == 0
                        ? 0
                        : images.num_elements() / images.dims()[0];
  graph::Tensor x(graph::DT_FLOAT, {size, n});
  graph::Tensor y(labels.dtype(), {size});
  auto xs = x.flat<float>();
  for (int64_t r = 0; r < size; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      xs[r * n + c] = static_cast<float>(images.GetAsDouble((first + r) * n + c) / 255.0);
    }
    y.SetFromInt64(r, labels.GetAsInt64(first + r));
  }
  return {std::move(x), std::move(y)};
}

}  // namespace xlens::samples
