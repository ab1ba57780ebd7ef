// A small generated stand-in for Fashion-MNIST, so the samples and their tests run where the
// data set is not installed: 28x28 images whose class is drawn as a few bright 7x7 blocks (each
// class its own blocks) over sparse noise. Deterministic for a seed, and linearly separable
// enough that a softmax regression learns it in a few dozen steps.
#pragma once

#include <cstdint>

#include "samples/data/image_set.h"

namespace xlens::samples {

// `train_count` and `test_count` images, classes in turn (image i is class i % 10).
MnistDataSets GenerateTinyImageSets(int64_t train_count = 600, int64_t test_count = 200,
                                    uint64_t seed = 1);

}  // namespace xlens::samples
