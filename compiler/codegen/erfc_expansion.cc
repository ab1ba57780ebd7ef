#include "compiler/codegen/erfc_expansion.h"

#include <bit>
#include <functional>
#include <initializer_list>
#include <vector>

namespace xlens::codegen {
namespace {

using Is = std::function<bool(const HloInstruction*)>;

// The expansion's constants (StableHLO's CHLO legalization: materializeErfcApproximationF32 and
// the two approximations it selects between, for |x| below and above 1), highest power first,
// as JAX's HLO prints them: each is exactly the f32 the legalization rounded to.
constexpr float kErfSmall[] = {7.85386146e-05f, -0.000801019371f, 0.00518832775f,
                               -0.0268538129f,  0.112835854f,     -0.37612626f,
                               1.12837911f};
constexpr float kErfcBelowTwo[] = {0.0232682f,    -0.138703942f, 0.368742466f,
                                   -0.582473278f, 0.621000469f,  -0.494451523f,
                                   0.340488f,     -0.274112701f, 0.563825965f};
constexpr float kErfcFromTwo[] = {-10.477664f,  12.9772f,    -7.49551868f,
                                  2.92101908f,  -1.01526523f, 0.42184633f,
                                  -0.282076746f, 0.564189494f};
// -log(FLT_MAX): where e^(-z^2) underflows the expansion returns 0.
constexpr float kUnderflow = -88.7228394f;

bool Op(const HloInstruction* h, HloOpcode op, int operands) {
  return h != nullptr && h->opcode() == op && h->operand_count() == operands &&
         h->shape().IsArray() && (h->shape().element_type() == PrimitiveType::F32 ||
                                  h->shape().element_type() == PrimitiveType::PRED);
}

// A rank-0 f32 constant equal to `value` bit for bit, or a broadcast of one.
bool Constant(const HloInstruction* h, float value) {
  if (h != nullptr && h->opcode() == HloOpcode::kBroadcast && h->operand_count() == 1) {
    h = h->operand(0);
  }
  if (h == nullptr || h->opcode() != HloOpcode::kConstant || !h->has_literal() ||
      !h->shape().IsArray() || h->shape().rank() != 0 ||
      h->shape().element_type() != PrimitiveType::F32 || h->literal().is_elided() ||
      h->literal().is_text_only()) {
    return false;
  }
  const float got = static_cast<float>(h->literal().GetAsDouble(0));
  return std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(value);
}

// A binary `op` whose operands are `a` and `b` in either order.
bool Commuted(const HloInstruction* h, HloOpcode op, const Is& a, const Is& b) {
  if (!Op(h, op, 2)) return false;
  return (a(h->operand(0)) && b(h->operand(1))) || (a(h->operand(1)) && b(h->operand(0)));
}

Is IsConstant(float value) {
  return [value](const HloInstruction* h) { return Constant(h, value); };
}
Is IsSame(const HloInstruction* z) {
  return [z](const HloInstruction* h) { return h == z; };
}
Is IsAbs(const HloInstruction* z) {
  return [z](const HloInstruction* h) { return Op(h, HloOpcode::kAbs, 1) && h->operand(0) == z; };
}
Is IsSquare(const HloInstruction* z) {
  return [z](const HloInstruction* h) {
    return Op(h, HloOpcode::kMultiply, 2) && h->operand(0) == z && h->operand(1) == z;
  };
}

// `lhs` < `rhs`, in the order written.
bool LessThan(const HloInstruction* h, const Is& lhs, const Is& rhs) {
  return Op(h, HloOpcode::kCompare, 2) &&
         h->comparison_direction == ComparisonDirection::kLt && lhs(h->operand(0)) &&
         rhs(h->operand(1));
}

// c[0] var^(n-1) + ... + c[n-1] by Horner's rule: ((c[0] var + c[1]) var + ...) + c[n-1].
bool Horner(const HloInstruction* h, const Is& var, const float* c, int n) {
  if (n == 1) return Constant(h, c[0]);
  if (!Op(h, HloOpcode::kAdd, 2)) return false;
  const Is rest = [&](const HloInstruction* m) {
    return Commuted(m, HloOpcode::kMultiply, var,
                    [&](const HloInstruction* p) { return Horner(p, var, c, n - 1); });
  };
  return Commuted(h, HloOpcode::kAdd, rest, IsConstant(c[n - 1]));
}

template <size_t N>
Is IsHorner(const Is& var, const float (&c)[N]) {
  return [var, &c](const HloInstruction* h) { return Horner(h, var, c, static_cast<int>(N)); };
}

}  // namespace

const HloInstruction* MatchErfcExpansionF32(const HloInstruction& root) {
  // select(|z| < 1, 1 - z T(z^2), select(z < 0, 2 - y, y))
  if (!Op(&root, HloOpcode::kSelect, 3) || root.shape().element_type() != PrimitiveType::F32) {
    return nullptr;
  }
  const HloInstruction* small_test = root.operand(0);
  if (!Op(small_test, HloOpcode::kCompare, 2) || !Op(small_test->operand(0), HloOpcode::kAbs, 1)) {
    return nullptr;
  }
  const HloInstruction* z = small_test->operand(0)->operand(0);
  if (z->shape().dimensions() != root.shape().dimensions() ||
      z->shape().element_type() != PrimitiveType::F32 ||
      !LessThan(small_test, IsAbs(z), IsConstant(1.0f))) {
    return nullptr;
  }
  const Is z_times_t = [&](const HloInstruction* h) {
    return Commuted(h, HloOpcode::kMultiply, IsSame(z), IsHorner(IsSquare(z), kErfSmall));
  };
  const HloInstruction* small = root.operand(1);
  if (!Op(small, HloOpcode::kSubtract, 2) || !Constant(small->operand(0), 1.0f) ||
      !z_times_t(small->operand(1))) {
    return nullptr;
  }
  const HloInstruction* large = root.operand(2);
  if (!Op(large, HloOpcode::kSelect, 3) ||
      !LessThan(large->operand(0), IsSame(z), IsConstant(0.0f))) {
    return nullptr;
  }
  // y = select(-z^2 < -88.72, 0, e^(-z^2) (1 / |z|) select(|z| < 2, P(1/z^2), R(1/z^2))), the
  // same instruction in both arms of the sign's select.
  const HloInstruction* y = large->operand(2);
  const HloInstruction* reflected = large->operand(1);
  if (!Op(reflected, HloOpcode::kSubtract, 2) || !Constant(reflected->operand(0), 2.0f) ||
      reflected->operand(1) != y) {
    return nullptr;
  }
  const Is minus_square = [&](const HloInstruction* h) {
    return Op(h, HloOpcode::kNegate, 1) && IsSquare(z)(h->operand(0));
  };
  if (!Op(y, HloOpcode::kSelect, 3) ||
      !LessThan(y->operand(0), minus_square, IsConstant(kUnderflow)) ||
      !Constant(y->operand(1), 0.0f)) {
    return nullptr;
  }
  const Is reciprocal_square = [&](const HloInstruction* h) {
    return Op(h, HloOpcode::kDivide, 2) && Constant(h->operand(0), 1.0f) &&
           IsSquare(z)(h->operand(1));
  };
  const Is gaussian_over_abs = [&](const HloInstruction* h) {
    return Commuted(
        h, HloOpcode::kMultiply,
        [&](const HloInstruction* e) {
          return Op(e, HloOpcode::kExp, 1) && minus_square(e->operand(0));
        },
        [&](const HloInstruction* d) {
          return Op(d, HloOpcode::kDivide, 2) && Constant(d->operand(0), 1.0f) &&
                 IsAbs(z)(d->operand(1));
        });
  };
  const Is rational = [&](const HloInstruction* h) {
    return Op(h, HloOpcode::kSelect, 3) &&
           LessThan(h->operand(0), IsAbs(z), IsConstant(2.0f)) &&
           IsHorner(reciprocal_square, kErfcBelowTwo)(h->operand(1)) &&
           IsHorner(reciprocal_square, kErfcFromTwo)(h->operand(2));
  };
  if (!Commuted(y->operand(2), HloOpcode::kMultiply, gaussian_over_abs, rational)) return nullptr;
  return z;
}

const HloInstruction* MatchOnePlusOrMinusErfF32(const HloInstruction& h, bool* negated) {
  if (!Op(&h, h.opcode(), 2) || h.shape().element_type() != PrimitiveType::F32) return nullptr;
  const auto erf = [&](const HloInstruction* e) -> const HloInstruction* {
    return Op(e, HloOpcode::kErf, 1) && e->shape().element_type() == PrimitiveType::F32 &&
                   e->operand(0)->shape().dimensions() == h.shape().dimensions()
               ? e->operand(0)
               : nullptr;
  };
  if (h.opcode() == HloOpcode::kAdd) {
    *negated = true;
    if (Constant(h.operand(0), 1.0f)) return erf(h.operand(1));
    if (Constant(h.operand(1), 1.0f)) return erf(h.operand(0));
  } else if (h.opcode() == HloOpcode::kSubtract && Constant(h.operand(0), 1.0f)) {
    *negated = false;
    return erf(h.operand(1));
  }
  return nullptr;
}

}  // namespace xlens::codegen
