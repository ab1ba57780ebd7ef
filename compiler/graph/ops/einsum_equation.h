// Einsum's equation, as TensorFlow's kernel reads it (EinsumHelper::ParseEquation): one or two
// comma-separated input subscripts, exactly one "->", then the output subscripts. Every character
// other than ',', '-', '>' and the ellipsis "..." is a label (spaces too, as in TensorFlow); an
// ellipsis stands for the dimensions an operand has beyond its named labels, broadcast across
// the operands NumPy-style and kept in the output where it has "...". Labels may repeat in an
// input (a diagonal) and in the output (the result put on a diagonal); a label of the output
// must appear in an input, and an input label absent from the output is summed over.
//
// The kernel, the XLA lowering and the gradient all use the resolved form: every dimension of
// every operand and of the output gets a label id (the character's code, or kEllipsisLabel + k
// for the ellipsis dimension k places from the right), with one size per label.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/support/status.h"

namespace xlens::graph {

struct EinsumEquation {
  // The subscripts as written, "..." kept: {"bij", "...jk"} and "b...ik".
  std::vector<std::string> inputs;
  std::string output;
};

// Label ids of ellipsis dimensions: kEllipsisLabel + k, k counted from the right of the ellipsis.
constexpr int kEllipsisLabel = 256;

// The equation against operand shapes.
struct EinsumDims {
  std::vector<std::vector<int>> input_labels;  // one id per dimension of each operand
  std::vector<int> output_labels;              // one id per output dimension
  std::vector<int64_t> output_dims;
  // The size of each label id over all operands (a broadcast ellipsis dimension: its largest).
  std::vector<int64_t> label_size;  // indexed by id; 0 for ids not used
  int num_ellipsis_dims = 0;        // of the output's ellipsis (the operands' largest)
};

// Splits `equation` into subscripts; errors are TensorFlow's ("Expecting exactly one '->' in
// einsum equation: ..."). `num_inputs` is the node's N.
StatusOr<EinsumEquation> ParseEinsumEquation(const std::string& equation, int num_inputs);

// Assigns label ids and sizes for operands of `input_dims`; errors name the operand and axis as
// TensorFlow does ("Expected dimension 4 at axis 0 of the input shaped [3,4] but got dimension
// 3"). Ellipsis dimensions broadcast (1 against n); named labels must agree.
StatusOr<EinsumDims> ResolveEinsum(const EinsumEquation& equation,
                                   const std::vector<std::vector<int64_t>>& input_dims);

// The labels of `subscripts` with the ellipsis expanded to `ellipsis_rank` ids.
std::vector<int> EinsumLabels(const std::string& subscripts, int ellipsis_rank);

}  // namespace xlens::graph
