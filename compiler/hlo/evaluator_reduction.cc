// Reductions: reduce, reduce-window and select-and-scatter, all variadic where XLA allows it.
// Elements are combined one at a time in row-major order of the input, so the result is the
// sequential left fold XLA's own reference evaluator computes.
#include <algorithm>

#include "compiler/hlo/evaluator_internal.h"

namespace xlens::evaluator_internal {
namespace {

// The i-th of the N results of `shape` (the shape itself when N is 1 and it is not a tuple).
StatusOr<const Shape*> ResultShape(const Shape& shape, int64_t count, int64_t i) {
  if (count == 1 && !shape.IsTuple()) return &shape;
  if (!shape.IsTuple() || shape.tuple_shapes_size() != count) {
    return Error(fmt::format("expected a tuple of {} results, got {}", count, shape.ToString(false)));
  }
  return &shape.tuple_shapes(i);
}

// N zero-initialised results filled with their init values, as one literal (a tuple when N > 1).
StatusOr<Literal> MakeResults(const Shape& shape, std::span<const Literal* const> inits,
                              std::span<const int64_t> dims) {
  const int64_t count = static_cast<int64_t>(inits.size());
  std::vector<Literal> results;
  for (int64_t i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(const Shape* result_shape, ResultShape(shape, count, i));
    RETURN_IF_ERROR(ExpectDimensions(*result_shape, dims, fmt::format("result {}", i)));
    if (result_shape->element_type() != inits[i]->shape().element_type()) {
      return Error(fmt::format("result {} has type {}, its init value {}", i,
                               PrimitiveTypeName(result_shape->element_type()),
                               PrimitiveTypeName(inits[i]->shape().element_type())));
    }
    Literal result(*result_shape);
    const std::vector<int64_t> zero_strides(dims.size(), 0);
    StridedCopy(ByteWidth(result_shape->element_type()), dims, result.untyped_data(), 0,
                StridesOf(*result_shape), inits[i]->untyped_data(), 0, zero_strides);
    results.push_back(std::move(result));
  }
  if (count == 1 && !shape.IsTuple()) return std::move(results[0]);
  return Literal::MakeTuple(std::move(results));
}

Literal& ResultAt(Literal& results, int64_t i) {
  return results.shape().IsTuple() ? results.tuple_element(i) : results;
}

// Splits N inputs followed by N init values, checking that the inits are scalars.
struct VariadicOperands {
  std::span<const Literal* const> inputs;
  std::span<const Literal* const> inits;
  std::vector<PrimitiveType> reducer_argument_types;  // accumulators, then input elements
  std::vector<PrimitiveType> accumulator_types;
};

StatusOr<VariadicOperands> SplitVariadic(std::span<const Literal* const> operands) {
  if (operands.empty() || operands.size() % 2 != 0) {
    return Error(fmt::format("expected N inputs and N init values, got {} operands",
                             operands.size()));
  }
  VariadicOperands split;
  const size_t count = operands.size() / 2;
  split.inputs = operands.subspan(0, count);
  split.inits = operands.subspan(count);
  for (size_t i = 0; i < count; ++i) {
    RETURN_IF_ERROR(ExpectDimensions(split.inits[i]->shape(), {}, fmt::format("init value {}", i)));
    if (!split.inputs[i]->shape().IsArray() ||
        split.inputs[i]->shape().dimensions() != split.inputs[0]->shape().dimensions()) {
      return Error("the inputs must be arrays of the same dimensions");
    }
    split.accumulator_types.push_back(split.inits[i]->shape().element_type());
  }
  split.reducer_argument_types = split.accumulator_types;
  for (size_t i = 0; i < count; ++i) {
    split.reducer_argument_types.push_back(split.inputs[i]->shape().element_type());
  }
  return split;
}

// Folds input element `input_index` of every input into the accumulators at `output_index`.
class Folder {
 public:
  Folder(ScalarCaller& caller, const VariadicOperands& operands, Literal& results)
      : caller_(caller), inputs_(operands.inputs) {
    const int64_t count = static_cast<int64_t>(inputs_.size());
    for (int64_t i = 0; i < count; ++i) {
      Literal& result = ResultAt(results, i);
      accumulators_.push_back(result.untyped_data());
      accumulator_widths_.push_back(ByteWidth(result.shape().element_type()));
      input_widths_.push_back(ByteWidth(inputs_[i]->shape().element_type()));
    }
    arguments_.resize(2 * count);
    results_.resize(count);
  }

  Status Fold(int64_t output_index, int64_t input_index) {
    const size_t count = inputs_.size();
    for (size_t i = 0; i < count; ++i) {
      uint8_t* accumulator = accumulators_[i] + output_index * accumulator_widths_[i];
      arguments_[i] = accumulator;
      arguments_[count + i] = inputs_[i]->untyped_data() + input_index * input_widths_[i];
      results_[i] = accumulator;
    }
    return caller_.Call(arguments_, results_);
  }

 private:
  ScalarCaller& caller_;
  std::span<const Literal* const> inputs_;
  std::vector<uint8_t*> accumulators_;
  std::vector<int64_t> accumulator_widths_, input_widths_;
  std::vector<const void*> arguments_;
  std::vector<void*> results_;
};

}  // namespace

StatusOr<int64_t> WindowedSize(int64_t size, const WindowDimension& w) {
  if (w.size < 1 || w.stride < 1 || w.window_dilation < 1 || w.base_dilation < 1) {
    return Error("window sizes, strides and dilations must be positive");
  }
  int64_t dilated = 0, padded = 0, extent = 0;
  bool overflow = false;
  if (size > 0) {
    overflow |= __builtin_mul_overflow(size - 1, w.base_dilation, &dilated);
    overflow |= __builtin_add_overflow(dilated, 1, &dilated);
  }
  overflow |= __builtin_add_overflow(dilated, w.padding_low, &padded);
  overflow |= __builtin_add_overflow(padded, w.padding_high, &padded);
  overflow |= __builtin_mul_overflow(w.size - 1, w.window_dilation, &extent);
  overflow |= __builtin_add_overflow(extent, 1, &extent);
  if (overflow) return Error("the padded or dilated window overflows 64 bits");
  if (padded < extent) return 0;
  return (padded - extent) / w.stride + 1;
}

namespace {

StatusOr<std::vector<int64_t>> WindowedDimensions(const Shape& input, const Window& window) {
  if (static_cast<int64_t>(window.dimensions.size()) != input.rank()) {
    return Error(fmt::format("window has {} dimensions for rank {}", window.dimensions.size(),
                             input.rank()));
  }
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < input.rank(); ++d) {
    ASSIGN_OR_RETURN(int64_t size, WindowedSize(input.dimensions(d), window.dimensions[d]));
    dims.push_back(size);
  }
  return dims;
}

// Calls fn(input linear index) for every in-bounds input element under the window at
// `output_index`, in row-major order of the window.
template <typename Fn>
Status ForEachInWindow(const Shape& input, const Window& window,
                       std::span<const int64_t> output_index, std::span<const int64_t> input_strides,
                       Fn&& fn) {
  const int64_t rank = input.rank();
  std::vector<int64_t> window_sizes;
  for (const WindowDimension& w : window.dimensions) window_sizes.push_back(w.size);
  IndexCounter window_index(window_sizes);
  do {
    int64_t linear = 0;
    bool in_bounds = true;
    for (int64_t d = 0; d < rank; ++d) {
      const WindowDimension& w = window.dimensions[d];
      const int64_t dilated =
          output_index[d] * w.stride + window_index.index()[d] * w.window_dilation - w.padding_low;
      if (dilated < 0 || dilated % w.base_dilation != 0) {
        in_bounds = false;
        break;
      }
      const int64_t position = dilated / w.base_dilation;
      if (position >= input.dimensions(d)) {
        in_bounds = false;
        break;
      }
      linear += position * input_strides[d];
    }
    if (in_bounds) RETURN_IF_ERROR(fn(linear));
  } while (window_index.Next());
  return OkStatus();
}

bool IsEmpty(std::span<const int64_t> dims) {
  return std::any_of(dims.begin(), dims.end(), [](int64_t d) { return d == 0; });
}

}  // namespace

StatusOr<Literal> HandleReduce(HloEvaluator& evaluator, const HloInstruction& instruction,
                               std::span<const Literal* const> operands) {
  ASSIGN_OR_RETURN(VariadicOperands split, SplitVariadic(operands));
  const Shape& input_shape = split.inputs[0]->shape();
  const int64_t rank = input_shape.rank();
  std::vector<bool> reduced(rank, false);
  for (int64_t dim : instruction.dimensions()) {
    if (dim < 0 || dim >= rank || reduced[dim]) {
      return Error(fmt::format("invalid reduce dimension {}", dim));
    }
    reduced[dim] = true;
  }
  std::vector<int64_t> kept_dims;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[d]) kept_dims.push_back(input_shape.dimensions(d));
  }
  ASSIGN_OR_RETURN(Literal results, MakeResults(instruction.shape(), split.inits, kept_dims));
  ASSIGN_OR_RETURN(ScalarCaller caller,
                   ScalarCaller::Create(evaluator, instruction.to_apply(),
                                        split.reducer_argument_types, split.accumulator_types));
  if (IsEmpty(input_shape.dimensions())) return results;

  // Output offset of each input dimension's step: 0 along reduced dimensions.
  const std::vector<int64_t> kept_strides = shape_util::RowMajorStrides(kept_dims);
  std::vector<int64_t> output_strides(rank, 0);
  for (int64_t d = 0, k = 0; d < rank; ++d) {
    if (!reduced[d]) output_strides[d] = kept_strides[k++];
  }
  Folder folder(caller, split, results);
  IndexCounter index(input_shape.dimensions());
  int64_t input_linear = 0;
  do {
    int64_t output_linear = 0;
    for (int64_t d = 0; d < rank; ++d) output_linear += index.index()[d] * output_strides[d];
    RETURN_IF_ERROR(folder.Fold(output_linear, input_linear));
    ++input_linear;
  } while (index.Next());
  return results;
}

StatusOr<Literal> HandleReduceWindow(HloEvaluator& evaluator, const HloInstruction& instruction,
                                     std::span<const Literal* const> operands) {
  ASSIGN_OR_RETURN(VariadicOperands split, SplitVariadic(operands));
  if (!instruction.window) return Error("reduce-window without a window");
  const Window& window = *instruction.window;
  const Shape& input_shape = split.inputs[0]->shape();
  ASSIGN_OR_RETURN(std::vector<int64_t> output_dims, WindowedDimensions(input_shape, window));
  ASSIGN_OR_RETURN(Literal results, MakeResults(instruction.shape(), split.inits, output_dims));
  ASSIGN_OR_RETURN(ScalarCaller caller,
                   ScalarCaller::Create(evaluator, instruction.to_apply(),
                                        split.reducer_argument_types, split.accumulator_types));
  if (IsEmpty(output_dims)) return results;
  Folder folder(caller, split, results);
  const std::vector<int64_t> input_strides = StridesOf(input_shape);
  IndexCounter output_index(output_dims);
  int64_t output_linear = 0;
  do {
    RETURN_IF_ERROR(ForEachInWindow(input_shape, window, output_index.index(), input_strides,
                                    [&](int64_t input_linear) {
                                      return folder.Fold(output_linear, input_linear);
                                    }));
    ++output_linear;
  } while (output_index.Next());
  return results;
}

StatusOr<Literal> HandleSelectAndScatter(HloEvaluator& evaluator,
                                         const HloInstruction& instruction,
                                         std::span<const Literal* const> operands) {
  const Literal& operand = *operands[0];
  const Literal& source = *operands[1];
  const Literal& init = *operands[2];
  const Shape& shape = instruction.shape();
  if (!instruction.window) return Error("select-and-scatter without a window");
  const Window& window = *instruction.window;
  for (const WindowDimension& w : window.dimensions) {
    if (w.base_dilation != 1 || w.window_dilation != 1) {
      return Error("select-and-scatter does not take dilated windows");
    }
  }
  RETURN_IF_ERROR(ExpectDimensions(operand.shape(), shape.dimensions(), "operand"));
  ASSIGN_OR_RETURN(std::vector<int64_t> source_dims, WindowedDimensions(operand.shape(), window));
  RETURN_IF_ERROR(ExpectDimensions(source.shape(), source_dims, "source"));
  const PrimitiveType operand_type = operand.shape().element_type();
  const PrimitiveType source_type = source.shape().element_type();
  if (init.shape().element_type() != shape.element_type() ||
      source_type != shape.element_type()) {
    return Error("source, init value and result must have the same element type");
  }
  ASSIGN_OR_RETURN(ScalarCaller select,
                   ScalarCaller::Create(evaluator, instruction.select(),
                                        {operand_type, operand_type}, {PrimitiveType::PRED}));
  ASSIGN_OR_RETURN(ScalarCaller scatter,
                   ScalarCaller::Create(evaluator, instruction.scatter(),
                                        {source_type, source_type}, {source_type}));
  const Literal* inits[] = {&init};
  ASSIGN_OR_RETURN(Literal result, MakeResults(shape, inits, shape.dimensions()));
  if (IsEmpty(source_dims)) return result;

  const int64_t operand_width = ByteWidth(operand_type);
  const int64_t source_width = ByteWidth(source_type);
  const std::vector<int64_t> operand_strides = StridesOf(operand.shape());
  IndexCounter source_index(source_dims);
  int64_t source_linear = 0;
  do {
    int64_t selected = -1;
    RETURN_IF_ERROR(ForEachInWindow(
        operand.shape(), window, source_index.index(), operand_strides,
        [&](int64_t candidate) -> Status {
          if (selected < 0) {
            selected = candidate;
            return OkStatus();
          }
          const void* arguments[] = {operand.untyped_data() + selected * operand_width,
                                     operand.untyped_data() + candidate * operand_width};
          ASSIGN_OR_RETURN(bool keep, select.CallPredicate(arguments));
          if (!keep) selected = candidate;
          return OkStatus();
        }));
    if (selected >= 0) {
      uint8_t* target = result.untyped_data() + selected * source_width;
      const void* arguments[] = {target, source.untyped_data() + source_linear * source_width};
      void* results[] = {target};
      RETURN_IF_ERROR(scatter.Call(arguments, results));
    }
    ++source_linear;
  } while (source_index.Next());
  return result;
}

}  // namespace xlens::evaluator_internal
