// Hands matrix products and convolutions to oneDNN together with what oneDNN can apply to their
// results in the same call, as XLA's CPU oneDNN rewriter does: a bias or residual add or
// subtraction, ReLU, GELU (tanh and erf forms), scaling (x * c + d). Transposed operands (a
// transpose swapping the two minor dimensions, as dot-decomposer leaves before a `x^T y` product)
// are read in place through strides instead of being materialised, a transposed result (a weight
// gradient's transpose(g^T x)) is computed as the product of the transposed operands, and batch
// dimensions make one batched call.
// Convolutions run as oneDNN's forward, backward-data or backward-weights pass, whichever
// computes them (compiler/passes/onednn_convolution.h: the gradients JAX emits), with the
// transposes and kernel reverse around them read in place; only the forward pass takes post-ops.
//
// The call is a kCustom fusion, so its provenance stays where users look for it: the fused
// computation holds every absorbed instruction with its own metadata, the fusion's op_name joins
// theirs, the decisions say what was absorbed and why a dot or convolution was left alone, and
// the runtime runs a kCustom fusion that MatchOneDnnCall recognises through oneDNN (any other
// kCustom fusion is compiled as before).
//
// Activations are recognised by their structure (onednn_activation_matcher.h): the forms JAX and
// TensorFlow emit for ReLU, both GELUs and the logistic function, up to the order of commutative
// operands and with bit-identical constants, and chains of scaling and shifting by scalar
// constants. Only f32, row-major operands and results.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/passes/fusion_utils.h"
#include "compiler/passes/hlo_pass.h"
#include "compiler/passes/onednn_convolution.h"

namespace xlens {

// The widest output rows (columns of a 2-D product's result) that the CPU runtime computes in its
// own loops for narrow products (NarrowProduct, which takes up to 16) rather than oneDNN's
// kernels: 12 columns fill 75% of a vector's 16 lanes, and oneDNN's kernels, a row of the output
// per vector, leave the rest of every multiply-add idle from there down. The runtime's thunks
// choose those loops under it, and the rewriter swaps a weight gradient's product into them.
inline constexpr int64_t kNarrowOutputColumns = 12;

// The shortest k of a product with its lhs read transposed (a weight gradient x^T g) that the
// narrow loops take (NarrowProductTransposedLhs): k is the trip count of their outer loop, so a
// k of 16 (a batch of 32: the convolution step's [3136,10] gradient, on one core 0.026 ms a run
// on oneDNN with the transposing subtraction, 0.025 in the loops) is enough. The runtime's
// thunks choose those loops from it, and the rewriter swaps a weight gradient's product into the
// shape they take. A product of at most SmallProductLimit() multiply-adds (2^15, in the runtime,
// which passes do not see) runs in the small-product loops instead, whichever shape it has: the
// swap then only changes which operand those loops read transposed, not the result.
inline constexpr int64_t kNarrowTransposedLhsMinK = 16;

// One operation oneDNN applies to the result of the product, in order. kRelu6 is min(max(x, 0), 6)
// (tf.nn.relu6, jax.nn.relu6, Keras's ReLU(6.0)); like kRelu it keeps a NaN, which no post-op
// of oneDNN's does, so the thunk applies both itself (onednn_thunks.cc: own_post_ops).
struct OneDnnPostOp {
  enum class Kind { kAdd, kRelu, kGeluTanh, kGeluErf, kLinear, kLogistic, kRelu6 };
  // How an added tensor is laid over the result.
  enum class Addend { kFull, kLastDimension, kScalar };
  Kind kind = Kind::kLinear;
  // kLinear: alpha * x + beta. A zero beta adds nothing: it is computed as x + (-0)
  // (LinearPostOpBeta), the one addend that leaves every x as it is, where x + (+0) would turn
  // a -0 (a GELU's result far left of zero, then scaled) into +0 and differ from the evaluator.
  // So the matcher takes no shift by a zero constant (x + 0 does turn -0 into +0).
  double alpha = 1, beta = 0;
  int64_t parameter = -1;        // kAdd: the fusion operand added
  Addend addend = Addend::kFull;  // kAdd
};

// The f32 beta a linear post-op is computed with (oneDNN's eltwise_linear and the thunk's own
// loops alike): -0 for a zero beta, which adds nothing (see OneDnnPostOp::beta).
inline float LinearPostOpBeta(const OneDnnPostOp& op) {
  return op.beta == 0 ? -0.0f : static_cast<float>(op.beta);
}

// What a oneDNN fusion computes, read from its fused computation.
struct OneDnnCall {
  bool is_convolution = false;
  const HloInstruction* core = nullptr;  // the dot or convolution inside the fused computation
  int64_t lhs_parameter = -1, rhs_parameter = -1;  // fusion operands of the product
  // The operand is stored with its two minor dimensions swapped ([.., k, m] for the lhs,
  // [.., n, k] for the rhs) and read in place.
  bool lhs_transposed = false, rhs_transposed = false;
  // A product's operand that is a slice of the fusion operand lying whole in it (one batch
  // element of a chain batched-chain-split took apart: [1, m, k] of [B, m, k]) is read in place
  // from this many elements in, instead of from a copy the slice would make.
  int64_t lhs_offset = 0, rhs_offset = 0;
  std::vector<OneDnnPostOp> post_ops;
  // A convolution: which oneDNN pass computes it and how its operands are read (post-ops only
  // on the forward pass).
  OneDnnConvolution convolution;

  // "matmul(lhs^T) + add[last dim] + gelu_tanh", as thunk listings and decisions show it.
  std::string ToString() const;
};

// The post-op's name as oneDNN calls its algorithm ("gelu_tanh", "binary_add", "linear", ...).
std::string OneDnnPostOpName(const OneDnnPostOp& op);

// Whether the CPU runtime's thunk applies `op` itself, with the post-ops after it, to each part
// of the product once oneDNN has written it (onednn_thunks.cc: own_post_ops) rather than in
// oneDNN's call: ReLU and ReLU6 (to keep a NaN), and on a CPU with AVX-512 the tanh GELU (its
// own 16-wide loop is some 2.5x oneDNN 2.6's). The rewriter ends a chain before a full-shape
// addend after such a post-op, which may share the output's buffer.
bool OneDnnPostOpAppliedByThunk(const OneDnnPostOp& op);

// What `fusion` computes when it is a kCustom fusion this pass makes (and oneDNN can run);
// nullopt otherwise.
std::optional<OneDnnCall> MatchOneDnnCall(const HloInstruction& fusion);

class OneDnnRewriter : public HloPass {
 public:
  std::string_view name() const override { return "onednn-rewriter"; }
  StatusOr<bool> Run(HloModule& module) override;

  // The decisions of the last Run: each absorbed instruction (fused, kind kCustom, the post-op
  // as note) and each dot or convolution left to Eigen with the reason.
  const std::vector<FusionDecision>& decisions() const { return decisions_; }

 private:
  StatusOr<bool> RewriteComputation(HloComputation& computation);

  std::vector<FusionDecision> decisions_;
};

}  // namespace xlens
