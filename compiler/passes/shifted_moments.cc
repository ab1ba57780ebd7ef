#include "compiler/passes/shifted_moments.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>
#include <vector>

#include "compiler/passes/hlo_creation_utils.h"
#include "compiler/passes/sum_pattern.h"
#include "compiler/passes/sum_rewriting.h"

namespace xlens {
namespace {

// The shift is the mean of 1/kSampleShare of the batch (at least one entry of the dimension it
// is taken along): d^2 / var stays under kSampleShare, and its sum reads that share of x.
constexpr int64_t kSampleShare = 32;

// A broadcast of a scalar constant (any shape), and its value.
std::optional<double> BroadcastScalar(const HloInstruction& instruction) {
  if (instruction.opcode() != HloOpcode::kBroadcast) return std::nullopt;
  const HloInstruction& scalar = *instruction.operand(0);
  if (scalar.opcode() != HloOpcode::kConstant || !scalar.has_literal()) return std::nullopt;
  const Literal& literal = scalar.literal();
  if (literal.is_elided() || literal.is_text_only() || !literal.shape().IsArray() ||
      literal.shape().rank() != 0) {
    return std::nullopt;
  }
  return literal.GetAsDouble(0);
}

// A sum that the shift may rewrite (the mean's, and each moment's): one of F32 or F64. After the
// cancellation the variance is off by up to about 32 ulps (kSampleShare), 2e-6 relative in F32 but
// 1.6% in F16 and 12% in BF16. From +0 only: a sum from -0 is -0 exactly where every addend is,
// which K + d and sum(v * g) - d * sum(g) cannot tell (x of -0s: K = -0, v = +0, d = +0, and the
// mean K + d is +0 where sum(x) / n is -0). From +0 no sum is -0, nor a difference of one and
// anything (a - b is -0 only where a is), so the rewritten moments and mean keep zero's sign.
bool IsShiftableSum(const HloInstruction& reduce) {
  if (!IsSumFromZero(reduce)) return false;  // (before its operand is read: it may have none)
  const PrimitiveType type = reduce.operand(0)->shape().element_type();
  return (type == PrimitiveType::F32 || type == PrimitiveType::F64) &&
         !std::signbit(reduce.operand(1)->literal().GetAsDouble(0));
}

std::vector<int64_t> MajorToMinorOf(const Shape& shape) {
  std::vector<int64_t> order;
  if (shape.has_layout() &&
      static_cast<int64_t>(shape.layout().minor_to_major.size()) == shape.rank()) {
    order.assign(shape.layout().minor_to_major.rbegin(), shape.layout().minor_to_major.rend());
  } else {
    for (int64_t d = 0; d < shape.rank(); ++d) order.push_back(d);
  }
  return order;
}

class Shifter {
 public:
  explicit Shifter(HloComputation* computation) : computation_(computation) {}

  StatusOr<bool> Run() {
    bool changed = false;
    // A rewrite removes the sums it replaced with the operands only they read, which come after
    // the mean in post order: what is still to be visited is checked against what is left.
    const std::vector<HloInstruction*> order = computation_->MakeInstructionPostOrder();
    std::unordered_set<const HloInstruction*> live(order.begin(), order.end());
    for (HloInstruction* mean : order) {
      if (!live.count(mean)) continue;
      ASSIGN_OR_RETURN(bool rewritten, Rewrite(mean));
      if (!rewritten) continue;
      changed = true;
      const std::vector<HloInstruction*> left = computation_->instructions();
      live = std::unordered_set<const HloInstruction*>(left.begin(), left.end());
    }
    return changed;
  }

 private:
  StatusOr<bool> Rewrite(HloInstruction* mean) {
    // mean = sum(x) / n, n the number of elements each output adds.
    if (mean->opcode() != HloOpcode::kDivide || HasControlDependencies(*mean) ||
        !IsShiftableSum(*mean->operand(0))) {
      return false;
    }
    HloInstruction* sum = mean->operand(0);
    HloInstruction* x = sum->operand(0);
    const Shape& shape = x->shape();
    const std::vector<int64_t> reduced = SortedDimensions(sum->dimensions());
    auto is_reduced = [&](int64_t d) {
      return std::binary_search(reduced.begin(), reduced.end(), d);
    };
    int64_t n = 1;
    for (int64_t d : reduced) n *= shape.dimensions(d);
    const std::optional<double> divisor = BroadcastScalar(*mean->operand(1));
    const std::vector<int64_t> order = MajorToMinorOf(shape);
    if (!divisor || *divisor != static_cast<double>(n) || n < 2 || is_reduced(order.back())) {
      return false;
    }
    // The dimension the shift's sample is taken along: the major-most reduced one of 2 or more.
    int64_t along = -1;
    for (int64_t d : order) {
      if (is_reduced(d) && shape.dimensions(d) >= 2) {
        along = d;
        break;
      }
    }
    if (along < 0) return false;
    std::vector<int64_t> kept;
    for (int64_t d = 0; d < shape.rank(); ++d) {
      if (!is_reduced(d)) kept.push_back(d);
    }

    // x - broadcast(mean) along the kept dimensions, and everything that depends on the mean.
    std::unordered_set<const HloInstruction*> centred;
    for (HloInstruction* user : mean->users()) {
      if (user->opcode() != HloOpcode::kBroadcast || !user->dimensions_attr ||
          *user->dimensions_attr != kept || !shape_util::SameDimensions(user->shape(), shape)) {
        continue;
      }
      for (HloInstruction* difference : user->users()) {
        if (difference->opcode() == HloOpcode::kSubtract && difference->operand(0) == x &&
            difference->operand(1) == user && !HasControlDependencies(*difference)) {
          centred.insert(difference);
        }
      }
    }
    if (centred.empty()) return false;
    std::unordered_set<const HloInstruction*> dependent;
    std::vector<const HloInstruction*> stack = {mean};
    while (!stack.empty()) {
      const HloInstruction* at = stack.back();
      stack.pop_back();
      if (!dependent.insert(at).second) continue;
      stack.insert(stack.end(), at->users().begin(), at->users().end());
    }

    // The sums over the same dimensions of products of one or two centred factors.
    // A sum's operand as a signed product: how many of its factors are x - broadcast(mean), and
    // the others.
    struct Moment {
      HloInstruction* reduce;
      int centred = 0;
      std::vector<HloInstruction*> others;
      bool negated = false;
    };
    std::vector<Moment> moments;
    for (HloInstruction* other : computation_->MakeInstructionPostOrder()) {
      if (other == sum || !IsShiftableSum(*other) || !dependent.count(other) ||
          SortedDimensions(other->dimensions()) != reduced || !(other->shape() == sum->shape()) ||
          !shape_util::SameDimensions(other->operand(0)->shape(), shape)) {
        continue;
      }
      const SignedProduct product = CollectProduct(other->operand(0), shape);
      if (!product.complete()) continue;
      Moment moment{other, 0, {}, product.negated};
      for (HloInstruction* factor : product.factors) {
        if (centred.count(factor)) {
          ++moment.centred;
        } else {
          moment.others.push_back(factor);
        }
      }
      if (moment.centred < 1 || moment.centred > 2 ||
          std::any_of(moment.others.begin(), moment.others.end(),
                      [&](const HloInstruction* f) { return dependent.count(f) > 0; })) {
        continue;
      }
      moments.push_back(std::move(moment));
    }
    if (moments.empty()) return false;

    // K: the mean of the sample; v = x - K; d = sum(v) / n; the mean is K + d.
    const int64_t taken = (shape.dimensions(along) + kSampleShare - 1) / kSampleShare;
    Shape sample_shape = shape;
    sample_shape.set_dimensions(along, taken);
    auto slice = HloInstruction::CreateUnary(HloOpcode::kSlice, sample_shape, x);
    slice->has_slice = true;
    slice->slice_starts.assign(shape.rank(), 0);
    slice->slice_limits = shape.dimensions();
    slice->slice_limits[along] = taken;
    slice->slice_strides.assign(shape.rank(), 1);
    HloInstruction* sample =
        NewSumLike(*computation_, AddLike(*computation_, std::move(slice), *x), *sum);
    const Shape out = sum->shape();
    // A sample that holds an infinity or a NaN shifts by zero: x - K would be NaN or infinite in
    // every element, where the mean is sum(x) / n (an infinity, say) without the shift. (The
    // test is on the sample's sum: a divide read twice would be computed apart from the sum, and
    // the sweep over x would wait for it in a kernel of its own.)
    HloInstruction* finite_sample =
        Select(IsFinite(sample, *mean), sample, Constant(out, 0), *mean);
    HloInstruction* shift = Binary(HloOpcode::kDivide, out, finite_sample,
                                   Constant(out, n / shape.dimensions(along) * taken), *mean);
    HloInstruction* v =
        Binary(HloOpcode::kSubtract, shape, x,
               AddLike(*computation_, CreateBroadcast(shape, shift, kept), *mean), *mean);
    HloInstruction* sum_v = FindOrAddSumLike(*computation_, v, *sum);
    HloInstruction* d = Binary(HloOpcode::kDivide, out, sum_v, Constant(out, n), *mean);
    HloInstruction* n_out = Constant(out, n);

    for (const Moment& moment : moments) {
      const HloInstruction& origin = *moment.reduce;
      HloInstruction* g = nullptr;
      for (HloInstruction* factor : moment.others) {
        g = g == nullptr ? factor : Binary(HloOpcode::kMultiply, shape, g, factor, origin);
      }
      auto times_g = [&](HloInstruction* a) {
        return g == nullptr ? a : Binary(HloOpcode::kMultiply, shape, a, g, origin);
      };
      // sum(g), or n where there is no g.
      HloInstruction* sum_g = g == nullptr ? n_out : FindOrAddSumLike(*computation_, g, *sum);
      HloInstruction* sum_vg =
          g == nullptr ? sum_v : FindOrAddSumLike(*computation_, times_g(v), *sum);
      HloInstruction* result;
      HloInstruction* sum_vvg = nullptr;
      if (moment.centred == 1) {
        // sum(v * g) - d * sum(g)
        result = Binary(HloOpcode::kSubtract, out, sum_vg,
                        Binary(HloOpcode::kMultiply, out, d, sum_g, origin), origin);
      } else {
        // sum(v^2 * g) - 2d * sum(v * g) + d^2 * sum(g)
        HloInstruction* vv = Binary(HloOpcode::kMultiply, shape, v, v, origin);
        sum_vvg = FindOrAddSumLike(*computation_, times_g(vv), *sum);
        HloInstruction* two_d = Binary(HloOpcode::kAdd, out, d, d, origin);
        HloInstruction* dd = Binary(HloOpcode::kMultiply, out, d, d, origin);
        result = Binary(HloOpcode::kAdd, out,
                        Binary(HloOpcode::kSubtract, out, sum_vvg,
                               Binary(HloOpcode::kMultiply, out, two_d, sum_vg, origin), origin),
                        Binary(HloOpcode::kMultiply, out, dd, sum_g, origin), origin);
      }
      // The unrewritten sums' infinities and NaNs, per channel. An infinity in g makes sum(g)
      // infinite and the difference of the two infinite terms NaN, where sum((x - mean) * g) is
      // infinite: there the moment is sum(v * g) (sum(v^2 * g)). An infinity or a NaN in x makes
      // d non-finite and the unrewritten sums NaN (x - mean is NaN where x is the infinite
      // mean): there the moment is d - d, a NaN. Both are tests on [C] values, after the sweep.
      if (g != nullptr) {
        result = Select(IsFinite(sum_g, origin), result,
                        moment.centred == 1 ? sum_vg : sum_vvg, origin);
      }
      result = Select(IsFinite(d, origin), result,
                      Binary(HloOpcode::kSubtract, out, d, d, origin), origin);
      if (moment.negated) {
        // The negation of a sum from +0 is -0 where the sum is +0, where the unrewritten sum of
        // the negated terms is +0: adding +0 turns -0 into +0 and leaves every other value.
        result = AddLike(*computation_,
                         HloInstruction::CreateUnary(HloOpcode::kNegate, out, result), origin);
        result = Binary(HloOpcode::kAdd, out, result, Constant(out, 0), origin);
      }
      RETURN_IF_ERROR(computation_->ReplaceInstruction(moment.reduce, result));
    }
    RETURN_IF_ERROR(computation_->ReplaceInstruction(
        mean, Binary(HloOpcode::kAdd, out, shift, d, *mean)));
    return true;
  }

  // `value` in every element of `shape`.
  HloInstruction* Constant(const Shape& shape, int64_t value) {
    HloInstruction* scalar = computation_->AddInstruction(
        CreateScalarConstant(Shape::Scalar(shape.element_type()), static_cast<double>(value)));
    return computation_->AddInstruction(CreateBroadcast(shape, scalar, {}));
  }

  // Whether each element of `value` is finite.
  HloInstruction* IsFinite(HloInstruction* value, const HloInstruction& origin) {
    return AddLike(*computation_, HloInstruction::CreateUnary(
                   HloOpcode::kIsFinite,
                   shape_util::ChangeElementType(value->shape(), PrimitiveType::PRED), value),
               origin);
  }

  HloInstruction* Select(HloInstruction* predicate, HloInstruction* on_true,
                         HloInstruction* on_false, const HloInstruction& origin) {
    return AddLike(*computation_, CreateSelect(predicate, on_true, on_false), origin);
  }

  HloInstruction* Binary(HloOpcode opcode, const Shape& shape, HloInstruction* lhs,
                         HloInstruction* rhs, const HloInstruction& origin) {
    return AddLike(*computation_, HloInstruction::CreateBinary(opcode, shape, lhs, rhs), origin);
  }

  HloComputation* computation_;
};

}  // namespace

StatusOr<bool> ShiftedMoments::Run(HloModule& module) {
  bool changed = false;
  for (HloComputation* computation : module.computations()) {
    if (computation->IsFusionComputation()) continue;
    ASSIGN_OR_RETURN(bool rewritten, Shifter(computation).Run());
    changed |= rewritten;
  }
  return changed;
}

}  // namespace xlens
