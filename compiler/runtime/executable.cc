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

// An element of 16 bytes (complex128), moved as one value.
struct Element16 {
  uint64_t word[2];
};

// Copies an array between row-major order (`row_major`) and the layout of `shape` (`laid_out`)
// in tiles of kTile x kTile elements over the two dimensions that are minor in each order, so
// that a tile reads and writes whole lines in both, and a row at a time where both orders have
// the same minor dimension, each element one move of its width. Walked element by element, with a
// memcpy each, a transposed f32[4096,2048]{0,1} is read 16 KiB apart: Execute on that module takes
// 60-68 ms that way and 54-56 ms in tiles (best calls, alternating runs), most of it still this
// copy and the faults of the fresh result.
template <typename T>
void CopyLaidOut(const Shape& shape, T* row_major, T* laid_out, bool to_row_major) {
  constexpr int64_t kTile = 16;
  const int64_t rank = shape.rank();
  const std::vector<int64_t> physical = codegen::LayoutStrides(shape);
  std::vector<int64_t> logical(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d) logical[d] = logical[d + 1] * shape.dimensions(d + 1);
  const int64_t r = rank - 1, m = shape.layout().minor_to_major[0];
  // Strides in locals: the stores could alias the vectors' elements (1-byte elements alias anything).
  const int64_t lm = logical[m], pr = physical[r];
  auto move = [to_row_major, row_major, laid_out](int64_t l, int64_t p) {
    if (to_row_major) {
      row_major[l] = laid_out[p];
    } else {
      laid_out[p] = row_major[l];
    }
  };
  // The dimensions walked outside the tiles, and where each index of them puts an element.
  std::vector<int64_t> outer;
  for (int64_t d = 0; d < rank; ++d) {
    if (d != r && d != m) outer.push_back(d);
  }
  std::vector<int64_t> index(outer.size(), 0);
  int64_t l0 = 0, p0 = 0;
  const int64_t nr = shape.dimensions(r), nm = m == r ? 1 : shape.dimensions(m);
  for (;;) {
    if (m == r) {
      for (int64_t b = 0; b < nr; ++b) move(l0 + b, p0 + b);  // physical[r] is 1 here
    } else {
      for (int64_t a0 = 0; a0 < nm; a0 += kTile) {
        const int64_t a1 = std::min(nm, a0 + kTile);
        for (int64_t b0 = 0; b0 < nr; b0 += kTile) {
          const int64_t b1 = std::min(nr, b0 + kTile);
          for (int64_t b = b0; b < b1; ++b) {
            for (int64_t a = a0; a < a1; ++a) {
              move(l0 + a * lm + b, p0 + a + b * pr);  // physical[m] is 1
            }
          }
        }
      }
    }
    int64_t k = static_cast<int64_t>(outer.size()) - 1;
    for (; k >= 0; --k) {
      const int64_t d = outer[k];
      l0 += logical[d];
      p0 += physical[d];
      if (++index[k] < shape.dimensions(d)) break;
      l0 -= logical[d] * index[k];
      p0 -= physical[d] * index[k];
      index[k] = 0;
    }
    if (k < 0) return;
  }
}

void CopyLaidOut(const Shape& shape, uint8_t* row_major, char* laid_out, bool to_row_major) {
  auto copy = [&]<typename T>(T*) {
    CopyLaidOut(shape, reinterpret_cast<T*>(row_major), reinterpret_cast<T*>(laid_out), to_row_major);
  };
  switch (ByteWidth(shape.element_type())) {
    case 1: return copy(static_cast<uint8_t*>(nullptr));
    case 2: return copy(static_cast<uint16_t*>(nullptr));
    case 4: return copy(static_cast<uint32_t*>(nullptr));
    case 8: return copy(static_cast<uint64_t*>(nullptr));
    case 16: return copy(static_cast<Element16*>(nullptr));
    default: break;
  }
  // Another width (none exists today) moves bytes: each element a row of them, minor in both.
  std::vector<int64_t> dimensions = shape.dimensions();
  dimensions.push_back(ByteWidth(shape.element_type()));
  Shape bytes(PrimitiveType::U8, dimensions);
  std::vector<int64_t> minor_to_major = {shape.rank()};
  for (int64_t d : shape.layout().minor_to_major) minor_to_major.push_back(d);
  bytes.set_layout(Layout{minor_to_major, ""});
  CopyLaidOut(bytes, row_major, laid_out, to_row_major);
}

}  // namespace

void CopyToLayout(const uint8_t* row_major, const Shape& shape, char* destination) {
  const int64_t width = ByteWidth(shape.element_type());
  if (shape.num_elements() == 0) return;  // as in CopyFromLayout
  if (IsRowMajor(shape)) {
    std::memcpy(destination, row_major, shape.num_elements() * width);
    return;
  }
  CopyLaidOut(shape, const_cast<uint8_t*>(row_major), destination, /*to_row_major=*/false);
}

void CopyFromLayout(const char* source, const Shape& shape, uint8_t* row_major) {
  const int64_t width = ByteWidth(shape.element_type());
  // An empty array may have no buffer (null): memcpy must not see it, even for zero bytes.
  if (shape.num_elements() == 0) return;
  if (IsRowMajor(shape)) {
    std::memcpy(row_major, source, shape.num_elements() * width);
    return;
  }
  CopyLaidOut(shape, row_major, const_cast<char*>(source), /*to_row_major=*/true);
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
