// How a convolution is posed to oneDNN. An HLO convolution is one formula; oneDNN has three
// primitives, and the gradients JAX and TensorFlow emit are the forward convolution's two
// backward passes written as convolutions:
//   - forward: what the HLO says (no base dilation, no reversed kernel);
//   - backward data (gradient with respect to the input): stride 1, base (lhs) dilation s, the
//     kernel reversed in space and its features swapped: the forward convolution of stride s
//     read backwards, which oneDNN's convolution_backward_data computes without materialising
//     the dilated input;
//   - backward weights (gradient with respect to the kernel): the batch and feature dimensions
//     of the input swapped and a window as large as the forward output, whose stride and
//     dilation are the forward dilation and stride: oneDNN's convolution_backward_weights.
// The operands are read in place: a chain of transposes (and, on the kernel, a reverse of its
// spatial dimensions) between a convolution and what it reads is folded into strides, so the
// transposes conv-canonicalization puts around a gradient's convolution cost nothing. The
// activations must then lie channels-last (batch, spatial..., feature), as oneDNN's fast kernels
// want them; the weights may lie in any order (they are reordered once per call).
// A grouped convolution (feature_group_count G, depthwise when G is the input's features) goes
// to oneDNN's grouped primitives as its forward pass or its input's gradient: oneDNN's weights
// then have a leading groups dimension, the HLO kernel's grouped feature dimension read as
// (group, feature in group). The kernel's gradient of a grouped convolution is written with
// batch_group_count G (the input's batch, the forward's features, split into G groups): oneDNN's
// grouped backward weights.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/hlo/instruction.h"

namespace xlens {

// What an operand of a convolution reads: `base`, through a chain of transposes and reverses.
struct OneDnnOperandView {
  const HloInstruction* base = nullptr;
  std::vector<int64_t> to_base;   // dimension d of the operand is dimension to_base[d] of base
  std::vector<bool> reversed;     // per dimension of the operand
  std::vector<const HloInstruction*> absorbed;  // the transposes and reverses, operand first
};

// The operand itself (nothing absorbed).
OneDnnOperandView DirectView(const HloInstruction& operand);
// Through every transpose, and with `allow_reverse` every reverse, down to another instruction.
OneDnnOperandView ViewThrough(const HloInstruction& operand, bool allow_reverse);

// A convolution as oneDNN's primitive descriptors take it: the forward convolution (batch
// `images`, `input_channels` -> `output_channels`) and which of its passes computes the HLO.
struct OneDnnConvolution {
  enum class Kind { kForward, kBackwardData, kBackwardWeights };
  Kind kind = Kind::kForward;
  int64_t images = 0, input_channels = 0, output_channels = 0;
  std::vector<int64_t> src_spatial, dst_spatial, kernel_spatial;
  std::vector<int64_t> strides, dilations;  // oneDNN's dilation: 0 is a dense window
  std::vector<int64_t> padding_low, padding_high;
  // Element strides of the weights (output channel, input channel, spatial...) in the array that
  // holds them: the kernel operand's base, or for backward weights the result.
  std::vector<int64_t> weights_strides;
  // Grouped: `groups` groups of output_channels / groups outputs from input_channels / groups
  // inputs each; the weights' group dimension lies `group_stride` elements apart.
  int64_t groups = 1, group_stride = 0;
  // The HLO operands and result by role: the convolution's lhs is the forward's src (forward,
  // backward weights) or diff_dst (backward data); its rhs the weights or (backward weights)
  // diff_dst; its result dst, diff_src or diff_weights.

  // "convolution", "convolution_backward_data" or "convolution_backward_weights", and
  // "[G groups]" after it when grouped.
  std::string ToString() const;
};

// How oneDNN computes `conv` reading its operands through `lhs` and `rhs`; nullopt with the
// reason in `why` when it cannot.
std::optional<OneDnnConvolution> DescribeOneDnnConvolution(const HloInstruction& conv,
                                                           const OneDnnOperandView& lhs,
                                                           const OneDnnOperandView& rhs,
                                                           std::string* why);

}  // namespace xlens
