#include "compiler/runtime/executable.h"

#include <chrono>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "compiler/codegen/ir_array.h"
#include "compiler/support/float_environment.h"

namespace xlens::runtime {

Executable::~Executable() {
  // The thunks refer to code the JIT owns: drop them first.
  thunks_.clear();
  jit_.reset();
  std::free(arena_);
}

namespace {

bool IsRowMajor(const Shape& shape) {
  return !shape.has_layout() ||
         shape.layout().minor_to_major == shape_util::DefaultMinorToMajor(shape.rank());
}

// Calls fn(row-major element number, physical element number) for every element.
template <typename Fn>
void ForEachElement(const Shape& shape, Fn fn) {
  const std::vector<int64_t> strides = codegen::LayoutStrides(shape);
  const int64_t n = shape.num_elements();
  std::vector<int64_t> index(shape.rank(), 0);
  int64_t physical = 0;
  for (int64_t i = 0; i < n; ++i) {
    fn(i, physical);
    for (int64_t d = shape.rank() - 1; d >= 0; --d) {
      physical += strides[d];
      if (++index[d] < shape.dimensions(d)) break;
      physical -= strides[d] * index[d];
      index[d] = 0;
    }
  }
}

}  // namespace

void CopyToLayout(const uint8_t* row_major, const Shape& shape, char* destination) {
  const int64_t width = ByteWidth(shape.element_type());
  if (shape.num_elements() == 0) return;  // as in CopyFromLayout
  if (IsRowMajor(shape)) {
    std::memcpy(destination, row_major, shape.num_elements() * width);
    return;
  }
  ForEachElement(shape, [&](int64_t i, int64_t p) {
    std::memcpy(destination + p * width, row_major + i * width, width);
  });
}

void CopyFromLayout(const char* source, const Shape& shape, uint8_t* row_major) {
  const int64_t width = ByteWidth(shape.element_type());
  // An empty array may have no buffer (null): memcpy must not see it, even for zero bytes.
  if (shape.num_elements() == 0) return;
  if (IsRowMajor(shape)) {
    std::memcpy(row_major, source, shape.num_elements() * width);
    return;
  }
  ForEachElement(shape, [&](int64_t i, int64_t p) {
    std::memcpy(row_major + i * width, source + p * width, width);
  });
}

namespace {

Status CheckArgumentCount(const HloModule& module, size_t count) {
  const int64_t parameters = module.entry_computation()->num_parameters();
  if (static_cast<int64_t>(count) == parameters) return OkStatus();
  return Error(fmt::format("{} takes {} arguments, {} given", module.name(), parameters, count));
}

// ForEachArgumentLeaf over `count` arguments, the p-th being argument(p).
Status ForEachLeafOf(const HloModule& module, size_t count,
                     const std::function<const Literal&(size_t)>& argument,
                     const std::function<Status(const Shape&, const uint8_t*, size_t)>& fn) {
  const HloComputation& entry = *module.entry_computation();
  RETURN_IF_ERROR(CheckArgumentCount(module, count));
  size_t leaf_number = 0;
  for (int64_t p = 0; p < entry.num_parameters(); ++p) {
    const HloInstruction* param = entry.parameter_instruction(p);
    if (!shape_util::Compatible(param->shape(), argument(p).shape())) {
      return Error(fmt::format("argument {} is {} but parameter {} is {}", p,
                               argument(p).shape().ToString(false), param->name(),
                               param->shape().ToString(false)));
    }
    Status status = OkStatus();
    param->shape().ForEachLeaf([&](const Shape& s, const std::vector<int64_t>& index) {
      if (!s.IsArray() || !status.ok()) return;
      const Literal* leaf = &argument(p);
      for (int64_t i : index) leaf = &leaf->tuple_element(i);
      if (leaf->is_elided() || leaf->is_text_only()) {
        status = Error(fmt::format("argument {} has no data", p));
        return;
      }
      status = fn(s, leaf->untyped_data(), leaf_number++);
    });
    RETURN_IF_ERROR(status);
  }
  return OkStatus();
}

}  // namespace

Status ForEachArgumentLeaf(const HloModule& module, std::span<const Literal> arguments,
                           const std::function<Status(const Shape&, const uint8_t*, size_t)>& fn) {
  return ForEachLeafOf(module, arguments.size(), [&](size_t p) -> const Literal& { return arguments[p]; }, fn);
}

Status Executable::SetArguments(std::span<const Literal> arguments) {
  return SetArguments(arguments.size(), [&](size_t p) -> const Literal& { return arguments[p]; });
}

Status Executable::SetArguments(size_t count, const std::function<const Literal&(size_t)>& argument,
                                bool borrow) {
  profiler::TraceSpan span("arguments to arena", profiler::category::kCopy);
  RecordParameterHomes();
  int64_t bytes = 0;
  Status status = ForEachLeafOf(*module_, count, argument, [&](const Shape& s, const uint8_t* data, size_t leaf) {
    bytes += PlaceParameterLeaf(leaf, s, data, borrow);
    return OkStatus();
  });
  span.AddArg("bytes", bytes);
  return status;
}

void Executable::RecordParameterHomes() {
  // Each parameter's own place in the arena, recorded before any slot is pointed elsewhere.
  const std::vector<int64_t>& slots = entry_plan_->parameter_slots();
  if (parameter_homes_.size() == slots.size()) return;
  parameter_homes_.clear();
  for (int64_t slot : slots) parameter_homes_.push_back(frame_[slot]);
}

int64_t Executable::PlaceParameterLeaf(size_t leaf, const Shape& s, const uint8_t* data, bool borrow) {
  const int64_t slot = entry_plan_->parameter_slots()[leaf];
  // Buffer assignment never lets a value share a parameter's allocation (a parameter is not
  // written in place), so a row-major argument is read where it lies; kernels assume 16-byte
  // aligned buffers.
  if (borrow && IsRowMajor(s) && reinterpret_cast<uintptr_t>(data) % 16 == 0 && s.num_elements() > 0) {
    frame_[slot] = const_cast<char*>(reinterpret_cast<const char*>(data));
    return 0;
  }
  frame_[slot] = parameter_homes_[leaf];
  CopyToLayout(data, s, frame_[slot]);
  return shape_util::ByteSizeOf(s);
}

void Executable::ReturnBorrowedSlots() {
  // The borrowed buffers are the caller's only for the call that was given them.
  const std::vector<int64_t>& slots = entry_plan_->parameter_slots();
  for (size_t leaf = 0; leaf < parameter_homes_.size(); ++leaf) frame_[slots[leaf]] = parameter_homes_[leaf];
}

Status Executable::Run(std::vector<int64_t>* thunk_ns) {
  profiler::TraceSpan span(execute_span_name_, profiler::category::kExecute);
  if (span.active()) {
    span.AddArg("module", module_->name());
    span.AddArg("run", runs_);
  }
  ++runs_;
  // As XLA's CPU runtime does: subnormals are flushed to zero while the computation runs (the
  // pool's chunks inherit it).
  ScopedFlushDenormal flush_denormals;
  ExecuteContext context{&ThreadPool::Default(), arena_ + scratch_offset_, device_};
  if (thunk_ns == nullptr) return RunThunks(thunks_, frame_.data(), context);
  thunk_ns->resize(thunks_.size(), 0);
  for (size_t i = 0; i < thunks_.size(); ++i) {
    const auto start = std::chrono::steady_clock::now();
    Status status = thunks_[i]->Run(frame_.data(), context);
    (*thunk_ns)[i] += std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now() - start).count();
    if (!status.ok()) return status.WithContext(thunks_[i]->hlo_name());
  }
  return OkStatus();
}

StatusOr<Literal> Executable::Results() const {
  profiler::TraceSpan span("results from arena", profiler::category::kCopy);
  const HloInstruction* root = module_->entry_computation()->root_instruction();
  Shape shape = root->shape();
  Literal result(shape);
  size_t leaf_number = 0;
  shape.ForEachLeaf([&](const Shape& s, const std::vector<int64_t>& index) {
    if (!s.IsArray()) return;
    Literal* leaf = &result;
    for (int64_t i : index) leaf = &leaf->tuple_element(i);
    CopyFromLayout(frame_[entry_plan_->root_slots()[leaf_number++]], s, leaf->untyped_data());
  });
  return result;
}

StatusOr<Literal> Executable::Execute(std::span<const Literal> arguments) {
  RETURN_IF_ERROR(SetArguments(arguments));
  RETURN_IF_ERROR(Run());
  return Results();
}

StatusOr<Literal> Executable::Execute(std::span<const Literal* const> arguments) {
  RETURN_IF_ERROR(SetArguments(arguments.size(), [&](size_t p) -> const Literal& { return *arguments[p]; },
                               /*borrow=*/may_borrow_arguments_));
  Status run = Run();
  StatusOr<Literal> results = run.ok() ? Results() : StatusOr<Literal>(run);
  ReturnBorrowedSlots();
  return results;
}

StatusOr<Literal> Executable::ExecuteOnArrays(std::span<const void* const> arrays) {
  const HloComputation& entry = *module_->entry_computation();
  RETURN_IF_ERROR(CheckArgumentCount(*module_, arrays.size()));
  for (const HloInstruction* parameter : entry.parameter_instructions()) {
    if (!parameter->shape().IsArray()) {
      return Error(fmt::format("parameter {} of {} is {}, not an array", parameter->name(),
                               module_->name(), parameter->shape().ToString(false)));
    }
  }
  {
    profiler::TraceSpan span("arguments to arena", profiler::category::kCopy);
    RecordParameterHomes();
    int64_t bytes = 0;
    for (size_t p = 0; p < arrays.size(); ++p) {
      // With array parameters only, parameter p is leaf p.
      bytes += PlaceParameterLeaf(p, entry.parameter_instruction(p)->shape(),
                                  static_cast<const uint8_t*>(arrays[p]), may_borrow_arguments_);
    }
    span.AddArg("bytes", bytes);
  }
  Status run = Run();
  StatusOr<Literal> results = run.ok() ? Results() : StatusOr<Literal>(run);
  ReturnBorrowedSlots();
  return results;
}

std::string Executable::ThunkSequenceText() const { return ThunkSequenceToString(thunks_); }

}  // namespace xlens::runtime
