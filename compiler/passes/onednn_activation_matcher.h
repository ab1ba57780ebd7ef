// Recognises the activations oneDNN can apply after a matrix product by the structure of the
// HLO, not by sampling what it computes: an elementwise region on top of a value matches when it
// is, up to the order of the operands of commutative operations and the grouping of sums and
// products, one of the forms JAX and
// TensorFlow emit (ReLU; ReLU6 as min(max(x, 0), 6) or clamp(0, x, 6); tanh GELU with x*x*x or pow(x, 3); erf GELU with an erf instruction or
// with JAX's expansion of erfc; the logistic function as an instruction or as 1 / (1 + exp(-x))),
// with bit-identical f32 constants, or a chain of affine steps with scalar constants (scaling,
// shifting, negation). A form that agrees with an activation only at some points, or differs
// by one constant or one operand order of a non-commutative operation, is not absorbed.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/passes/onednn_rewriter.h"

namespace xlens {

// An activation on top of a value: what oneDNN applies, the instructions it absorbs (with the
// scalar constants and broadcasts they read) and the instruction whose value it is.
struct ActivationMatch {
  OneDnnPostOp op;
  std::string form;  // the template that matched ("gelu_tanh(jax)", "linear", ...)
  std::vector<HloInstruction*> members;
  HloInstruction* root = nullptr;
};

// The largest activation on top of `v` whose every instruction but the root is read only
// inside it (`v` included); nullopt when there is none.
std::optional<ActivationMatch> MatchOneDnnActivation(HloInstruction* v);

// The names of the forms recognised, in the order they are tried (for tests and listings).
std::vector<std::string> OneDnnActivationForms();

}  // namespace xlens
