// Feeds for the MNIST softmax graphs, as the tutorial's Python makes them: x = pixels / 255 as
// float32 [batch, rows*cols], labels as int64 [batch]. Shared by the samples and the tests that
// train the softmax step on TensorFlow's corpus inputs.
#pragma once

#include <cstdint>
#include <span>
#include <utility>

#include "compiler/graph/tensor.h"
#include "samples/data/image_set.h"

namespace xlens::samples {

// Images [first, first + size) of `set`, wrapping around at the end (an epoch's last batch
// is completed from its start, as the tutorial's next_batch does after shuffling).
std::pair<graph::Tensor, graph::Tensor> MakeBatch(const ImageSet& set, int64_t first, int64_t size);
// The same from raw arrays: `pixels` holds rows of `pixels_per_image` bytes, `labels` one per
// row (the corpus keeps them as .npy tensors). No wrapping: the rows must exist.
std::pair<graph::Tensor, graph::Tensor> MakeBatch(std::span<const uint8_t> pixels,
                                                  std::span<const int64_t> labels,
                                                  int64_t pixels_per_image, int64_t first,
                                                  int64_t size);

}  // namespace xlens::samples
