// Internals of the reference evaluator, shared by its evaluator_*.cc files (not a public API).
//
// Every handler receives the instruction and its operand values and returns the instruction's
// value. Handlers check the shapes they index with instead of trusting the instruction's shape,
// so a malformed module gives an error, never an out-of-bounds access.
#pragma once

#include <complex>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "compiler/hlo/computation.h"
#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/instruction.h"
#include "compiler/hlo/literal.h"
#include "compiler/hlo/native_types.h"
#include "compiler/support/status.h"

namespace xlens::evaluator_internal {

// ---------------------------------------------------------------------------------------------
// Element type traits.

template <typename T>
inline constexpr bool kIsComplex = std::is_same_v<T, complex64> || std::is_same_v<T, complex128>;
template <typename T>
inline constexpr bool kIsFloat = std::is_same_v<T, half> || kIsWrappedFloat<T> ||
                                 std::is_same_v<T, float> || std::is_same_v<T, double>;
template <typename T>
inline constexpr bool kIsPred = std::is_same_v<T, bool>;
template <typename T>
inline constexpr bool kIsInteger = std::is_integral_v<T> && !kIsPred<T>;

// The type arithmetic on T is carried out in: f16, bf16 and the 8-bit floats compute in f32 and
// round once per operation, as XLA's CPU backend does (it normalizes the 8-bit floats to f16,
// whose 11 bits make rounding twice, through f16, give what rounding once does for +-*/).
template <typename T>
struct ComputeTypeOf {
  using type = std::conditional_t<std::is_same_v<T, half> || kIsWrappedFloat<T>, float, T>;
};
template <typename T>
using ComputeType = typename ComputeTypeOf<T>::type;

template <typename T>
inline ComputeType<T> ToCompute(T v) {
  if constexpr (kIsWrappedFloat<T>) {
    return static_cast<float>(v);
  } else {
    return static_cast<ComputeType<T>>(v);
  }
}
template <typename T, typename C>
inline T FromCompute(C v) {
  if constexpr (kIsWrappedFloat<T>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// "unsupported element type f8e4m3fn" for any leaf of `shape` the evaluator cannot hold.
Status CheckSupportedShape(const Shape& shape);

// ---------------------------------------------------------------------------------------------
// Index iteration and strided copies over dense row-major arrays.

// Steps a multi-dimensional index through `dims` in row-major order.
class IndexCounter {
 public:
  explicit IndexCounter(std::span<const int64_t> dims) : dims_(dims.begin(), dims.end()) {
    index_.assign(dims_.size(), 0);
  }
  const std::vector<int64_t>& index() const { return index_; }
  // Advances to the next index; false after the last one.
  bool Next() {
    for (int64_t d = static_cast<int64_t>(dims_.size()) - 1; d >= 0; --d) {
      if (++index_[d] < dims_[d]) return true;
      index_[d] = 0;
    }
    return false;
  }

 private:
  std::vector<int64_t> dims_;
  std::vector<int64_t> index_;
};

// For every index i of `dims` (row-major): dst[dst_base + i.dst_strides] = src[src_base +
// i.src_strides], in elements of `element_size` bytes. Strides may be zero (broadcast) or
// negative (reverse). The caller guarantees every addressed element is in bounds.
void StridedCopy(int64_t element_size, std::span<const int64_t> dims, uint8_t* dst,
                 int64_t dst_base, std::span<const int64_t> dst_strides, const uint8_t* src,
                 int64_t src_base, std::span<const int64_t> src_strides);

// Row-major strides of `shape`'s dimensions, in elements.
std::vector<int64_t> StridesOf(const Shape& shape);

// Error unless `shape` is an array with exactly `dims`.
Status ExpectDimensions(const Shape& shape, std::span<const int64_t> dims, std::string_view what);

// The output size of a window over a dimension of `size` (base and window dilation, padding,
// stride), or an error for an invalid window.
StatusOr<int64_t> WindowedSize(int64_t size, const WindowDimension& window);

// The scalar at `linear_index` of an integer (or pred) literal, widened to int64.
int64_t IndexValue(const Literal& literal, int64_t linear_index);

// ---------------------------------------------------------------------------------------------
// Typed elementwise kernels, chosen once per instruction.

// out[i] = op(lhs[i], rhs[i]) for i in [0, n).
using BinaryKernel = void (*)(const void* lhs, const void* rhs, void* out, int64_t n);
// The kernel of a binary elementwise opcode (compare included) for operands of `operand_type`.
StatusOr<BinaryKernel> SelectBinaryKernel(const HloInstruction& instruction,
                                          PrimitiveType operand_type);

// out = in[0] op in[1] op ... in member order, `n` elements of `width` bytes, as the evaluator
// folds a collective's operands (its accumulator starts as the first member's value); `out` may
// be in[0] itself. Byte is char or uint8_t, whichever the caller's buffers are.
template <typename Byte>
void FoldInOrder(BinaryKernel fold, bool swapped, const std::vector<const Byte*>& in, Byte* out,
                 int64_t n, int64_t width) {
  if (in.size() == 1) {
    if (out != in[0]) std::memmove(out, in[0], static_cast<size_t>(n * width));
    return;
  }
  if (swapped) {
    fold(in[1], in[0], out, n);
  } else {
    fold(in[0], in[1], out, n);
  }
  for (size_t m = 2; m < in.size(); ++m) {
    if (swapped) {
      fold(in[m], out, out, n);
    } else {
      fold(out, in[m], out, n);
    }
  }
}

// When `to_apply` is one elementwise binary instruction of its two parameters (add, multiply,
// maximum, ... of `type`), the evaluator's own kernel for it, which folds whole arrays with the
// same bits as calling to_apply per element; `swapped` when it reads parameter 1 first; else
// nullptr. The reductions of the collectives fold with it (evaluator_collectives.cc, and the CPU
// runtime's in-process all-reduce).
BinaryKernel WholeArrayFold(const HloComputation* to_apply, PrimitiveType type, bool& swapped);

// out[i] = op(in[i]) for i in [0, n).
using UnaryKernel = void (*)(const void* in, void* out, int64_t n);
// The kernel of a unary elementwise opcode for an operand of `operand_type`.
StatusOr<UnaryKernel> SelectUnaryKernel(const HloInstruction& instruction,
                                        PrimitiveType operand_type);
// The kernel converting elements of type `from` to `to` with XLA's convert semantics.
StatusOr<UnaryKernel> SelectConvertKernel(PrimitiveType from, PrimitiveType to);

// Converts every element to `type` with XLA's convert semantics.
StatusOr<Literal> ConvertLiteral(const Literal& literal, PrimitiveType type);

// ---------------------------------------------------------------------------------------------
// The evaluator proper.

class HloEvaluator {
 public:
  explicit HloEvaluator(const EvaluatorOptions& options = {}) : options_(options) {}

  // Runs `computation` on `arguments` (not copied; they must outlive the call). Calls, fusions,
  // conditionals and while loops inside it run on a heap-allocated stack of frames, so their
  // nesting depth costs no machine stack.
  StatusOr<Literal> Evaluate(const HloComputation& computation,
                             std::span<const Literal* const> arguments);
  // Runs one instruction (not a parameter) on its operand values.
  StatusOr<Literal> EvaluateInstruction(const HloInstruction& instruction,
                                        std::span<const Literal* const> operands);

  // The simulated device of a multi-device evaluation, or nullptr on one device.
  DeviceCollectives* device() const { return options_.device; }

  // Whether the caller's cancellation flag is set.
  bool cancelled() const {
    return options_.cancel != nullptr && options_.cancel->load(std::memory_order_relaxed);
  }

 private:
  // Post order and use counts of a computation, computed once per computation.
  struct Plan {
    std::vector<const HloInstruction*> order;
    std::vector<std::vector<int64_t>> operand_slots;  // per instruction, index into `order`
    std::vector<int64_t> use_counts;
    int64_t root_slot = -1;
  };
  // One running computation (evaluator.cc).
  struct Frame;
  using FrameStack = std::vector<std::unique_ptr<Frame>>;

  StatusOr<const Plan*> GetPlan(const HloComputation& computation);
  // Pushes a frame running `computation` on `arguments`.
  Status PushFrame(FrameStack& stack, const HloComputation& computation,
                   std::vector<const Literal*> arguments);
  // Starts the instruction at the top frame's slot when it calls a computation (pushing its
  // frame); false when the instruction is of another kind.
  StatusOr<bool> StartCall(FrameStack& stack);
  // The called computation of the top frame's current instruction returned `value`: continues a
  // while loop (pushing its next frame; nullopt), or gives the instruction's value.
  StatusOr<std::optional<Literal>> Resume(FrameStack& stack, Literal value);
  // Where the evaluation is: "evaluating %call.1: evaluating %while.2 (iteration 41): ...".
  static std::string Context(const FrameStack& stack);
  StatusOr<Literal> Visit(const HloInstruction& instruction,
                          std::span<const Literal* const> operands);

  EvaluatorOptions options_;
  std::unordered_map<const HloComputation*, std::unique_ptr<Plan>> plans_;
  int nesting_ = 0;  // evaluations running on the machine stack (Evaluate within Evaluate)
};

// Applies a called computation repeatedly to scalar arguments (reducers, comparators, combiners,
// map). A computation made only of scalar elementwise instructions (the usual case) is compiled
// once into a list of typed kernels over fixed slots; any other runs through the evaluator.
class ScalarCaller {
 public:
  // `argument_types` and `result_types` are the scalar types the computation must take and
  // return (a tuple of them when there are several results).
  static StatusOr<ScalarCaller> Create(HloEvaluator& evaluator,
                                       const HloComputation* computation,
                                       std::vector<PrimitiveType> argument_types,
                                       std::vector<PrimitiveType> result_types);

  // Each argument and result points at one element of its type. Results may alias arguments:
  // every argument is read before any result is written.
  Status Call(std::span<const void* const> arguments, std::span<void* const> results);
  // For a computation returning pred.
  StatusOr<bool> CallPredicate(std::span<const void* const> arguments);

 private:
  // One scalar value of any supported type.
  struct alignas(16) Slot {
    uint8_t bytes[16];
  };
  struct Step {
    UnaryKernel unary = nullptr;    // out = unary(a)
    BinaryKernel binary = nullptr;  // out = binary(a, b)
    bool is_select = false;         // out = a ? b : c (c in `third`)
    int64_t a = 0, b = 0, third = 0, out = 0;
    int64_t width = 0;  // of the result, for select
  };
  // Compiles the computation into steps_; false when it holds something else.
  bool Compile();

  HloEvaluator* evaluator_ = nullptr;
  const HloComputation* computation_ = nullptr;
  std::vector<PrimitiveType> argument_types_;
  std::vector<PrimitiveType> result_types_;
  // Compiled form.
  bool compiled_ = false;
  std::vector<Slot> slots_;
  std::vector<Step> steps_;
  std::vector<int64_t> argument_slots_;  // per parameter number; -1 when unused
  std::vector<int64_t> result_slots_;
  // General form: reused scalar argument literals.
  std::vector<Literal> argument_literals_;
  std::vector<const Literal*> argument_pointers_;
};

// ---------------------------------------------------------------------------------------------
// Handlers, one per opcode family. Operands are the values of instruction.operands().

// evaluator_elementwise.cc
StatusOr<Literal> HandleIota(const HloInstruction& instruction);
StatusOr<Literal> HandleUnary(const HloInstruction& instruction, const Literal& operand);
StatusOr<Literal> HandleBinary(const HloInstruction& instruction, const Literal& lhs,
                               const Literal& rhs);
StatusOr<Literal> HandleSelect(const HloInstruction& instruction,
                               std::span<const Literal* const> operands);
StatusOr<Literal> HandleClamp(const HloInstruction& instruction,
                              std::span<const Literal* const> operands);
StatusOr<Literal> HandleConvert(const HloInstruction& instruction, const Literal& operand);
StatusOr<Literal> HandleBitcastConvert(const HloInstruction& instruction, const Literal& operand);
StatusOr<Literal> HandleReducePrecision(const HloInstruction& instruction,
                                        const Literal& operand);
StatusOr<Literal> HandleMap(HloEvaluator& evaluator, const HloInstruction& instruction,
                            std::span<const Literal* const> operands);

// evaluator_data_movement.cc
StatusOr<Literal> HandleBroadcast(const HloInstruction& instruction, const Literal& operand);
StatusOr<Literal> HandleReshape(const HloInstruction& instruction, const Literal& operand);
StatusOr<Literal> HandleBitcast(const HloInstruction& instruction, const Literal& operand);
StatusOr<Literal> HandleTranspose(const HloInstruction& instruction, const Literal& operand);
StatusOr<Literal> HandleSlice(const HloInstruction& instruction, const Literal& operand);
StatusOr<Literal> HandleDynamicSlice(const HloInstruction& instruction,
                                     std::span<const Literal* const> operands);
StatusOr<Literal> HandleDynamicUpdateSlice(const HloInstruction& instruction,
                                           std::span<const Literal* const> operands);
StatusOr<Literal> HandleConcatenate(const HloInstruction& instruction,
                                    std::span<const Literal* const> operands);
StatusOr<Literal> HandlePad(const HloInstruction& instruction, const Literal& operand,
                            const Literal& padding_value);
StatusOr<Literal> HandleReverse(const HloInstruction& instruction, const Literal& operand);

// evaluator_reduction.cc
StatusOr<Literal> HandleReduce(HloEvaluator& evaluator, const HloInstruction& instruction,
                               std::span<const Literal* const> operands);
StatusOr<Literal> HandleReduceWindow(HloEvaluator& evaluator, const HloInstruction& instruction,
                                     std::span<const Literal* const> operands);
StatusOr<Literal> HandleSelectAndScatter(HloEvaluator& evaluator,
                                         const HloInstruction& instruction,
                                         std::span<const Literal* const> operands);

// evaluator_sort.cc
StatusOr<Literal> HandleSort(HloEvaluator& evaluator, const HloInstruction& instruction,
                             std::span<const Literal* const> operands);

// evaluator_dot_conv.cc
StatusOr<Literal> HandleDot(const HloInstruction& instruction, const Literal& lhs,
                            const Literal& rhs);
StatusOr<Literal> HandleConvolution(const HloInstruction& instruction, const Literal& lhs,
                                    const Literal& rhs);

// evaluator_gather_scatter.cc
StatusOr<Literal> HandleGather(const HloInstruction& instruction, const Literal& operand,
                               const Literal& start_indices);
StatusOr<Literal> HandleScatter(HloEvaluator& evaluator, const HloInstruction& instruction,
                                std::span<const Literal* const> operands);

// evaluator_fft.cc
StatusOr<Literal> HandleFft(const HloInstruction& instruction, const Literal& operand);

// evaluator_linear_algebra.cc
StatusOr<Literal> HandleCholesky(const HloInstruction& instruction, const Literal& operand);
StatusOr<Literal> HandleTopK(const HloInstruction& instruction, const Literal& operand);
StatusOr<Literal> HandleRngBitGenerator(const HloInstruction& instruction, const Literal& state);
StatusOr<Literal> HandleTriangularSolve(const HloInstruction& instruction, const Literal& a,
                                        const Literal& b);

// evaluator_batch_norm.cc (batch-norm-training, batch-norm-inference, batch-norm-grad)
StatusOr<Literal> HandleBatchNorm(const HloInstruction& instruction,
                                  std::span<const Literal* const> operands);

// evaluator_control_flow.cc
StatusOr<Literal> HandleCall(HloEvaluator& evaluator, const HloInstruction& instruction,
                             const HloComputation* computation,
                             std::span<const Literal* const> operands);
StatusOr<Literal> HandleWhile(HloEvaluator& evaluator, const HloInstruction& instruction,
                              const Literal& init);
StatusOr<Literal> HandleConditional(HloEvaluator& evaluator, const HloInstruction& instruction,
                                    std::span<const Literal* const> operands);
// The branch a conditional runs: a pred selector picks branch 0 (true) or 1 (false); an integer
// outside [0, N) picks the last branch.
StatusOr<int64_t> SelectBranch(const HloInstruction& instruction,
                               std::span<const Literal* const> operands);
// Error unless `value` is the pred[] a while condition returns.
Status ExpectLoopCondition(const Literal& value);
// The error of an evaluation stopped by its cancellation flag.
Status CancelledError();

// evaluator_collectives.cc: replica-id, partition-id and the collectives (collective_attributes.h
// lists them), meeting the other devices of evaluator.device() (a group of one without it).
StatusOr<Literal> HandleCollective(HloEvaluator& evaluator, const HloInstruction& instruction,
                                   std::span<const Literal* const> operands);

// evaluator_work.cc
// Error naming `instruction` and its work when EvaluationWork is above `max_work` (0: no limit).
Status CheckInstructionWork(const HloInstruction& instruction, double max_work);

}  // namespace xlens::evaluator_internal
