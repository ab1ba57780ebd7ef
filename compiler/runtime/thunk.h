// Thunks: the steps an Executable runs, in order. A thunk reads and writes the arrays of a frame
// (an array of pointers, see frame_plan.h) and never allocates: every buffer it touches was
// placed in the executable's arena when it was built.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/codegen/kernel_emitter.h"
#include "compiler/support/status.h"
#include "compiler/support/thread_pool.h"
#include "profiler/host_tracer.h"

namespace xlens {
class DeviceCollectives;  // compiler/hlo/collective_rendezvous.h
}  // namespace xlens

namespace xlens::runtime {

struct ExecuteContext {
  ThreadPool* pool = nullptr;
  char* scratch = nullptr;  // kernel scratch, shared by all kernels (they run one at a time)
  // The simulated device the executable runs as among several, for its collectives; nullptr:
  // the only device.
  DeviceCollectives* device = nullptr;
};

// What a thunk's span on the timeline and its row in the per-HLO profile show, fixed when the
// executable is built so that recording a span copies and computes nothing new.
struct ThunkTraceInfo {
  // The span's name (the HLO instruction), category and arguments (hlo_op, fusion_kind,
  // op_names, module, bytes_accessed, flops, ...); none for a thunk built without annotation.
  std::shared_ptr<const profiler::SpanInfo> span;
  std::string kind;  // "kLoop fusion", "dot (Eigen)", "copy", "while", ...
  double bytes_accessed = 0;  // per execution (cost analysis)
  double flops = 0;
  double transcendentals = 0;
  std::string source;  // "train.py:15", the instruction's line in the user's program; may be empty
};

class Thunk {
 public:
  explicit Thunk(std::string hlo_name) : hlo_name_(std::move(hlo_name)) {}
  virtual ~Thunk() = default;
  virtual Status Execute(char** frame, ExecuteContext& context) const = 0;
  // Execute, recorded as a span when a trace session is running (one branch when not).
  Status Run(char** frame, ExecuteContext& context) const {
    if (!profiler::TracingEnabled()) return Execute(frame, context);
    return ExecuteTraced(frame, context);
  }
  void set_trace_info(ThunkTraceInfo info) { trace_info_ = std::move(info); }
  // True for a thunk whose span says what happened in this execution (a collective: whom it met,
  // how long it waited), so Run records none around it.
  virtual bool RecordsOwnSpan() const { return false; }
  const ThunkTraceInfo& trace_info() const { return trace_info_; }
  // One line (and nested lines for control flow) of thunk_sequence.txt.
  virtual std::string ToString(int indent) const = 0;
  const std::string& hlo_name() const { return hlo_name_; }

 private:
  Status ExecuteTraced(char** frame, ExecuteContext& context) const;

  std::string hlo_name_;
  ThunkTraceInfo trace_info_;
};

using ThunkSequence = std::vector<std::unique_ptr<Thunk>>;

Status RunThunks(const ThunkSequence& thunks, char** frame, ExecuteContext& context);
std::string ThunkSequenceToString(const ThunkSequence& thunks, int indent = 0);

// A generated kernel: its phases run one after another, each split over the thread pool.
class KernelThunk : public Thunk {
 public:
  using PhaseFn = void (*)(void**, int64_t, int64_t);
  KernelThunk(std::string hlo_name, codegen::KernelSpec spec, std::vector<PhaseFn> phases,
              std::vector<int64_t> operand_slots, std::vector<int64_t> output_slots);
  Status Execute(char** frame, ExecuteContext& context) const override;
  std::string ToString(int indent) const override;
  const codegen::KernelSpec& spec() const { return spec_; }
  // The frame slots of its operands' leaves, then of its outputs'.
  const std::vector<int64_t>& slots() const { return slots_; }
  // Tasks [begin, end) of its only phase, on the calling thread: the kernel run as a library
  // call's epilogue, on the elements each of the call's parts wrote (part_epilogue.h).
  void RunTasks(char** frame, char* scratch, int64_t begin, int64_t end) const;

 private:
  codegen::KernelSpec spec_;
  std::vector<PhaseFn> phases_;
  std::vector<int64_t> slots_;  // operands, then outputs
  mutable std::vector<void*> table_;
};

// Copies one array between slots (nothing when both are the same buffer).
class CopyThunk : public Thunk {
 public:
  CopyThunk(std::string hlo_name, int64_t source, int64_t destination, int64_t bytes)
      : Thunk(std::move(hlo_name)), source_(source), destination_(destination), bytes_(bytes) {}
  Status Execute(char** frame, ExecuteContext& context) const override;
  std::string ToString(int indent) const override;

 private:
  int64_t source_, destination_, bytes_;
};

}  // namespace xlens::runtime
