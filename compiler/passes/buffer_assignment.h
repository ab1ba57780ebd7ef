// Buffer assignment: decides where every array the entry computation produces lives at run time,
// over a sequential schedule (the entry's EarlyResultSchedule, its post-order with each result
// run as soon as it is ready). An analysis, not a pass: it reads the module and leaves it alone.
// Run copy-insertion first so that the sharing it does is safe.
//
// The model:
//  - one logical buffer per array value an instruction defines (per array leaf of a tuple;
//    tuple index tables are not materialised, a tuple is only its leaves). get-tuple-element,
//    tuple, bitcast, add-dependency, opt-barrier and domain define nothing: they name buffers of
//    their operands;
//  - a fusion is one kernel that writes its output buffers; fused computations and the scalar
//    computations of reduce, map, sort, scatter, ... get no buffers;
//  - while, conditional and call run their computations with a scratch buffer of their own, live
//    only at the instruction, as large as the callee's own temp peak (computed the same way, its
//    parameters and root being the caller's buffers: a while body's state is the while's buffer);
//  - a buffer is live from its definition to its last use; entry parameters and constants live
//    throughout, outputs from their definition to the end;
//  - in-place: an elementwise op, a kLoop fusion whose parameter is only read elementwise, a
//    dynamic-update-slice, a scatter or a while may write its result into an operand's buffer of
//    the same size when that buffer dies at it and is neither a parameter, a constant nor an
//    output;
//  - allocations: one per entry parameter array (read-only unless it is also an output), one per
//    constant, one per output buffer (maybe-live-out), and one preallocated-temp allocation that
//    packs every other buffer with a greedy-by-size, best-fit heap simulation over the live ranges
//    (offsets and sizes rounded up to the alignment).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "compiler/hlo/module.h"
#include "compiler/support/status.h"

namespace xlens {

struct BufferAssignmentOptions {
  int64_t alignment = 64;
  // Let an instruction write into the buffer of an operand that dies at it.
  bool allow_in_place = true;
  // Let a row fusion (kInput, one array result) write into the buffer of a parameter that it
  // reads only at the element it writes and through reductions whose results no output reads
  // directly: the CPU's kernels compute such a reduction over a row, or materialize it, before
  // they write any element it covers (softmax over causal attention's f32[8,512,512] scores:
  // 16 MiB of temporaries -> 8, its output written over the lines it has just read).
  bool in_place_row_fusions = false;
};

// One value: an array an instruction defines, or a called computation's scratch.
struct LogicalBuffer {
  int64_t id = 0;
  const HloInstruction* instruction = nullptr;
  std::vector<int64_t> index;  // where in the instruction's shape
  Shape shape;                 // invalid for scratch
  bool is_scratch = false;
  int64_t size = 0;            // bytes, unaligned
  int64_t start = 0, end = 0;  // live range, inclusive schedule positions
  // "<3 add.1 @5>": id, instruction (and index inside a tuple), position of the definition.
  std::string ToShortString() const;
};

struct BufferAllocation {
  enum class Kind { kParameter, kConstant, kOutput, kTemp };
  struct Assigned {
    int64_t buffer = 0;  // LogicalBuffer id
    int64_t offset = 0;
    int64_t size = 0;
  };
  int64_t index = 0;
  Kind kind = Kind::kTemp;
  int64_t size = 0;
  bool maybe_live_out = false;
  int64_t parameter_number = -1;  // kParameter
  std::vector<int64_t> parameter_index;
  Shape parameter_shape;
  std::vector<Assigned> assigned;
};

// Where an array lives: an allocation, and a byte range in it.
struct BufferSlice {
  int64_t allocation = 0;
  int64_t offset = 0;
  int64_t size = 0;
};

class BufferAssignment {
 public:
  const std::vector<LogicalBuffer>& buffers() const { return buffers_; }
  const std::vector<BufferAllocation>& allocations() const { return allocations_; }
  // The instructions of the entry in the order they run.
  const std::vector<const HloInstruction*>& schedule() const { return schedule_; }

  // The slice holding the array at `index` of `instruction` (an entry instruction).
  StatusOr<BufferSlice> GetSlice(const HloInstruction& instruction,
                                 const std::vector<int64_t>& index = {}) const;

  // Sum of the sizes of all logical buffers (what it would take with no sharing at all).
  int64_t sum_of_buffer_sizes() const { return sum_of_buffer_sizes_; }
  // Sum of the sizes of all allocations.
  int64_t total_allocated_bytes() const;
  // Most bytes live at once over the schedule (in-place pairs counted once).
  int64_t peak_live_bytes() const { return peak_live_bytes_; }
  // Size of the preallocated-temp allocation (0 when there is none).
  int64_t peak_temp_bytes() const;

  // The report XLA writes as ...-buffer-assignment.txt: allocations, the values in each, totals.
  std::string ToString() const;

 private:
  friend StatusOr<BufferAssignment> AssignBuffers(const HloModule&, const BufferAssignmentOptions&);
  std::string module_name_;
  BufferAssignmentOptions options_;
  std::vector<LogicalBuffer> buffers_;
  std::vector<BufferAllocation> allocations_;
  std::vector<const HloInstruction*> schedule_;
  std::map<std::pair<const HloInstruction*, std::vector<int64_t>>, int64_t> slots_;
  std::map<int64_t, BufferSlice> buffer_slices_;
  int64_t sum_of_buffer_sizes_ = 0;
  int64_t peak_live_bytes_ = 0;
};

StatusOr<BufferAssignment> AssignBuffers(const HloModule& module,
                                         const BufferAssignmentOptions& options = {});

// "20B", "16.00KiB", "1.50MiB", as XLA writes byte counts.
std::string HumanReadableBytes(int64_t bytes);

}  // namespace xlens
