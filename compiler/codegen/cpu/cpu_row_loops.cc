#include "compiler/codegen/cpu/cpu_row_loops.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include <llvm/ADT/APFloat.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Metadata.h>
#include <llvm/Support/MathExtras.h>

#include "compiler/codegen/fast_math.h"
#include "compiler/codegen/llvm_ir_util.h"
#include "compiler/codegen/scalar_ops.h"
#include "compiler/passes/sum_pattern.h"

namespace xlens::codegen {

using llvm::Value;

namespace {

// Asks the loop vectorizer for `count` interleaved copies of the loop whose header is `header`
// (several independent accumulators per reduction), and with `no_unroll` the unroller for none.
void RequestInterleave(llvm::BasicBlock* header, unsigned count, bool no_unroll) {
  if (header == nullptr) return;
  llvm::LLVMContext& c = header->getContext();
  std::vector<llvm::Metadata*> hints = {
      LoopHint(c, "llvm.loop.interleave.count", llvm::ConstantInt::get(llvm::Type::getInt32Ty(c), count))};
  if (no_unroll) hints.push_back(LoopHint(c, "llvm.loop.unroll.disable"));
  AddLoopHints(header, hints);
}

// Whether `r` is a maximum of one float operand (f32 or f64, computed as such) that the row's
// loop may take without NaN semantics: its reducer is maximum(p0, p1).
bool IsFloatMaximum(const HloInstruction* r) {
  if (r->operand_count() != 2 || !r->shape().IsArray()) return false;
  const PrimitiveType type = r->shape().element_type();
  if (type != PrimitiveType::F32 && type != PrimitiveType::F64) return false;
  const HloInstruction* root = r->to_apply()->root_instruction();
  return root->opcode() == HloOpcode::kMaximum &&
         root->operand(0)->opcode() == HloOpcode::kParameter &&
         root->operand(1)->opcode() == HloOpcode::kParameter &&
         root->operand(0) != root->operand(1);
}

// An f16 sum over a row of at least this many elements and at most kShortRowMaxLength (its
// innermost loop, unrolled whole) adds element i into lane i mod W of a vector of W lanes (W the
// power of two at or below the length), started at -0, then sums the lanes as a tree
// (llvm.vector.reduce.fadd, reassociated, from -0) and adds the initial value last: a row of 16
// is one vector load and four shuffles and adds. The sign of zero is kept without nsz: a lane,
// and the tree, is -0 only where all its elements are, and the initial value is added as the
// reducer would. Unrolled whole as a chain in the reducer's order (which the SLP vectorizer does
// not reassociate without nsz), the loop vectorizer took 4 rows a step. f16[65536,L] row sums,
// best of 200-300 runs, 3-6 alternating rounds, load 4-7.5: L = 16 0.066 -> 0.028 ms, 15 0.080
// -> 0.054, 14 0.071 -> 0.038, 13 0.062 -> 0.047, 12 0.047 -> 0.028, 11 0.039 -> 0.039, 10 0.038
// -> 0.033; shorter rows were faster across rows (9: 0.027 against 0.034, 8: 0.017 against
// 0.022, 3: 0.004 against 0.013). A row over more than one dimension whose outer loops are not
// unrolled picks its lane at run time (still one add an element).
constexpr int64_t kShortHalfSumMinLength = 10;

// Whether the sign of a zero `reducer` returns is unspecified: a maximum's or a minimum's
// (of -0 and +0, either), not a sum's (-0 + -0 is -0).
bool SignOfZeroIsFree(const HloComputation* reducer) {
  const HloOpcode op = reducer->root_instruction()->opcode();
  return op == HloOpcode::kMaximum || op == HloOpcode::kMinimum;
}

// Whether `v` is -inf at every element: a constant or a broadcast of one.
bool IsNegativeInfinity(const HloInstruction* v) {
  if (v->opcode() == HloOpcode::kBroadcast) v = v->operand(0);
  if (v->opcode() != HloOpcode::kConstant || !v->has_literal() || v->literal().element_count() != 1) {
    return false;
  }
  return v->literal().GetAsDouble(0) == -std::numeric_limits<double>::infinity();
}

// Whether `m`, a shift that ExpOfShiftByMaximum takes (at least each row's maximum), is each
// row's own maximum: its reduce-max starts from -inf, and any maximum around it is with -inf only
// (JAX's log_softmax). A larger initial value or operand would shift every term of a row below 1,
// down to the exponential's clamp at -110: a row of 200's, or a row all -inf whose maximum is the
// lowest float where it started there (x - lowest is -inf for each element, where x - (-inf) is
// NaN and propagates).
bool IsOwnRowMaximum(const HloInstruction* m, int depth = 0) {
  if (m->opcode() == HloOpcode::kMaximum) {
    if (depth >= 4) return false;
    if (IsNegativeInfinity(m->operand(1))) return IsOwnRowMaximum(m->operand(0), depth + 1);
    return IsNegativeInfinity(m->operand(0)) && IsOwnRowMaximum(m->operand(1), depth + 1);
  }
  return m->opcode() == HloOpcode::kReduce && m->operand_count() == 2 && IsNegativeInfinity(m->operand(1));
}

// The exponential that `r` sums: an f32 sum, from zero, of exp(x - max(x)) over the maximum's
// rows, the maximum each row's own (IsOwnRowMaximum), so that each term is at most 1, one of
// them e^0, and the sum 1 or more (or NaN); else null.
const HloInstruction* ExpSumOfShift(llvm::IRBuilder<>& b, const HloInstruction* r) {
  if (r->operand_count() != 2 || r->shape().element_type() != PrimitiveType::F32 || !UseInlineTranscendentals(b)) {
    return nullptr;
  }
  const HloInstruction* root = r->to_apply()->root_instruction();
  if (root->opcode() != HloOpcode::kAdd || root->operand(0)->opcode() != HloOpcode::kParameter ||
      root->operand(1)->opcode() != HloOpcode::kParameter || root->operand(0) == root->operand(1)) {
    return nullptr;
  }
  const HloInstruction* exp = r->operand(0);
  const HloInstruction* init = r->operand(1);
  if (exp->opcode() != HloOpcode::kExp || exp->shape().element_type() != PrimitiveType::F32 ||
      !ExpOfShiftByMaximum(*exp) || init->opcode() != HloOpcode::kConstant) {
    return nullptr;
  }
  // The maximum is over the rows this sum adds up.
  const HloInstruction* broadcast = exp->operand(0)->operand(1);
  return broadcast->dimensions() == KeptDimensions(*r) && IsOwnRowMaximum(broadcast->operand(0)) ? exp : nullptr;
}

// The exponential that `r` sums, where the sum may take its terms before their last multiply and
// scale itself once after the loop (EmitFastExpF32Scaled): ExpSumOfShift's, read by nothing else;
// else null. Terms that the multiply would round as subnormals count for nothing either way
// against a sum of 1 or more. That multiply is one of the eleven operations of each exponential
// on the multiply ports, which bind the loop: log-softmax over f32[512,1000] on one core, best of
// 2000 runs, 0.137 -> 0.129 ms.
const HloInstruction* ScaledExpSum(llvm::IRBuilder<>& b, const HloInstruction* r) {
  const HloInstruction* exp = ExpSumOfShift(b, r);
  return exp != nullptr && exp->user_count() == 1 ? exp : nullptr;
}

// The exponential that `r` sums where it is read only by that sum and by divisions by it, each
// e / broadcast(sum) (softmax's): the row cache and the sum may then both hold the terms before
// their last multiply (e 2^34), which cancels in the quotient; else null. Each term is then at
// most 2^34 and a row of n of them sums to at most n 2^34, far from overflow; a term that the
// multiply would make subnormal (below 2^-126 against a sum of 1 or more) gives a quotient
// below 2^-126 either way.
const HloInstruction* UnscaledExpQuotient(llvm::IRBuilder<>& b, const HloInstruction* r) {
  const HloInstruction* exp = ExpSumOfShift(b, r);
  if (exp == nullptr || exp == exp->parent()->root_instruction() ||
      r == r->parent()->root_instruction() || r->user_count() == 0) {
    return nullptr;
  }
  const std::vector<int64_t> kept = KeptDimensions(*r);
  for (const HloInstruction* broadcast : r->users()) {
    if (broadcast->opcode() != HloOpcode::kBroadcast || broadcast->dimensions() != kept ||
        broadcast == broadcast->parent()->root_instruction() || broadcast->user_count() == 0 ||
        broadcast->shape().dimensions() != exp->shape().dimensions()) {
      return nullptr;
    }
    for (const HloInstruction* divide : broadcast->users()) {
      if (divide->opcode() != HloOpcode::kDivide || divide->operand(0) != exp || divide->operand(1) != broadcast) {
        return nullptr;
      }
    }
  }
  for (const HloInstruction* user : exp->users()) {
    if (user == r) continue;
    if (user->opcode() != HloOpcode::kDivide || user->operand(0) != exp ||
        user->operand(1)->opcode() != HloOpcode::kBroadcast || user->operand(1)->operand(0) != r) {
      return nullptr;
    }
  }
  return exp;
}

}  // namespace

namespace {

// The hints of RequestOneVector, which RequestOneMaskedVector extends.
std::vector<llvm::Metadata*> OneVectorHints(llvm::LLVMContext& c, unsigned width) {
  llvm::Type* i32 = llvm::Type::getInt32Ty(c);
  return {LoopHint(c, "llvm.loop.vectorize.width", llvm::ConstantInt::get(i32, width)),
          LoopHint(c, "llvm.loop.vectorize.enable", llvm::ConstantInt::getTrue(c)),
          LoopHint(c, "llvm.loop.interleave.count", llvm::ConstantInt::get(i32, 1)),
          LoopHint(c, "llvm.loop.unroll.disable")};
}

// Whether LLVM's loop vectorizer makes vectors of `type`'s elements and of their reductions:
// f32, f64, the integers and pred. Not f16, bf16 or the f8 types, whose short rows asked for one
// masked vector it leaves as scalar loops (their sums are reassociated all the same, below).
bool VectorizedElementType(PrimitiveType type) {
  return type == PrimitiveType::F32 || type == PrimitiveType::F64 || type == PrimitiveType::PRED ||
         IsIntegralType(type);
}

}  // namespace

void RequestOneVector(llvm::BasicBlock* header, unsigned width) {
  if (header == nullptr) return;
  AddLoopHints(header, OneVectorHints(header->getContext(), width));
}

bool RowsInOrderAcross(const std::vector<const HloInstruction*>& reductions, int64_t length) {
  if (reductions.empty() || length <= kShortRowMaxLength) return false;
  return std::all_of(reductions.begin(), reductions.end(), [](const HloInstruction* r) {
    return r->operand_count() == 2 && r->shape().IsArray() && r->shape().element_type() == PrimitiveType::BF16 &&
           IsAddReducer(r->to_apply());
  });
}

unsigned ShortRowVectorWidth(int64_t length) {
  if (length < kShortRowMinLength || length > kShortRowMaxLength) return 0;
  return static_cast<unsigned>(llvm::PowerOf2Ceil(static_cast<uint64_t>(length)));
}

bool ShortRowVectorizes(const std::vector<const HloInstruction*>& reductions,
                        const std::vector<PrimitiveType>& element_types) {
  for (PrimitiveType type : element_types) {
    if (!VectorizedElementType(type)) return false;
  }
  for (const HloInstruction* r : reductions) {
    // One operand and its initial value (a variadic reduction, an argmax, is no reduction the
    // vectorizer recognizes), reduced by one associative op of the two parameters.
    if (r->operand_count() != 2 || !r->shape().IsArray() || !VectorizedElementType(r->shape().element_type())) {
      return false;
    }
    const HloInstruction* root = r->to_apply()->root_instruction();
    switch (root->opcode()) {
      case HloOpcode::kAdd:
      case HloOpcode::kMultiply:
      case HloOpcode::kMinimum:
      case HloOpcode::kMaximum:
      case HloOpcode::kAnd:
      case HloOpcode::kOr:
      case HloOpcode::kXor:
        break;
      default:
        return false;
    }
    if (root->operand(0)->opcode() != HloOpcode::kParameter || root->operand(1)->opcode() != HloOpcode::kParameter ||
        root->operand(0) == root->operand(1)) {
      return false;
    }
  }
  return true;
}

void RequestOneMaskedVector(llvm::BasicBlock* header, unsigned width) {
  if (header == nullptr) return;
  llvm::LLVMContext& c = header->getContext();
  std::vector<llvm::Metadata*> hints = OneVectorHints(c, width);
  hints.push_back(LoopHint(c, "llvm.loop.vectorize.predicate.enable", llvm::ConstantInt::getTrue(c)));
  AddLoopHints(header, hints);
}

Status EmitRowReductions(ElementalIrEmitter& e, const std::vector<const HloInstruction*>& reductions,
                         const std::vector<const HloInstruction*>& cached,
                         const std::vector<IrArray>& caches, const std::vector<size_t>& filled,
                         int64_t innermost_length, const RowElementLoop& for_each_element,
                         const RowReductionsAhead* ahead, std::vector<llvm::AllocaInst*>* uniform_tails,
                         bool across_rows) {
  llvm::IRBuilder<>& b = e.builder();
  // This row's reductions, then the next row's: `all` and `next` side by side.
  std::vector<const HloInstruction*> all = reductions;
  std::vector<bool> next(reductions.size(), false);
  if (ahead != nullptr) {
    all.insert(all.end(), ahead->reductions.begin(), ahead->reductions.end());
    next.resize(all.size(), true);
  }
  auto at = [&](size_t k, const IrIndex& index) { return next[k] ? ahead->next_row(index) : index; };
  std::vector<std::vector<llvm::AllocaInst*>> accumulators;
  // Per reduction: whether an element of its operand was NaN, where it is a float maximum taken
  // without NaN semantics (below), else null. An i8 (an or of the elements' NaN tests), or for
  // the next row's a sum of the elements in their type (below).
  std::vector<llvm::AllocaInst*> nan_seen;
  // Per reduction: the exponential whose terms it sums before their last multiply, else null.
  std::vector<const HloInstruction*> scaled_exp;
  // Per reduction: the filled row cache whose terms, before their last multiply, it sums (and
  // which holds them so), where its exponentials are read only in quotients by it; else -1.
  std::vector<int64_t> unscaled_cache;
  // Per filled row cache: whether it holds its exponentials before their last multiply, and
  // their value at the loop's element.
  std::map<size_t, Value*> unscaled_value;
  std::vector<Value*> inits;
  // Per reduction: where it is a short row's f16 sum, the vector of its lanes' sums and the lane
  // the next element goes to (kShortHalfSumMinLength), else null.
  std::vector<llvm::AllocaInst*> lane_sums_of, lane_of_sum;
  for (size_t k = 0; k < all.size(); ++k) {
    const HloInstruction* r = all[k];
    const int64_t n = r->operand_count() / 2;
    std::vector<llvm::AllocaInst*> accs;
    for (int64_t i = 0; i < n; ++i) {
      ASSIGN_OR_RETURN(Value * init, e.EmitElement(r->operand(n + i), {}));
      llvm::AllocaInst* acc = EmitEntryAlloca(b, init->getType(), "row.acc");
      b.CreateStore(init, acc);
      accs.push_back(acc);
      inits.push_back(init);
    }
    accumulators.push_back(std::move(accs));
    const HloInstruction* exp = ScaledExpSum(b, r);
    auto* zero = llvm::dyn_cast<llvm::ConstantFP>(inits.back());
    const bool from_zero = zero != nullptr && zero->isZero();
    scaled_exp.push_back(exp != nullptr && from_zero ? exp : nullptr);
    unscaled_cache.push_back(-1);
    const HloInstruction* quotient = next[k] || !from_zero ? nullptr : UnscaledExpQuotient(b, r);
    for (size_t c : filled) {
      if (quotient != nullptr && cached[c] == quotient) {
        unscaled_cache.back() = static_cast<int64_t>(c);
        unscaled_value[c] = nullptr;
      }
    }
    llvm::AllocaInst* seen = nullptr;
    llvm::Type* type = accumulators.back()[0]->getAllocatedType();
    if (!across_rows && IsFloatMaximum(r) && (type->isFloatTy() || type->isDoubleTy())) {
      if (next[k]) {
        seen = EmitEntryAlloca(b, type, "row.nan_sum");
        b.CreateStore(llvm::ConstantFP::get(type, 0.0), seen);
      } else {
        seen = EmitEntryAlloca(b, b.getInt8Ty(), "row.nan_seen");
        b.CreateStore(b.getInt8(0), seen);
      }
    }
    nan_seen.push_back(seen);
    // A short row's f16 sum adds each element into a lane of a vector (kShortHalfSumMinLength).
    llvm::AllocaInst* lane_sums = nullptr;
    if (!next[k] && exp == nullptr && unscaled_cache.back() < 0 && n == 1 &&
        type->isHalfTy() && IsAddReducer(r->to_apply()) && innermost_length >= kShortHalfSumMinLength &&
        innermost_length <= kShortRowMaxLength) {
      const unsigned lanes = 1u << llvm::Log2_64(static_cast<uint64_t>(innermost_length));
      auto* vector = llvm::FixedVectorType::get(type, lanes);
      lane_sums = EmitEntryAlloca(b, vector, "row.lane_sums");
      b.CreateStore(llvm::ConstantFP::getNegativeZero(vector), lane_sums);
      llvm::AllocaInst* lane = EmitEntryAlloca(b, b.getInt64Ty(), "row.lane");
      b.CreateStore(b.getInt64(0), lane);
      lane_of_sum.push_back(lane);
    } else {
      lane_of_sum.push_back(nullptr);
    }
    lane_sums_of.push_back(lane_sums);
  }
  // Emits the accumulation of reduction k for the element at `index`; `exact`: with the
  // reducer's own semantics even where a maximum has a NaN-free form.
  // With `count`, the element stands for that many equal ones (ReducesInClosedForm): a sum adds
  // it times `count`, any other reducer takes it once.
  auto accumulate = [&](size_t k, const IrIndex& row_index, bool exact, Value* count = nullptr) -> Status {
    const HloInstruction* r = all[k];
    const IrIndex index = at(k, row_index);
    const int64_t n = r->operand_count() / 2;
    std::vector<Value*> args;
    for (llvm::AllocaInst* acc : accumulators[k]) {
      args.push_back(b.CreateLoad(acc->getAllocatedType(), acc));
    }
    for (int64_t i = 0; i < n; ++i) {
      // The operands have the row's shape: the element's index is theirs.
      if (scaled_exp[k] != nullptr) {
        ASSIGN_OR_RETURN(Value * shift, e.EmitElement(scaled_exp[k]->operand(0), index));
        args.push_back(EmitFastExpF32Scaled(b, shift));
        continue;
      }
      if (unscaled_cache[k] >= 0) {
        Value* term = unscaled_value[unscaled_cache[k]];
        if (term == nullptr) {
          ASSIGN_OR_RETURN(Value * shift, e.EmitElement(cached[unscaled_cache[k]]->operand(0), index));
          term = EmitFastExpF32Scaled(b, shift);
        }
        args.push_back(term);
        continue;
      }
      ASSIGN_OR_RETURN(Value * x, e.EmitElement(r->operand(i), index));
      args.push_back(x);
    }
    if (count != nullptr && IsAddReducer(r->to_apply())) {
      for (int64_t i = 0; i < n; ++i) {
        Value*& x = args[n + i];
        x = x->getType()->isFloatingPointTy() ? b.CreateFMul(b.CreateUIToFP(count, x->getType()), x)
                                              : b.CreateMul(b.CreateZExtOrTrunc(count, x->getType()), x);
      }
    }
    // Float reductions may be reassociated (as in ElementalIrEmitter::EmitReduce): the order
    // of a sum is not part of reduce's semantics. f16 and bf16 sums too, though their roundings
    // then differ from an in-order sum's: in order, a sum of f16[4096,1024] rows took 17 ms
    // against 0.30, of f16[5000,64] 0.34 against 0.047 and of f16[5000,10] 0.041 against 0.023
    // (best of 300-500, 2-4 alternating pairs). The sign of a zero maximum or minimum is left
    // free (which of -0 and +0 they return is unspecified): without it, a NaN-propagating
    // maximum is three vector instructions instead of six. A sum's is not: with nsz on its adds
    // LLVM's vectorizer starts the other lanes at +0, and a sum of -0s from -0 came out +0; its
    // lanes start at -0 without it, the loop vectorized the same way.
    llvm::IRBuilder<>::FastMathFlagGuard guard(b);
    llvm::FastMathFlags flags;
    flags.setAllowReassoc();
    if (SignOfZeroIsFree(r->to_apply())) flags.setNoSignedZeros();
    b.setFastMathFlags(flags);
    if (nan_seen[k] != nullptr && !exact) {
      // A float maximum as x86's one max instruction (maxnum without NaNs), which on its own
      // drops a NaN; beside it an or of the elements' unordered compares (one compare into a
      // mask register a vector) says whether any was NaN, and then the row is taken again with
      // the maximum's NaN semantics (below). A NaN-propagating maximum is a max, a compare and
      // a blend a vector, in one chain; and a sum of the elements in place of the compares (NaN
      // where one is) made log-softmax from memory 10-15% slower. The next row's maximum, in a
      // loop bound by the vector units (softmax's exponentials), takes that sum instead: one add
      // a vector where the compare and the or were three instructions (a compare, an or and a
      // byte blend); an infinity of each sign in a row makes it NaN too, and that row is taken
      // again for nothing. Softmax over f32[256,1000] on one core, the kernel alone: 0.0717 ->
      // 0.0677 ms a run (no NaN test at all: 0.0652; an or of i1 compares: 0.0694).
      if (next[k]) {
        llvm::Type* type = nan_seen[k]->getAllocatedType();
        b.CreateStore(b.CreateFAdd(b.CreateLoad(type, nan_seen[k]), args[1]), nan_seen[k]);
      } else {
        Value* nan = b.CreateZExt(b.CreateFCmpUNO(args[1], args[1]), b.getInt8Ty());
        b.CreateStore(b.CreateOr(b.CreateLoad(b.getInt8Ty(), nan_seen[k]), nan), nan_seen[k]);
      }
      llvm::FastMathFlags no_nans;
      no_nans.setNoNaNs();
      no_nans.setNoSignedZeros();
      b.setFastMathFlags(no_nans);
      b.CreateStore(b.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, args[0], args[1]),
                    accumulators[k][0]);
      return OkStatus();
    }
    if (lane_sums_of[k] != nullptr) {
      llvm::AllocaInst* sums = lane_sums_of[k];
      Value* lanes = b.CreateLoad(sums->getAllocatedType(), sums);
      Value* at = b.CreateLoad(b.getInt64Ty(), lane_of_sum[k]);
      const uint64_t last = llvm::cast<llvm::FixedVectorType>(sums->getAllocatedType())->getNumElements() - 1;
      Value* lane = b.CreateAnd(at, b.getInt64(last));
      Value* sum = b.CreateFAdd(b.CreateExtractElement(lanes, lane), args[1]);
      b.CreateStore(b.CreateInsertElement(lanes, sum, lane), sums);
      b.CreateStore(b.CreateAdd(at, b.getInt64(1)), lane_of_sum[k]);
      return OkStatus();
    }
    ASSIGN_OR_RETURN(std::vector<Value*> results, e.EmitScalarComputation(*r->to_apply(), args));
    for (int64_t i = 0; i < n; ++i) b.CreateStore(results[i], accumulators[k][i]);
    return OkStatus();
  };
  // Runs `fn` with the caches of earlier levels that have a uniform tail value bound to it: the
  // uniform columns' elements of those caches were never written.
  auto with_tail_caches = [&](const std::function<Status()>& fn) -> Status {
    std::vector<const HloInstruction*> rebound;
    for (size_t c = 0; c < cached.size(); ++c) {
      llvm::AllocaInst* value = (*uniform_tails)[c];
      if (value == nullptr || std::find(filled.begin(), filled.end(), c) != filled.end()) continue;
      e.BindValues(cached[c], {b.CreateLoad(value->getAllocatedType(), value)});
      rebound.push_back(cached[c]);
    }
    Status status = fn();
    for (const HloInstruction* x : rebound) e.UnbindValues(x);
    return status;
  };
  // The value filled cache c holds at `index`: an exponential before its last multiply where a
  // sum reads it so (kept for that sum in unscaled_value), else the cached instruction's element.
  auto filled_value = [&](size_t c, const IrIndex& index) -> StatusOr<Value*> {
    if (!unscaled_value.count(c)) return e.EmitElement(cached[c], index);
    ASSIGN_OR_RETURN(Value * shift, e.EmitElement(cached[c]->operand(0), index));
    return unscaled_value[c] = EmitFastExpF32Scaled(b, shift);
  };
  // The uniform columns past a prefix mask: each filled cache's value there into its variable,
  // every reduction over them in closed form.
  RowUniformTail tail = [&](const IrIndex& index, Value* count) -> Status {
    return with_tail_caches([&]() -> Status {
      for (size_t c : filled) {
        ASSIGN_OR_RETURN(Value * v, filled_value(c, index));
        llvm::AllocaInst*& variable = (*uniform_tails)[c];
        if (variable == nullptr) variable = EmitEntryAlloca(b, v->getType(), "row.uniform_tail");
        b.CreateStore(v, variable);
      }
      Status status = e.EmitIf(b.CreateICmpSGT(count, llvm::ConstantInt::get(count->getType(), 0)),
                               "row.uniform", [&]() -> Status {
        for (size_t k = 0; k < all.size(); ++k) RETURN_IF_ERROR(accumulate(k, index, false, count));
        return OkStatus();
      });
      for (auto& [c, v] : unscaled_value) v = nullptr;
      return status;
    });
  };
  const RowUniformTail* closed_tail = uniform_tails != nullptr ? &tail : nullptr;
  // One innermost loop, or two where the row is split (ColumnPrefixMask).
  std::vector<llvm::BasicBlock*> headers;
  RETURN_IF_ERROR(for_each_element([&](const IrIndex& index) -> Status {
    // The innermost loop's body: its only predecessor is the loop's header.
    headers.push_back(b.GetInsertBlock()->getSinglePredecessor());
    for (size_t c : filled) {
      ASSIGN_OR_RETURN(Value * v, filled_value(c, index));
      RETURN_IF_ERROR(caches[c].EmitWrite(b, index, v));
    }
    for (size_t k = 0; k < all.size(); ++k) RETURN_IF_ERROR(accumulate(k, index, false));
    for (auto& [c, v] : unscaled_value) v = nullptr;
    return OkStatus();
  }, closed_tail));
  if (!all.empty()) {
    // Whether the loop computes a transcendental function (of the reductions' operands or the
    // filled caches).
    std::vector<const HloInstruction*> computed;
    for (const HloInstruction* r : all) {
      for (int64_t i = 0; i < r->operand_count() / 2; ++i) computed.push_back(r->operand(i));
    }
    for (size_t c : filled) computed.push_back(cached[c]);
    const bool transcendental =
        ReachesTranscendental(computed, [&](const HloInstruction* x) { return e.IsBound(x); });
    const unsigned width = ShortRowVectorWidth(innermost_length);
    // A sum of f16 or bf16 unrolled whole stays a chain of scalar adds: the SLP vectorizer
    // reassociates only adds that leave the sign of zero free, which a sum's may not (above).
    // Kept rolled, the loop vectorizer takes it as it takes long rows: f16[5000,64] row sums
    // 0.087 ms unrolled, 0.008 rolled (as with nsz unrolled). Rows up to kShortRowMaxLength stay
    // unrolled (ShortRowsTheVectorizerCannotTakeStayUnrolledWhole): f16[4096,10] 6 us against 4
    // with nsz (5 rolled).
    const bool half_sum = innermost_length > kShortRowMaxLength &&
                          std::any_of(all.begin(), all.end(), [](const HloInstruction* r) {
      const PrimitiveType type = r->shape().IsArray() ? r->shape().element_type() : PrimitiveType::TUPLE;
      return (type == PrimitiveType::F16 || type == PrimitiveType::BF16) && IsAddReducer(r->to_apply());
    });
    for (llvm::BasicBlock* header : across_rows ? std::vector<llvm::BasicBlock*>{} : headers) {
      if (width != 0 && ShortRowVectorizes(all, {})) {
        RequestOneMaskedVector(header, width);
      } else {
        RequestInterleave(header, transcendental ? kTranscendentalRowReductionInterleave : kRowReductionInterleave,
                          innermost_length > kRowUnrollLimit || half_sum);
      }
    }
  }
  // A short row's f16 sum: its lanes' sums as a tree (reassociated, started from -0, which
  // keeps every lane's value and sign), then the initial value.
  for (size_t k = 0, first = 0; k < all.size(); first += accumulators[k].size(), ++k) {
    if (lane_sums_of[k] == nullptr) continue;
    llvm::IRBuilder<>::FastMathFlagGuard guard(b);
    llvm::FastMathFlags flags;
    flags.setAllowReassoc();
    b.setFastMathFlags(flags);
    llvm::AllocaInst* sums = lane_sums_of[k];
    Value* lanes = b.CreateLoad(sums->getAllocatedType(), sums);
    Value* tree = b.CreateFAddReduce(llvm::ConstantFP::getNegativeZero(inits[first]->getType()), lanes);
    b.CreateStore(b.CreateFAdd(inits[first], tree), accumulators[k][0]);
  }
  // A maximum whose row (or initial value) held a NaN is taken again with NaN semantics.
  size_t first_init = 0;
  for (size_t k = 0; k < all.size(); ++k) {
    const size_t init = first_init;
    first_init += accumulators[k].size();
    if (nan_seen[k] == nullptr) continue;
    Value* tested = b.CreateLoad(nan_seen[k]->getAllocatedType(), nan_seen[k]);
    Value* seen = next[k] ? b.CreateFCmpUNO(tested, tested) : b.CreateICmpNE(tested, b.getInt8(0));
    Value* nan = b.CreateOr(seen, b.CreateFCmpUNO(inits[init], inits[init]));
    RETURN_IF_ERROR(e.EmitIf(nan, "row.nan", [&]() -> Status {
      b.CreateStore(inits[init], accumulators[k][0]);
      RowUniformTail once = [&](const IrIndex& index, Value* count) -> Status {
        return with_tail_caches([&]() {
          return e.EmitIf(b.CreateICmpSGT(count, llvm::ConstantInt::get(count->getType(), 0)), "row.uniform",
                          [&]() { return accumulate(k, index, true); });
        });
      };
      return for_each_element([&](const IrIndex& index) { return accumulate(k, index, true); },
                              closed_tail != nullptr ? &once : nullptr);
    }));
  }
  for (size_t k = 0; k < all.size(); ++k) {
    if (scaled_exp[k] == nullptr) continue;
    llvm::AllocaInst* acc = accumulators[k][0];
    Value* sum = b.CreateLoad(acc->getAllocatedType(), acc);
    b.CreateStore(b.CreateFMul(sum, llvm::ConstantFP::get(acc->getAllocatedType(), kFastExpScaledFactor)), acc);
  }
  for (size_t c : filled) e.BindArray(cached[c], {}, caches[c]);
  for (size_t k = 0; k < reductions.size(); ++k) {
    std::vector<Value*> results;
    for (llvm::AllocaInst* acc : accumulators[k]) {
      results.push_back(b.CreateLoad(acc->getAllocatedType(), acc));
    }
    e.BindValues(reductions[k], std::move(results));
  }
  for (size_t k = reductions.size(); k < all.size(); ++k) {
    const std::vector<llvm::AllocaInst*>& to = ahead->results[k - reductions.size()];
    for (size_t i = 0; i < accumulators[k].size(); ++i) {
      b.CreateStore(b.CreateLoad(accumulators[k][i]->getAllocatedType(), accumulators[k][i]), to[i]);
    }
  }
  return OkStatus();
}

std::vector<const HloInstruction*> PerRowDivisors(
    const HloComputation& computation,
    const std::function<bool(const HloInstruction*)>& is_row_broadcast) {
  std::vector<const HloInstruction*> divisors;
  for (const HloInstruction* x : computation.MakeInstructionPostOrder()) {
    if (x->opcode() != HloOpcode::kDivide || !x->shape().IsArray()) continue;
    const PrimitiveType type = x->shape().element_type();
    if (type != PrimitiveType::F32 && type != PrimitiveType::F64) continue;
    const HloInstruction* divisor = x->operand(1);
    if (divisor->opcode() != HloOpcode::kBroadcast || !is_row_broadcast(divisor)) continue;
    if (std::find(divisors.begin(), divisors.end(), divisor->operand(0)) == divisors.end()) {
      divisors.push_back(divisor->operand(0));
    }
  }
  return divisors;
}

Status EmitWithRowReciprocals(ElementalIrEmitter& e, const std::vector<Value*>& divisors,
                              const std::function<Status()>& emit_loop) {
  llvm::IRBuilder<>& b = e.builder();
  std::map<Value*, Value*> reciprocal;
  Value* normal = nullptr;
  for (Value* d : divisors) {
    llvm::Type* type = d->getType();
    if ((!type->isFloatTy() && !type->isDoubleTy()) || reciprocal.count(d)) continue;
    Value* r = b.CreateFDiv(llvm::ConstantFP::get(type, 1.0), d, "row.reciprocal");
    reciprocal[d] = r;
    // x * (1/d) is within two roundings of x / d while 1/d is a normal number; a NaN fails both
    // comparisons.
    const llvm::fltSemantics& semantics = type->getFltSemantics();
    Value* magnitude = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, r);
    Value* ok = b.CreateAnd(
        b.CreateFCmpOGE(magnitude, llvm::ConstantFP::get(type, llvm::APFloat::getSmallestNormalized(semantics))),
        b.CreateFCmpOLE(magnitude, llvm::ConstantFP::get(type, llvm::APFloat::getLargest(semantics))));
    normal = normal == nullptr ? ok : b.CreateAnd(normal, ok);
  }
  if (normal == nullptr) return emit_loop();
  RETURN_IF_ERROR(e.EmitIf(normal, "row.multiply", [&]() -> Status {
    // Blocks made from here on, and this one, hold the multiplying version.
    llvm::BasicBlock* first = b.GetInsertBlock();
    llvm::Function* f = first->getParent();
    llvm::BasicBlock* last_before = &f->back();
    RETURN_IF_ERROR(emit_loop());
    std::vector<llvm::BasicBlock*> blocks = {first};
    for (auto it = std::next(last_before->getIterator()); it != f->end(); ++it) blocks.push_back(&*it);
    for (llvm::BasicBlock* block : blocks) {
      for (auto it = block->begin(); it != block->end();) {
        llvm::Instruction& inst = *it++;
        if (inst.getOpcode() != llvm::Instruction::FDiv) continue;
        auto found = reciprocal.find(inst.getOperand(1));
        if (found == reciprocal.end()) continue;
        auto* product = llvm::BinaryOperator::CreateFMul(inst.getOperand(0), found->second, "", &inst);
        product->copyFastMathFlags(&inst);
        inst.replaceAllUsesWith(product);
        inst.eraseFromParent();
      }
    }
    return OkStatus();
  }));
  return e.EmitIf(b.CreateNot(normal), "row.divide", emit_loop);
}

namespace {

// An s32 or s64 array of the row's shape (reached through broadcasts) as an integer linear form
// of the row's indices: element i is the sum of coefficient[d] * i[d] and `constant`. jnp.tril(x, k)
// writes its mask as compare(row + k, column); a KV-cache offset, or the difference of the two
// indices against a constant, are other spellings of the same prefix.
struct IndexForm {
  std::map<int64_t, int64_t> coefficient;  // row dimension -> its coefficient (never 0)
  int64_t constant = 0;
  // Every value the form takes over the array (an interval that holds them): where it lies in the
  // element type, no element's arithmetic wraps, so the form is exact.
  int64_t lo = 0, hi = 0;
};

// a + sign * b, or nullopt where a coefficient, the constant or the range leaves int64.
std::optional<IndexForm> Combine(const IndexForm& a, const IndexForm& b, int64_t sign) {
  IndexForm sum = a;
  for (const auto& [d, c] : b.coefficient) {
    int64_t& to = sum.coefficient[d];
    if (__builtin_add_overflow(to, sign * c, &to)) return std::nullopt;
    if (to == 0) sum.coefficient.erase(d);
  }
  const int64_t b_lo = sign > 0 ? b.lo : -b.hi, b_hi = sign > 0 ? b.hi : -b.lo;
  if ((sign < 0 && (b.lo == std::numeric_limits<int64_t>::min() || b.hi == std::numeric_limits<int64_t>::min())) ||
      __builtin_add_overflow(a.constant, sign * b.constant, &sum.constant) ||
      __builtin_add_overflow(a.lo, b_lo, &sum.lo) || __builtin_add_overflow(a.hi, b_hi, &sum.hi)) {
    return std::nullopt;
  }
  return sum;
}

// `x`'s IndexForm, where x (dimension i of which is the row's dimension map[i]) is made of iotas,
// scalar constants, broadcasts, adds, subtracts and negations, and no element's value leaves its
// type on the way.
std::optional<IndexForm> IndexFormOf(const HloInstruction* x, const std::vector<int64_t>& map) {
  const PrimitiveType type = x->shape().element_type();
  if ((type != PrimitiveType::S32 && type != PrimitiveType::S64) || !x->shape().IsArray()) return std::nullopt;
  std::optional<IndexForm> form;
  switch (x->opcode()) {
    case HloOpcode::kIota:
      if (!x->iota_dimension_attr.has_value()) return std::nullopt;
      form = IndexForm{{{map[*x->iota_dimension_attr], 1}}, 0, 0, x->shape().dimensions(*x->iota_dimension_attr) - 1};
      break;
    case HloOpcode::kConstant:
      if (x->shape().rank() != 0 || !x->has_literal() || x->literal().is_elided()) return std::nullopt;
      form = IndexForm{{}, x->literal().GetAsInt64(0), x->literal().GetAsInt64(0), x->literal().GetAsInt64(0)};
      break;
    case HloOpcode::kBroadcast: {
      std::vector<int64_t> inner;
      for (int64_t d : x->dimensions()) inner.push_back(map[d]);
      return IndexFormOf(x->operand(0), inner);
    }
    case HloOpcode::kAdd:
    case HloOpcode::kSubtract: {
      std::optional<IndexForm> a = IndexFormOf(x->operand(0), map);
      std::optional<IndexForm> b = IndexFormOf(x->operand(1), map);
      if (!a.has_value() || !b.has_value()) return std::nullopt;
      form = Combine(*a, *b, x->opcode() == HloOpcode::kAdd ? 1 : -1);
      break;
    }
    case HloOpcode::kNegate: {
      std::optional<IndexForm> a = IndexFormOf(x->operand(0), map);
      if (!a.has_value()) return std::nullopt;
      form = Combine(IndexForm{}, *a, -1);
      break;
    }
    default:
      return std::nullopt;
  }
  const int64_t min = type == PrimitiveType::S32 ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int64_t>::min();
  const int64_t max = type == PrimitiveType::S32 ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int64_t>::max();
  if (!form.has_value() || form->lo < min || form->hi > max) return std::nullopt;
  return form;
}

// Whether `x` is the pred constant `value`, or a broadcast of it.
bool IsPredConstant(const HloInstruction* x, bool value) {
  if (x->opcode() == HloOpcode::kBroadcast) x = x->operand(0);
  return x->opcode() == HloOpcode::kConstant && x->shape().element_type() == PrimitiveType::PRED &&
         x->shape().rank() == 0 && x->has_literal() && !x->literal().is_elided() &&
         (x->literal().GetAsInt64(0) != 0) == value;
}

std::optional<ColumnPrefixMask> PrefixOf(const HloInstruction* x, const std::vector<int64_t>& map,
                                         int64_t column_dimension, const std::vector<int64_t>& kept) {
  if (x->opcode() == HloOpcode::kBroadcast) {
    std::vector<int64_t> inner;
    for (int64_t d : x->dimensions()) inner.push_back(map[d]);
    return PrefixOf(x->operand(0), inner, column_dimension, kept);
  }
  if (x->opcode() == HloOpcode::kSelect && IsPredConstant(x->operand(1), true) &&
      IsPredConstant(x->operand(2), false)) {
    return PrefixOf(x->operand(0), map, column_dimension, kept);
  }
  if (x->opcode() != HloOpcode::kCompare || !x->comparison_direction.has_value() ||
      (x->comparison_type.has_value() && *x->comparison_type != ComparisonType::kSigned)) {
    return std::nullopt;
  }
  std::optional<IndexForm> lhs = IndexFormOf(x->operand(0), map);
  std::optional<IndexForm> rhs = IndexFormOf(x->operand(1), map);
  if (!lhs.has_value() || !rhs.has_value()) return std::nullopt;
  // The compare as form >= 0, form = lhs - rhs (GE), lhs - rhs - 1 (GT), rhs - lhs (LE) or
  // rhs - lhs - 1 (LT): a prefix where it is r - j + c with r a kept index and j the column's,
  // which keeps the columns j <= r + c.
  std::optional<IndexForm> form;
  int64_t less = 0;
  switch (*x->comparison_direction) {
    case ComparisonDirection::kGt:
      less = 1;
      [[fallthrough]];
    case ComparisonDirection::kGe:
      form = Combine(*lhs, *rhs, -1);
      break;
    case ComparisonDirection::kLt:
      less = 1;
      [[fallthrough]];
    case ComparisonDirection::kLe:
      form = Combine(*rhs, *lhs, -1);
      break;
    default:
      return std::nullopt;
  }
  if (!form.has_value() || form->coefficient.size() != 2 || !form->coefficient.count(column_dimension) ||
      form->coefficient.at(column_dimension) != -1) {
    return std::nullopt;
  }
  const auto kept_term = std::find_if(form->coefficient.begin(), form->coefficient.end(),
                                      [&](const auto& term) { return term.first != column_dimension; });
  auto is_kept = [&](int64_t d) { return std::find(kept.begin(), kept.end(), d) != kept.end(); };
  if (kept_term->second != 1 || !is_kept(kept_term->first)) return std::nullopt;
  ColumnPrefixMask mask;
  mask.kept_dimension = kept_term->first;
  if (__builtin_sub_overflow(form->constant, less, &mask.offset)) return std::nullopt;
  return mask;
}

}  // namespace

std::optional<ColumnPrefixMask> FindColumnPrefixMask(const HloComputation& computation, const Shape& row_shape,
                                                     int64_t column_dimension, const std::vector<int64_t>& kept) {
  for (const HloInstruction* x : computation.MakeInstructionPostOrder()) {
    if (x->opcode() != HloOpcode::kSelect || x->shape().dimensions() != row_shape.dimensions()) continue;
    const HloInstruction* predicate = x->operand(0);
    if (predicate->shape().dimensions() != row_shape.dimensions()) continue;
    const std::vector<HloInstruction*>& users = predicate->users();
    const bool only_selects = std::all_of(users.begin(), users.end(), [&](const HloInstruction* u) {
      return u->opcode() == HloOpcode::kSelect && u->operand(0) == predicate && u->operand(1) != predicate &&
             u->operand(2) != predicate && u->shape().dimensions() == row_shape.dimensions();
    });
    if (!only_selects || predicate == computation.root_instruction()) continue;
    std::vector<int64_t> identity(row_shape.rank());
    for (int64_t d = 0; d < row_shape.rank(); ++d) identity[d] = d;
    std::optional<ColumnPrefixMask> mask = PrefixOf(predicate, identity, column_dimension, kept);
    if (!mask.has_value()) continue;
    mask->predicate = predicate;
    // An offset of the row's length or more keeps every column of every row, one of minus the
    // kept dimension's size or less none: bounded there, r + offset + 1 cannot wrap in the loops'
    // 64-bit arithmetic.
    mask->offset = std::clamp<int64_t>(mask->offset, -row_shape.dimensions(mask->kept_dimension) - 1,
                                       row_shape.dimensions(column_dimension));
    return mask;
  }
  return std::nullopt;
}

bool UniformPastPrefix(const HloInstruction* x, const ColumnPrefixMask& mask, int64_t column_dimension) {
  if (x == mask.predicate) return true;
  if (!x->shape().IsArray() || column_dimension < 0 || column_dimension >= x->shape().rank()) return false;
  switch (x->opcode()) {
    case HloOpcode::kIota:
      return x->iota_dimension_attr.has_value() && *x->iota_dimension_attr != column_dimension;
    case HloOpcode::kBroadcast: {
      const std::vector<int64_t>& dims = x->dimensions();
      for (size_t i = 0; i < dims.size(); ++i) {
        if (dims[i] == column_dimension) return UniformPastPrefix(x->operand(0), mask, static_cast<int64_t>(i));
      }
      return true;
    }
    case HloOpcode::kSelect:
      if (x->operand(0) == mask.predicate) return UniformPastPrefix(x->operand(2), mask, column_dimension);
      break;
    default:
      break;
  }
  if (!x->IsElementwise() || x->operand_count() == 0) return false;
  for (const HloInstruction* operand : x->operands()) {
    if (operand->shape().rank() != x->shape().rank() ||
        !UniformPastPrefix(operand, mask, column_dimension)) {
      return false;
    }
  }
  return true;
}

bool ReducesInClosedForm(const HloInstruction* r) {
  if (r->opcode() != HloOpcode::kReduce || r->operand_count() != 2 || !r->shape().IsArray()) return false;
  const PrimitiveType type = r->shape().element_type();
  if (type != PrimitiveType::F32 && type != PrimitiveType::F64 && type != PrimitiveType::S32 &&
      type != PrimitiveType::S64 && type != PrimitiveType::U32 && type != PrimitiveType::U64 &&
      type != PrimitiveType::PRED) {
    return false;
  }
  if (r->operand(0)->shape().element_type() != type) return false;
  if (IsAddReducer(r->to_apply())) return type != PrimitiveType::PRED;
  const HloInstruction* root = r->to_apply()->root_instruction();
  switch (root->opcode()) {
    case HloOpcode::kMaximum:
    case HloOpcode::kMinimum:
    case HloOpcode::kAnd:
    case HloOpcode::kOr:
      return root->operand(0)->opcode() == HloOpcode::kParameter &&
             root->operand(1)->opcode() == HloOpcode::kParameter && root->operand(0) != root->operand(1);
    default:
      return false;
  }
}

}  // namespace xlens::codegen
