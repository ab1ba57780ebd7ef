// TensorFlow's Tensor::SummarizeValue: how Assert (print_v2 = false) and StringFormat/tf.print
// (print_v2 = true) write a tensor: "1 2 3..." and "[[1 2]\n [3 4]]", numbers as StrCat writes
// them (floats to the fewest of 6 or 9 significant digits that round-trip, doubles 15 or 17).
#pragma once

#include <cstdint>
#include <string>

#include "compiler/graph/tensor.h"

namespace xlens::graph {

// `max_entries` < 0: every element.
std::string SummarizeValue(const Tensor& t, int64_t max_entries, bool print_v2);

// One number as TensorFlow's StrCat writes it.
std::string FloatToString(float v);
std::string DoubleToString(double v);

}  // namespace xlens::graph
