// Static cost of HLO: floating-point operations, transcendental operations and bytes of memory
// touched, per instruction, per computation and for a module's entry, following the conventions
// of XLA's HloCostAnalysis (xla/service/hlo_cost_analysis) so that numbers can be compared with
// what XLA-based tools report. A per-kernel profile divides these by measured time to show
// achieved FLOP/s and GB/s.
//
// Conventions (all sizes are of the shapes as written; a bounded dynamic dimension counts at its
// bound, an unbounded one as 0):
//  * Elementwise unary/binary ops, compare, select, clamp, convert, reduce-precision: one flop per
//    output element. Transcendental functions (exp, expm1, log, log1p, tanh, logistic, sin, cos,
//    tan, atan2, power, sqrt, rsqrt, cbrt, erf, and the inverse/hyperbolic trigonometric ones)
//    count one transcendental per element instead, and no flop.
//  * dot, ragged-dot, scaled-dot: 2 * output elements * product of the lhs contracting dimensions.
//  * convolution: 2 * (input features / feature_group_count) * output features
//    * (batch / batch_group_count) * the number of valid (output, kernel) position pairs per
//    spatial dimension, as XLA counts them; padding and dilation holes do not count. Without
//    padding this is 2 * output elements * kernel window size * input features / groups.
//    Complex dots and convolutions count 4x (one complex multiply-add is four real ones; XLA
//    itself does not scale them).
//  * reduce: (input elements - output elements) * the flops of one application of the reducer;
//    reduce-window: (window size - 1) * output elements * reducer flops (XLA's count: combining
//    W values takes W-1 applications); map: elements * flops of the mapped computation;
//    scatter: update elements * combiner flops; select-and-scatter: source elements *
//    ((window - 1) * select + scatter); all-reduce and reduce-scatter: one flop per output
//    element. Transcendentals of the called computations scale the same way.
//  * sort: n * ceil(log2 n) flops for the n elements of the first operand (a comparison sort's
//    comparison count, the comparator cost not multiplied in), as XLA; topk: n * ceil(log2 k)
//    (at least n) per row; fft: 8 * product(floor(log2 length)) * input elements; cholesky:
//    n * elements / 3; triangular-solve: 2 * n * elements of b; rng and rng-bit-generator: one
//    transcendental per element produced.
//  * Data movement (broadcast, reshape, transpose, copy, slice, concatenate, pad, reverse,
//    gather, dynamic-slice, iota, ...), collectives other than reductions, batch-norm ops (as in
//    XLA) and custom-calls (whose work is unknown): no flops.
//  * bytes_accessed is the bytes of every operand read plus the bytes of the output written
//    (tuples: the sum of their leaf arrays; tokens: 0), with these exceptions:
//      - parameter, constant, get-tuple-element, tuple, bitcast, after-all, add-dependency,
//        domain and opt-barrier move nothing: 0 bytes;
//      - slice, dynamic-slice and gather read only output-size bytes of the sliced operand (plus
//        the whole index operands); dynamic-update-slice works in place: it reads the update and
//        the indices and writes update-size bytes;
//      - scatter: 3 * update bytes (read operand region, read updates, write) + indices;
//      - cholesky and triangular-solve read half of the triangular operand, as XLA;
//      - get-dimension-size reads no array data;
//      - asynchronous pairs put the work on the start: a *-done and async-update cost nothing; a
//        start whose result is a tuple that carries its operands along counts only the bytes
//        beyond them as written.
//  * fusion: flops and transcendentals are the sums over the fused computation (recursively).
//    bytes_accessed counts only the kernel's boundary, what reaches memory: each fused parameter
//    is read once in full, except that a parameter used only as the sliced operand of slices or
//    dynamic-slices is counted at the sliced size (per slice), and one used only as the in-place
//    target of a dynamic-update-slice is not read at all; plus constants of more than one element
//    inside the fusion; plus the fusion's outputs, where an output that is a dynamic-update-slice
//    (through bitcasts) writes only the update's bytes. Intermediates inside stay in registers.
//  * while: one trip through condition and body (trip counts are not known statically), which
//    includes their bytes; call and async-start: the called computation; conditional: for each
//    field the maximum over the branches (one of them runs). The instruction itself moves
//    nothing beyond what its computations do.
//  * Anything else (custom-call, infeed, send, collectives, ...): no flops, operand + output
//    bytes.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "compiler/hlo/module.h"

namespace xlens {

struct HloCost {
  double flops = 0;
  double transcendentals = 0;
  int64_t bytes_accessed = 0;  // bytes read + bytes written
  int64_t output_bytes = 0;    // the written part of bytes_accessed

  HloCost& operator+=(const HloCost& other) {
    flops += other.flops;
    transcendentals += other.transcendentals;
    bytes_accessed += other.bytes_accessed;
    output_bytes += other.output_bytes;
    return *this;
  }
  friend HloCost operator+(HloCost a, const HloCost& b) { return a += b; }
  bool operator==(const HloCost&) const = default;
};

// Memoizing analysis: the cost of a called computation is computed once however many
// instructions call it. Results are cached by address, so an analysis is valid only while the
// module it looked at is unchanged. Never fails: malformed instructions (missing attributes or
// called computations) cost what can be read off their shapes.
class HloCostAnalysis {
 public:
  // The cost of one instruction, called computations included (see the file comment).
  HloCost InstructionCost(const HloInstruction& instruction);
  // The sum of the costs of the computation's instructions.
  HloCost ComputationCost(const HloComputation& computation);
  // Each instruction of `computation` with its cost, operands before users.
  std::vector<std::pair<const HloInstruction*, HloCost>> InstructionCosts(
      const HloComputation& computation);
  // ComputationCost of the entry computation; zero when the module has none.
  HloCost ModuleCost(const HloModule& module);

 private:
  HloCost Compute(const HloInstruction& instruction);
  HloCost FusionCost(const HloInstruction& fusion);

  std::unordered_map<const HloInstruction*, HloCost> instruction_costs_;
  std::unordered_map<const HloComputation*, HloCost> computation_costs_;
  std::unordered_set<const HloComputation*> in_progress_;  // guards against call cycles
};

// One-shot conveniences over a fresh HloCostAnalysis.
HloCost CostOf(const HloInstruction& instruction);
HloCost ComputationCost(const HloComputation& computation);
HloCost ModuleCost(const HloModule& module);

}  // namespace xlens
