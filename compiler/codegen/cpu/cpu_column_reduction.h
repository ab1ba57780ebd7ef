// How the CPU emitter splits a column reduction (a reduce that keeps its operand's minor-most,
// contiguous dimension: a bias gradient, a batch mean, sum(x, axis=0)) into tasks.
//
// The kept dimension is the vector dimension: a task owns a tile of outputs (a block of the kept
// minor dimension, or several whole output rows when that dimension is short) and walks the
// reduced rows as its outer loop, accumulating the tile in a row buffer that stays in L1 while
// whole rows of the operand stream past it (in registers where the tile is one output row of at
// most kRegisterTileBytes: batch norm's sums over 128 channels). The split never cuts a row into
// pieces narrower than the tile: a block of 128 columns of a 1024-wide row, as an earlier form cut
// it, reads 512 bytes of each 4 KiB page and leaves the hardware prefetchers, which stop at page
// boundaries, cold.
//
// When the kept dimension alone gives too few tasks for the threads (a [4096,1024] sum over rows
// has one output row), the reduced rows are cut into slices too: each slice's partial tile goes to
// scratch and a second phase combines the slices in slice order with the init value. The plan
// depends only on the shapes, never on the number of threads, so a result is the same on every run
// and every machine; small reductions stay one task (and so one thread).
//
// The sweep also writes the fusion's elementwise outputs of the operand's dimensions that read
// nothing it computes (KernelBuilder::ColumnSweepElementwiseOutputs): each operand element is read
// by one task once, so each such output element is stored once, beside the load of its inputs,
// instead of in an output loop that reads them again. JAX's bias gradient (the ReLU mask times the
// gradient, an output the next product reads, and its sum over the batch): f32[128,256] in the
// MLP step, per-kernel trace of 1000 runs a process, 6 alternating process pairs in one binary at
// load 7.5: median 8.2-8.7 -> 6.0-6.5 us, best 7.4-7.8 -> 4.9-5.4 us; alone at load 6.4-8,
// f32[1024,1024] best 0.25-0.30 -> 0.17-0.21 ms, f32[256,256] 10 -> 7 us (3 pairs).
//
// A strided row reduction (the operand's minor dimension reduced, and a reduced dimension major to
// a kept one: sum over {0, 2} of [256, 256, 64], the batch statistics of NCHW over {0, 2, 3}) is
// the same sweep with the minor dimension kept as lanes: tiles of [outputs, lanes] accumulate
// whole rows, and the combine phase folds each output's lanes. Reducing each output alone, as a
// row reduction does, reads its rows scattered a page or less at a time and reduces each to a
// scalar across the vector (f32[256,256,64] over {0, 2}: every 256 bytes).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "compiler/hlo/instruction.h"

namespace xlens::codegen::cpu {

// A tile of at most this many outputs: 8 KiB of f32 accumulators beside the streaming rows in a
// 32 KiB L1.
inline constexpr int64_t kColumnTileElements = 2048;
// About this many tasks when the work allows: enough chunks for the runtime's pool to balance
// over 8 to 16 threads and to route around a thread the machine's other work descheduled.
inline constexpr int64_t kColumnTargetTasks = 64;
// A task reads at least this many operand elements: the runtime's grain (runtime/thunk.cc), below
// which a phase runs on one thread anyway and slicing would only add the combine pass. A reduction
// of under two grains stays one task: batch norm's shifted mean over f32[1,28,28,128] (100352
// elements, 400 KB the cache holds; per-kernel spans of 200 runs on a 2-core Zen 4 beside other
// work, alternating) took best 6.8-9.5 us, median 12-35 us in one task; 5.8-8.3 and 16-26 us in
// two slices and a combine phase (4 pairs); 8.0-13.1 and 21-32 us in two blocks of 64 columns
// (5 pairs). The second thread saves about a microsecond when it is idle and costs more when the
// machine's other work has descheduled it.
inline constexpr int64_t kColumnMinTaskElements = int64_t{1} << 16;
// A task's least where the sweep reads arrays a library call wrote (a product or convolution,
// which the runtime runs in parts across the pool, each part's output in its own core's cache):
// a smaller reduction is then sliced so that each core sums the rows it holds. The MLP step's bias
// gradient (f32[128,256] over its 128 rows, written by two split products): in one binary with
// the rule switched, 18 alternating process pairs of 1000 runs at load 5-7.6, the step's best
// lower in 16 of 18 (median of the bests 343.5 -> 332.5 us). The kernel's own median (traced)
// is lower only where the step ran on both cores (9.9-12.1 -> 7.4-8.5 us, 3 pairs) and up to
// 2 us higher where the earlier calls ran on the caller (5.8-7.2 -> 6.5-9.0 us): lower in 4 of
// 18. A column sum over arrays the caller's cache holds loses (f32[256,256] 1.65 -> 2.5 us
// with a 16K grain for every kernel), so the rule is for library calls' outputs only.
inline constexpr int64_t kColumnSpreadMinTaskElements = int64_t{1} << 14;
// Blocks narrower than this (four 16-lane vectors) are not cut to make more tasks.
inline constexpr int64_t kColumnMinBlock = 64;

// A task's tile of accumulators, all its outputs together, is held in registers up to this many
// bytes: 32 AVX-512 vectors.
inline constexpr int64_t kRegisterTileBytes = 2048;

// A strided row reduction keeps its minor dimension as lanes only up to this many elements.
inline constexpr int64_t kMaxLanes = 128;

struct ColumnReductionPlan {
  int64_t block = 0;         // outputs of the kept minor dimension per task
  int64_t blocks = 1;        // ceil(n / block)
  int64_t group = 1;         // whole output rows per task (> 1 only when block == n)
  int64_t groups = 1;        // ceil(out_rows / group)
  int64_t slices = 1;        // pieces of the reduced rows; > 1: partials and a combine phase
  int64_t slice_length = 0;  // reduced rows per slice (the last may be shorter, never empty)
  int64_t tasks() const { return groups * blocks * slices; }
};

// The plan for `out_rows` output rows of `n` outputs each (n: the kept minor dimension), each the
// reduction of `reduce_length` operand rows. Without `may_split` the rows are never sliced (the
// caller cannot give it scratch); blocks are made narrower instead when that gives more tasks.
// `min_task_elements`: a task's least (kColumnMinTaskElements, or kColumnSpreadMinTaskElements).
ColumnReductionPlan PlanColumnReduction(int64_t out_rows, int64_t n, int64_t reduce_length,
                                        bool may_split,
                                        int64_t min_task_elements = kColumnMinTaskElements);

// Reduced rows folded per visit of an accumulator (the sweep's tile loaded, `reduces` applied
// to each row, stored) when consecutive rows are `row_bytes` apart: four when every reducer is
// one pipelined instruction (an add, a product, a bitwise op, an integer min or max), so that the
// chain of four per column costs no more than the load and store of the accumulator it saves
// (f32[64,256,256] summed over dimension 0: 0.35 ms against 0.9 ms); one otherwise: a float max
// is IEEE maximum, a sequence of several dependent instructions, and a chain of four of them per
// column is slower than reloading the accumulator (f32[4096,1024]: 0.9 ms against 0.6 ms).
// One also where the sweep reads from memory (`from_memory`: its arrays take half the last-level
// cache or more) and consecutive reduced rows are 256 bytes to 4 KiB apart (`row_bytes`): a visit
// of four then walks each column across four rows of the same page, 256 bytes to 2 KiB back and
// forth, which the stream prefetchers do not follow, where one row per visit reads the operand
// in address order. On a 2-core Zen 4, one thread, 25.7 MB of two arrays swept for four sums
// per column: rows of 512 bytes (batch norm's f32[32,28,28,128]) 1.62 ms in visits of four
// against 0.82 ms one row at a time (a plain read of the same bytes: 0.79-0.87 ms), of 256 bytes
// to 2 KiB the same (1.6-1.9 against 0.8-0.9 ms); rows of 64 or 128 bytes, four of them a few
// consecutive lines, and rows of a page or more, each its own stream, keep four (64 bytes: 0.76
// against 1.23 ms; 4 KiB: 1.1 against 1.7 ms). Over arrays the cache holds the prefetchers matter
// less than the accumulators' loads and stores, and four stay faster (both threads: f32[64,300,77]
// over {1}, 308-byte rows, 0.079 against 0.127 ms median; f32[2048,8,96] over {0} 0.079 against
// 0.109 ms).
int64_t ColumnRowsPerVisit(const std::vector<const HloInstruction*>& reduces, int64_t row_bytes,
                           bool from_memory);

// Rows at least this many bytes apart are each a stream of their own (a page or more).
inline constexpr int64_t kColumnRunRowBytes = 4096;

// Which rows a visit of several folds when consecutive reduced rows are `row_bytes` apart. Rows
// of a page or more (kColumnRunRowBytes) are each a stream of their own. A visit of four
// consecutive rows walks four streams, each of which runs into the row the next one has already
// read, and the next visit starts four new streams four rows on, which the prefetchers learn
// anew. So a task's rows are cut into as many runs of consecutive rows as a visit folds, and
// visit v folds row v of every run: each stream walks one run in address order from the task's
// first visit to its last. The fold's order changes (row r + 1 after row r + run length), as
// it may for the reducers ColumnRowsPerVisit folds several rows of (add, product, bitwise, integer
// min and max), and is the same on every run. Shorter rows keep consecutive rows in a visit:
// four of 64 or 128 bytes are a few consecutive lines of one stream.
// f32[4096,1024] over rows (16.8 MB, which the last-level cache holds) on the two cores of a Zen
// 4 beside other work (load 7-9), one binary alternating the two orders: xlens run's median of
// 1000 runs 0.269-0.360 -> 0.231-0.269 ms, lower in 8 of 8 pairs, the best 0.103-0.127 ->
// 0.101-0.126; machine_limits --paired (200 pairs) the module's median 0.31-0.76 -> 0.25-0.38
// ms in 4 of 4. A C model of the sweep (64 slices of 64 rows, best of 2000 passes, 6 rounds):
// consecutive rows 109-116 us, runs 106-112, a read-only sum of the same bytes 91-96. Four runs
// (ColumnRowsPerVisit's four rows) rather than two or eight: xlens run's median of 1000 runs
// 0.222-0.276 ms against 0.251-0.322 for two and 0.295-0.345 for eight, lowest in 6 of 6 rounds
// (load 7), the best 0.101-0.127 against 0.099-0.126 and 0.117-0.141.
bool ColumnVisitsWalkRuns(int64_t row_bytes);

// Whether `reduce` is a strided row reduction the sweep takes: one operand, a reducer that is one
// associative and commutative operation of its parameters (add, multiply, max, min, and, or,
// xor: the lanes are folded in another order than the evaluator's), a minor dimension of at most
// kMaxLanes, a reduced dimension major to a kept one, and at least 8 rows besides the lanes (the
// partial tiles at most an eighth of the operand).
bool IsStridedRowReduction(const HloInstruction& reduce);

// Whether column reductions `a` and `b` can share one sweep: the same reduced dimensions, operand
// shape and result shape.
bool SharesColumnSweep(const HloInstruction& a, const HloInstruction& b);

// Which sweep each of a kernel's column reductions joins, as a level: the reductions of one level
// that share an operand shape and reduced dimensions share one sweep, and level k's sweeps run
// after level k - 1's. `reductions` are the kernel's column reductions that go to scratch, in
// post-order. A reduction's level is at least one past those of the reductions it reads (through
// any fused values) and below those of the reductions that read it. Where that leaves a choice,
// it sweeps first when its earliest sweep already reads every large array it reads, and else
// waits for the first later level within its range whose reductions do read them all: batch
// norm's sum(dy) needs no statistic, but the mean's sweep reads x alone, and the sweep of the
// variance and sum(dy * (x - mean)) reads dy anyway (three sweeps over the batch, not four).
// Large: an array of more than 1/16 the elements of the reduction's operand.
std::unordered_map<const HloInstruction*, int> PlanColumnSweepLevels(
    const std::vector<const HloInstruction*>& reductions);

}  // namespace xlens::codegen::cpu
