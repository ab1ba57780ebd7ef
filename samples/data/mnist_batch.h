// Feeds for the MNIST softmax graphs, as the tutorial's Python makes them: x = pixels / 255 as
// float32 [batch, rows*cols], labels as int64 [batch]. Shared by the samples and the tests that
// train the softmax step on TensorFlow's corpus inputs.
#pragma once

#include <cstdint>
#include <utility>

#include "compiler/graph/tensor.h"
#include "samples/data/image_set.h"

namespace xlens::samples {

// Images [first, first + size) of `set`, wrapping around at the end (an epoch's last batch
// is completed from its start, as the tutorial's next_batch does after shuffling).
std::pair<graph::Tensor, graph::Tensor> MakeBatch(const ImageSet& set, int64_t first, int64_t size);
// The same from tensors as the corpus keeps them (.npy): `images` [n, ...] of pixel values
// 0..255 in any numeric type, `labels` [n]; y has the labels' type. No wrapping: the rows must
// exist.
std::pair<graph::Tensor, graph::Tensor> MakeBatch(const graph::Tensor& images,
                                                  const graph::Tensor& labels, int64_t first,
                                                  int64_t size);

}  // namespace xlens::samples
