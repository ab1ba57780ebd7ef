#include "compiler/hlo/hlo_cost_analysis.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "compiler/hlo/primitive_type.h"
#include "compiler/hlo/shape.h"

namespace xlens {
namespace {

using H = HloOpcode;

constexpr double kFmaFlops = 2;  // a multiply-add is two flops

int64_t Bytes(const Shape& shape) { return shape_util::ByteSizeOf(shape); }

// Elements of an array; of the first leaf array of a tuple (the first result of a variadic
// reduce, sort, ...); 0 for tokens and opaque values.
int64_t Elements(const Shape& shape) {
  if (shape.IsTuple()) {
    return shape.tuple_shapes_size() == 0 ? 0 : Elements(shape.tuple_shapes(0));
  }
  return shape.IsArray() ? shape.num_elements() : 0;
}

// Elements of every leaf array.
int64_t ElementsRecursive(const Shape& shape) {
  if (shape.IsTuple()) {
    int64_t total = 0;
    for (const Shape& element : shape.tuple_shapes()) total += ElementsRecursive(element);
    return total;
  }
  return shape.IsArray() ? shape.num_elements() : 0;
}

// Dimension `i` of an array shape, or `fallback` when there is no such dimension. Unbounded
// dynamic sizes count as 0.
int64_t Dim(const Shape& shape, int64_t i, int64_t fallback = 1) {
  if (!shape.IsArray() || i < 0 || i >= shape.rank()) return fallback;
  return std::max<int64_t>(shape.dimensions(i), 0);
}

// ceil(log2(n)) for n >= 1 (0 for n <= 1).
int64_t Log2Ceiling(int64_t n) {
  int64_t log = 0;
  while (log < 63 && (int64_t{1} << log) < n) ++log;
  return log;
}

// floor(log2(n)) for n >= 1 (0 for n <= 1).
int64_t Log2Floor(int64_t n) {
  int64_t log = 0;
  while (n > 1) {
    n >>= 1;
    ++log;
  }
  return log;
}

bool IsTranscendental(HloOpcode opcode) {
  switch (opcode) {
    case H::kExp: case H::kExpm1: case H::kLog: case H::kLog1p: case H::kLogistic:
    case H::kTanh: case H::kSin: case H::kCos: case H::kTan: case H::kAtan2: case H::kPower:
    case H::kSqrt: case H::kRsqrt: case H::kCbrt: case H::kErf: case H::kAcos: case H::kAcosh:
    case H::kAsin: case H::kAsinh: case H::kAtanh: case H::kCosh: case H::kSinh:
      return true;
    default:
      return false;
  }
}

// Ops that move nothing at run time: they name, regroup or order existing buffers.
bool MovesNothing(HloOpcode opcode) {
  switch (opcode) {
    case H::kParameter: case H::kConstant: case H::kGetTupleElement: case H::kTuple:
    case H::kBitcast: case H::kAfterAll: case H::kAddDependency: case H::kDomain:
    case H::kOptimizationBarrier:
      return true;
    default:
      return false;
  }
}

// The second half of an asynchronous pair: the work is counted on the start.
bool IsAsyncCompletion(HloOpcode opcode) {
  switch (opcode) {
    case H::kAllGatherDone: case H::kAllReduceDone: case H::kAsyncDone: case H::kAsyncUpdate:
    case H::kCollectivePermuteDone: case H::kCopyDone: case H::kRecvDone: case H::kSendDone:
      return true;
    default:
      return false;
  }
}

int64_t OperandBytes(const HloInstruction& instruction) {
  int64_t total = 0;
  for (const HloInstruction* operand : instruction.operands()) total += Bytes(operand->shape());
  return total;
}

// Bytes of the operands from `first` on.
int64_t OperandBytesFrom(const HloInstruction& instruction, int64_t first) {
  int64_t total = 0;
  for (int64_t i = first; i < instruction.operand_count(); ++i) {
    total += Bytes(instruction.operand(i)->shape());
  }
  return total;
}

// Reads `read` bytes and writes `written` bytes.
HloCost Moves(int64_t read, int64_t written) {
  HloCost cost;
  cost.bytes_accessed = read + written;
  cost.output_bytes = written;
  return cost;
}

// The default: every operand read in full, the whole output written.
HloCost DefaultBytes(const HloInstruction& instruction) {
  return Moves(OperandBytes(instruction), Bytes(instruction.shape()));
}

// Product of the lhs contracting dimensions.
double ContractionWidth(const HloInstruction& dot) {
  double width = 1;
  if (dot.operand_count() < 1 || !dot.dot_dimension_numbers) return width;
  for (int64_t d : dot.dot_dimension_numbers->lhs_contracting_dimensions) {
    width *= static_cast<double>(Dim(dot.operand(0)->shape(), d));
  }
  return width;
}

// One complex multiply-add is four real ones.
double ComplexFactor(const HloInstruction& instruction) {
  PrimitiveType type = instruction.shape().IsTuple() ? PrimitiveType::PRIMITIVE_TYPE_INVALID
                                                     : instruction.shape().element_type();
  if (instruction.operand_count() > 0) {
    const PrimitiveType operand_type = instruction.operand(0)->shape().element_type();
    if (IsComplexType(operand_type)) type = operand_type;
  }
  return IsComplexType(type) ? 4 : 1;
}

double DotFlops(const HloInstruction& dot) {
  return kFmaFlops * static_cast<double>(Elements(dot.shape())) * ContractionWidth(dot) *
         ComplexFactor(dot);
}

// For one spatial dimension: the number of (output position, kernel position) pairs whose input
// position is a real input element (not padding, not a base-dilation hole). XLA's count.
int64_t ValidPositionCount(int64_t input, int64_t kernel, int64_t output,
                           const WindowDimension& w) {
  const int64_t stride = std::max<int64_t>(w.stride, 1);
  const int64_t base_dilation = std::max<int64_t>(w.base_dilation, 1);
  const int64_t window_dilation = std::max<int64_t>(w.window_dilation, 1);
  // Shortcuts XLA takes for two N^2 patterns with N valid pairs.
  if (input == output && kernel == output && input == base_dilation && window_dilation == 1 &&
      std::max<int64_t>(1, input - 1) == stride && w.padding_low == 0 && w.padding_high == 0) {
    return input;
  }
  if (input == 1 && kernel == output && window_dilation == 1 && base_dilation == 1 &&
      stride == 1 && w.padding_high == output - 1 && w.padding_low == output - 1) {
    return output;
  }
  int64_t count = 0;
  for (int64_t k = 0; k < kernel; ++k) {
    if (stride == 1 && base_dilation == 1) {
      const int64_t base = w.padding_low - k * window_dilation;
      count += std::max<int64_t>(std::min(input + base, output) - std::max<int64_t>(base, 0), 0);
      continue;
    }
    for (int64_t o = 0; o < output; ++o) {
      const int64_t undilated = o * stride - w.padding_low + k * window_dilation;
      if (undilated < 0 || undilated % base_dilation != 0) continue;
      if (undilated / base_dilation >= input) continue;
      ++count;
    }
  }
  return count;
}

double ConvolutionFlops(const HloInstruction& conv) {
  if (conv.operand_count() < 2 || !conv.convolution_dimension_numbers) return 0;
  const ConvolutionDimensionNumbers& dnums = *conv.convolution_dimension_numbers;
  const Shape& lhs = conv.operand(0)->shape();
  const Shape& rhs = conv.operand(1)->shape();
  const Shape& out = conv.shape();
  const int64_t input_feature = Dim(lhs, dnums.input_feature_dimension);
  const int64_t output_feature = Dim(out, dnums.output_feature_dimension);
  const int64_t batch = Dim(lhs, dnums.input_batch_dimension);
  const int64_t feature_groups = std::max<int64_t>(conv.feature_group_count(), 1);
  const int64_t batch_groups = std::max<int64_t>(conv.batch_group_count(), 1);

  double positions = 1;
  const std::vector<WindowDimension> no_window;
  const std::vector<WindowDimension>& window = conv.window ? conv.window->dimensions : no_window;
  const size_t spatial = std::min({window.size(), dnums.input_spatial_dimensions.size(),
                                   dnums.kernel_spatial_dimensions.size(),
                                   dnums.output_spatial_dimensions.size()});
  for (size_t i = 0; i < spatial; ++i) {
    positions *= static_cast<double>(ValidPositionCount(
        Dim(lhs, dnums.input_spatial_dimensions[i]), Dim(rhs, dnums.kernel_spatial_dimensions[i]),
        Dim(out, dnums.output_spatial_dimensions[i]), window[i]));
  }
  const double fma = static_cast<double>(input_feature / feature_groups) *
                     static_cast<double>(output_feature) *
                     static_cast<double>(batch / batch_groups) * positions;
  return kFmaFlops * fma * ComplexFactor(conv);
}

int64_t WindowSize(const HloInstruction& instruction) {
  int64_t size = 1;
  if (!instruction.window) return size;
  for (const WindowDimension& d : instruction.window->dimensions) {
    // Saturates: a window of 2^62 x 2^62 is valid text.
    if (__builtin_mul_overflow(size, std::max<int64_t>(d.size, 0), &size)) {
      return std::numeric_limits<int64_t>::max();
    }
  }
  return size;
}

// The integers of a raw attribute value such as "{8,16}".
std::vector<int64_t> IntegersIn(const std::string& text) {
  std::vector<int64_t> values;
  int64_t value = 0;
  bool in_number = false;
  for (char c : text) {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      value = value * 10 + (c - '0');
      in_number = true;
    } else if (in_number) {
      values.push_back(value);
      value = 0;
      in_number = false;
    }
  }
  if (in_number) values.push_back(value);
  return values;
}

// Bytes a fusion reads through `value`, a fused parameter or a get-tuple-element of one (XLA's
// FusionParameterReadBytes): slices read what they produce, a dynamic-update-slice does not read
// the buffer it updates in place, and every other use shares one full read.
int64_t FusedValueReadBytes(const HloInstruction& value) {
  int64_t size = 0;
  bool read_in_full = false;
  auto read_full_once = [&] {
    if (!read_in_full) {
      read_in_full = true;
      size += Bytes(value.shape());
    }
  };
  for (const HloInstruction* user : value.users()) {
    switch (user->opcode()) {
      case H::kSlice:
        size += Bytes(user->shape());
        break;
      case H::kDynamicSlice:
        if (user->operand(0) == &value) {
          size += Bytes(user->shape());
        } else {
          read_full_once();
        }
        break;
      case H::kDynamicUpdateSlice:
        if (user->operand(0) != &value) read_full_once();
        break;
      case H::kGetTupleElement:
        if (value.shape().IsTuple()) {
          size += FusedValueReadBytes(*user);
        } else {
          read_full_once();
        }
        break;
      default:
        read_full_once();
    }
  }
  return size;
}

// Bytes a fusion writes for the output produced by `root`: an in-place dynamic-update-slice
// (seen through bitcasts) writes only its update.
int64_t FusionOutputBytes(const HloInstruction* root, const Shape& shape) {
  while (root != nullptr && root->opcode() == H::kBitcast && root->operand_count() == 1) {
    root = root->operand(0);
  }
  if (root != nullptr && root->opcode() == H::kDynamicUpdateSlice && root->operand_count() >= 2) {
    return Bytes(root->operand(1)->shape());
  }
  return Bytes(shape);
}

HloCost Max(const HloCost& a, const HloCost& b) {
  HloCost m;
  m.flops = std::max(a.flops, b.flops);
  m.transcendentals = std::max(a.transcendentals, b.transcendentals);
  m.bytes_accessed = std::max(a.bytes_accessed, b.bytes_accessed);
  m.output_bytes = std::max(a.output_bytes, b.output_bytes);
  return m;
}

}  // namespace

HloCost HloCostAnalysis::InstructionCost(const HloInstruction& instruction) {
  auto it = instruction_costs_.find(&instruction);
  if (it != instruction_costs_.end()) return it->second;
  HloCost cost = Compute(instruction);
  instruction_costs_.emplace(&instruction, cost);
  return cost;
}

HloCost HloCostAnalysis::ComputationCost(const HloComputation& computation) {
  auto it = computation_costs_.find(&computation);
  if (it != computation_costs_.end()) return it->second;
  if (!in_progress_.insert(&computation).second) return HloCost{};  // a call cycle
  // Every computation this one reaches is costed first, callees before callers, in an iterative
  // post order: a chain of 100,000 nested calls must not recurse 100,000 deep. When a computation
  // is summed below, each of its callees is cached, or in progress (a cycle: it costs nothing).
  auto callees_of = [](const HloComputation* c) {
    std::vector<const HloComputation*> callees;
    for (const HloInstruction* instruction : c->instructions()) {
      for (const HloComputation* callee : instruction->called_computations()) {
        if (callee != nullptr) callees.push_back(callee);
      }
    }
    return callees;
  };
  std::vector<const HloComputation*> order;
  std::vector<std::pair<const HloComputation*, std::vector<const HloComputation*>>> stack;
  stack.emplace_back(&computation, callees_of(&computation));
  while (!stack.empty()) {
    std::vector<const HloComputation*>& pending = stack.back().second;
    if (pending.empty()) {
      order.push_back(stack.back().first);
      stack.pop_back();
      continue;
    }
    const HloComputation* next = pending.back();
    pending.pop_back();
    if (computation_costs_.contains(next) || !in_progress_.insert(next).second) continue;
    stack.emplace_back(next, callees_of(next));
  }
  for (const HloComputation* c : order) {
    HloCost total;
    for (const HloInstruction* instruction : c->instructions()) {
      total += InstructionCost(*instruction);
    }
    in_progress_.erase(c);
    computation_costs_.emplace(c, total);
  }
  return computation_costs_.at(&computation);
}

std::vector<std::pair<const HloInstruction*, HloCost>> HloCostAnalysis::InstructionCosts(
    const HloComputation& computation) {
  std::vector<std::pair<const HloInstruction*, HloCost>> costs;
  for (const HloInstruction* instruction : computation.MakeInstructionPostOrder()) {
    costs.emplace_back(instruction, InstructionCost(*instruction));
  }
  return costs;
}

HloCost HloCostAnalysis::ModuleCost(const HloModule& module) {
  const HloComputation* entry = module.entry_computation();
  return entry == nullptr ? HloCost{} : ComputationCost(*entry);
}

HloCost HloCostAnalysis::FusionCost(const HloInstruction& fusion) {
  const HloComputation* fused = fusion.fused_computation();
  if (fused == nullptr) return DefaultBytes(fusion);
  const HloCost inner = ComputationCost(*fused);
  HloCost cost;
  cost.flops = inner.flops;
  cost.transcendentals = inner.transcendentals;

  int64_t read = 0;
  for (const HloInstruction* parameter : fused->parameter_instructions()) {
    if (parameter != nullptr) read += FusedValueReadBytes(*parameter);
  }
  for (const HloInstruction* instruction : fused->instructions()) {
    if (instruction->opcode() == H::kConstant && ElementsRecursive(instruction->shape()) > 1) {
      read += Bytes(instruction->shape());
    }
  }

  int64_t written = 0;
  const HloInstruction* root = fused->root_instruction();
  const Shape& shape = fusion.shape();
  if (shape.IsTuple() && root != nullptr && root->opcode() == H::kTuple &&
      root->operand_count() == shape.tuple_shapes_size()) {
    for (int64_t i = 0; i < shape.tuple_shapes_size(); ++i) {
      written += FusionOutputBytes(root->operand(i), shape.tuple_shapes(i));
    }
  } else {
    written = FusionOutputBytes(root, shape);
  }
  cost.bytes_accessed = read + written;
  cost.output_bytes = written;
  return cost;
}

HloCost HloCostAnalysis::Compute(const HloInstruction& instruction) {
  const HloOpcode opcode = instruction.opcode();
  const Shape& shape = instruction.shape();
  const double elements = static_cast<double>(Elements(shape));
  auto operand_shape = [&](int64_t i) -> const Shape& {
    static const Shape kNone;
    return i < instruction.operand_count() ? instruction.operand(i)->shape() : kNone;
  };
  // The cost of one application of a called computation; zero when it is missing.
  auto called = [&](const HloComputation* computation) {
    return computation == nullptr ? HloCost{} : ComputationCost(*computation);
  };
  // `bytes` with the flops and transcendentals of `per_application` applied `count` times.
  auto applications = [](HloCost bytes, const HloCost& per_application, double count) {
    bytes.flops += per_application.flops * count;
    bytes.transcendentals += per_application.transcendentals * count;
    return bytes;
  };

  if (MovesNothing(opcode) || IsAsyncCompletion(opcode)) return HloCost{};

  switch (opcode) {
    // --- Called computations ---
    case H::kFusion:
      return FusionCost(instruction);
    case H::kWhile:
      return called(instruction.while_condition()) + called(instruction.while_body());
    case H::kCall:
      return called(instruction.to_apply());
    case H::kAsyncStart: {
      HloCost cost;
      for (const HloComputation* computation : instruction.called_computations()) {
        cost += called(computation);
      }
      return cost;
    }
    case H::kConditional: {
      HloCost cost;
      bool first = true;
      for (const HloComputation* branch : instruction.branch_computations()) {
        cost = first ? called(branch) : Max(cost, called(branch));
        first = false;
      }
      return cost;
    }

    // --- Reductions and other ops applying a computation ---
    case H::kReduce: {
      const double count = std::max<double>(
          static_cast<double>(Elements(operand_shape(0))) - elements, 0);
      return applications(DefaultBytes(instruction), called(instruction.to_apply()), count);
    }
    case H::kReduceWindow: {
      const double count = static_cast<double>(std::max<int64_t>(WindowSize(instruction) - 1, 0)) *
                           elements;
      return applications(DefaultBytes(instruction), called(instruction.to_apply()), count);
    }
    case H::kMap:
      return applications(DefaultBytes(instruction), called(instruction.to_apply()), elements);
    case H::kScan: {
      // One application of the body per position along the scanned dimension.
      const std::vector<int64_t>& dims = instruction.dimensions();
      const double length =
          static_cast<double>(dims.empty() ? 1 : Dim(operand_shape(0), dims[0]));
      return applications(DefaultBytes(instruction), called(instruction.to_apply()), length);
    }
    case H::kSelectAndScatter: {
      const double source = static_cast<double>(Elements(operand_shape(1)));
      const double selects =
          source * static_cast<double>(std::max<int64_t>(WindowSize(instruction) - 1, 0));
      HloCost cost = applications(DefaultBytes(instruction), called(instruction.select()), selects);
      return applications(cost, called(instruction.scatter()), source);
    }
    case H::kScatter: {
      // Operands: n inputs, the indices, n updates.
      const int64_t n = (instruction.operand_count() - 1) / 2;
      int64_t update_bytes = 0;
      for (int64_t i = 0; i < n; ++i) update_bytes += Bytes(operand_shape(n + 1 + i));
      const int64_t index_bytes = n >= 0 ? Bytes(operand_shape(n)) : 0;
      HloCost bytes;
      bytes.bytes_accessed = 3 * update_bytes + index_bytes;
      bytes.output_bytes = update_bytes;
      const double count = static_cast<double>(Elements(operand_shape(n + 1)));
      return applications(bytes, called(instruction.to_apply()), count);
    }
    case H::kAllReduce:
    case H::kAllReduceStart:
    case H::kReduceScatter: {
      // As XLA: two participants, one combine per output element.
      HloCost cost = DefaultBytes(instruction);
      if (opcode == H::kAllReduceStart && shape.IsTuple()) {
        cost = Moves(OperandBytes(instruction),
                     std::max<int64_t>(Bytes(shape) - OperandBytes(instruction), 0));
      }
      cost.flops = static_cast<double>(ElementsRecursive(shape));
      return cost;
    }

    // --- Linear algebra ---
    case H::kDot:
    case H::kRaggedDot:
    case H::kScaledDot: {
      HloCost cost = DefaultBytes(instruction);
      cost.flops = DotFlops(instruction);
      return cost;
    }
    case H::kConvolution: {
      HloCost cost = DefaultBytes(instruction);
      cost.flops = ConvolutionFlops(instruction);
      return cost;
    }
    case H::kFft: {
      HloCost cost = DefaultBytes(instruction);
      double log_factors = 1;
      if (const std::string* lengths = instruction.raw_attribute("fft_length")) {
        for (int64_t length : IntegersIn(*lengths)) {
          log_factors *= static_cast<double>(Log2Floor(length));
        }
      }
      cost.flops = kFmaFlops * 4 * log_factors * static_cast<double>(Elements(operand_shape(0)));
      return cost;
    }
    case H::kCholesky: {
      const Shape& a = operand_shape(0);
      const int64_t half = Bytes(a) / 2;
      HloCost cost = Moves(half, half);
      cost.flops = static_cast<double>(Dim(a, a.rank() - 1, 0)) *
                   static_cast<double>(Elements(a)) / 3;
      return cost;
    }
    case H::kTriangularSolve: {
      const Shape& a = operand_shape(0);
      HloCost cost = Moves(Bytes(a) / 2 + Bytes(operand_shape(1)), Bytes(shape));
      cost.flops = kFmaFlops * static_cast<double>(Dim(a, a.rank() - 1, 0)) *
                   static_cast<double>(Elements(operand_shape(1)));
      return cost;
    }

    // --- Sorting ---
    case H::kSort: {
      HloCost cost = DefaultBytes(instruction);
      const int64_t n = Elements(operand_shape(0));
      cost.flops = static_cast<double>(n) * static_cast<double>(Log2Ceiling(n));
      return cost;
    }
    case H::kTopK: {
      HloCost cost = DefaultBytes(instruction);
      const Shape& input = operand_shape(0);
      const Shape& values = shape.IsTuple() && shape.tuple_shapes_size() > 0
                                ? shape.tuple_shapes(0)
                                : shape;
      const int64_t k = Dim(values, values.rank() - 1);
      cost.flops = static_cast<double>(Elements(input)) *
                   static_cast<double>(std::max<int64_t>(Log2Ceiling(k), 1));
      return cost;
    }

    // --- Data movement that reads only part of an operand ---
    case H::kSlice:
      return Moves(Bytes(shape), Bytes(shape));
    case H::kDynamicSlice:
      return Moves(Bytes(shape) + OperandBytesFrom(instruction, 1), Bytes(shape));
    case H::kGather:
      return Moves(Bytes(shape) + OperandBytesFrom(instruction, 1), Bytes(shape));
    case H::kDynamicUpdateSlice: {
      const int64_t update = Bytes(operand_shape(1));
      return Moves(update + OperandBytesFrom(instruction, 2), update);
    }
    case H::kGetDimensionSize:
      return Moves(0, Bytes(shape));

    // --- Asynchronous starts whose result carries the operands along ---
    case H::kCopyStart:
      return Moves(OperandBytes(instruction), OperandBytes(instruction));
    case H::kAllGatherStart:
    case H::kCollectivePermuteStart:
      if (shape.IsTuple()) {
        return Moves(OperandBytes(instruction),
                     std::max<int64_t>(Bytes(shape) - OperandBytes(instruction), 0));
      }
      return DefaultBytes(instruction);

    // --- Random numbers: one transcendental per element, as XLA ---
    case H::kRng: {
      HloCost cost = DefaultBytes(instruction);
      cost.transcendentals = elements;
      return cost;
    }
    case H::kRngBitGenerator: {
      HloCost cost = DefaultBytes(instruction);
      cost.transcendentals = static_cast<double>(ElementsRecursive(shape));
      return cost;
    }

    // --- Pure data movement and ops whose work is unknown: bytes only ---
    case H::kCopy:
    case H::kBitcastConvert:
    case H::kBroadcast:
    case H::kReshape:
    case H::kDynamicReshape:
    case H::kTranspose:
    case H::kReverse:
    case H::kConcatenate:
    case H::kPad:
    case H::kIota:
    case H::kCustomCall:
    case H::kBatchNormTraining:
    case H::kBatchNormInference:
    case H::kBatchNormGrad:
      return DefaultBytes(instruction);

    default:
      break;
  }

  // Elementwise arithmetic: one flop (or transcendental) per output element.
  if (IsElementwiseUnary(opcode) || IsElementwiseBinary(opcode) || opcode == H::kSelect ||
      opcode == H::kClamp) {
    HloCost cost = DefaultBytes(instruction);
    if (IsTranscendental(opcode)) {
      cost.transcendentals = elements;
    } else {
      cost.flops = elements;
    }
    return cost;
  }
  // Everything else (collectives, send/recv, infeed/outfeed, ids, set-dimension-size, ...):
  // no arithmetic, operands read and result written.
  return DefaultBytes(instruction);
}

HloCost CostOf(const HloInstruction& instruction) {
  HloCostAnalysis analysis;
  return analysis.InstructionCost(instruction);
}

HloCost ComputationCost(const HloComputation& computation) {
  HloCostAnalysis analysis;
  return analysis.ComputationCost(computation);
}

HloCost ModuleCost(const HloModule& module) {
  HloCostAnalysis analysis;
  return analysis.ModuleCost(module);
}

}  // namespace xlens
