// The loops of a CPU row kernel (cpu_row_emitter.cc) that decide its speed:
//
// - The reductions of one level share one loop over the row, and that loop also stores the row
//   caches the later passes read (softmax: exp(x - max) is computed, stored and summed in one
//   loop). The loop is interleaved, so a reduction keeps several vector accumulators and runs at
//   the vector units' throughput instead of waiting on one chain of dependent adds or maxima
//   (a NaN-propagating maximum is three dependent instructions per vector: a max, a compare
//   and a blend).
// - A float maximum is taken as one max instruction a vector, without NaN semantics, beside an
//   or of the elements' unordered compares; a row with a NaN is taken again with the maximum's
//   own semantics.
// - A division by a per-row value (softmax's sum) becomes one reciprocal per row and a multiply
//   per element, where that reciprocal is a normal number; rows whose divisor is not (a
//   subnormal, infinite or NaN sum) take the loop that divides.
// - The first level's reductions run a row ahead, in the last level's loop of the row before
//   (RowReductionsAhead): softmax's maximum beside the previous row's exponentials.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "compiler/codegen/elemental_ir_emitter.h"
#include "compiler/codegen/ir_array.h"

namespace xlens::codegen {

// Accumulators per row reduction: four vectors' worth, enough to cover the latency of an add or
// a maximum on today's x86 cores without spilling.
inline constexpr unsigned kRowReductionInterleave = 4;
// Two where the loop computes a transcendental function per element (softmax's exponentials):
// its body has the parallelism, and the 16 x 4 elements a step left rows of 1000 floats 40 for
// the vectorizer's remainder loop of 8 lanes, whose exponentials' latency the row's sum then
// waited for (1000 mod 32 leaves 8). Softmax over f32[256,1000] on one core, the kernel alone:
// 0.0678 -> 0.0642 ms a run, log-softmax 0.0724 -> 0.0683; rows of 1024 the same either way
// (0.0645); three accumulators 0.0669, one 0.0673.
inline constexpr unsigned kTranscendentalRowReductionInterleave = 2;

// Reduction loops longer than this many elements are not unrolled: the interleaved vector loop
// already has the parallelism, and a row of a thousand elements unrolled whole (the level's loop
// and the next one's over the same row, merged by load elimination) keeps the row in registers
// and spills them, a store and a reload per vector, and overflows the decoded-instruction
// cache. Measured on softmax, log-softmax and layer norm rows of 1000-1024 floats: 15-30%
// less time; rows of 512 (attention) gain nothing and keep the unrolled form.
inline constexpr int64_t kRowUnrollLimit = 512;

// Where a row's loop reaches the columns past a prefix mask on which every value it computes is
// the same (UniformPastPrefix), the loop nest calls this once instead of looping over them, with
// the index of one such column (any: the values do not depend on it) and their number (0 or more).
using RowUniformTail = std::function<Status(const IrIndex&, llvm::Value* count)>;

// Runs `body` for every element of the current row (a loop nest over the reduced dimensions), or
// with `uniform_tail` (or null) for every element before the uniform columns and that once for them.
using RowElementLoop =
    std::function<Status(const std::function<Status(const IrIndex&)>&, const RowUniformTail* uniform_tail)>;

// Reductions of the next row that a loop over this row takes along (software pipelining across
// rows): a row kernel's first level, which reads no per-row value, is taken in the last level's
// loop of the row before. Softmax's maximum then runs beside the previous row's exponentials:
// the maximum's loop on its own was a pass bound by its compares and maxima (and by the row's
// reads from L2), the exponentials' bound by the multiply-add units, and the row's maximum was a
// horizontal reduction that the exponentials waited for. On one core over rows in L2 (best of
// 2000 runs, 5 alternating pairs): softmax over f32[256,1000] 0.079 -> 0.072 ms a run, over
// f32[256,1024] 0.078 -> 0.069, log-softmax 0.084 -> 0.076 and 0.082 -> 0.074, softmax over
// attention's rows of 256 (f32[1024,256]) 0.077 -> 0.074.
struct RowReductionsAhead {
  std::vector<const HloInstruction*> reductions;
  // The index of the same element in the next row.
  std::function<IrIndex(const IrIndex&)> next_row;
  // Per reduction, a variable per leaf of its result: the loop stores the next row's results
  // there, and each row reads its own from them as it starts.
  std::vector<std::vector<llvm::AllocaInst*>> results;
};

// Emits `reductions` (row reductions of one level, independent of each other) as one interleaved
// loop over the row, storing into caches[c] the value of cached[c] for every c in `filled` in the
// same loop. Afterwards the reductions are bound to their per-row results and the filled caches
// to their arrays, so later passes read them instead of recomputing. A sum of exp(x - max(x))
// by each row's own maximum that only its quotients e / sum read besides (softmax's) is bound,
// with its cache of e, 2^34 times too large (the exponential before its last multiply): only
// those quotients, in which it cancels, may read either. `innermost_length`: the
// trip count of the innermost loop of `for_each_element`. With `ahead`, the same loop also
// computes its reductions over the next row, into ahead->results.
//
// With `uniform_tails` (one variable per cache, null until a tail sets it), the reductions are
// taken over the uniform columns past a prefix mask in closed form (ReducesInClosedForm): a sum
// adds its one value times their number, a maximum, minimum, and or or takes it once; and the
// filled caches are not written there: each one's value on those columns goes into its variable,
// which the later levels' closed forms and the caller's outputs read in place of the cache.
//
// With `across_rows`, the caller vectorizes its loop over the rows instead (kAcrossRowsWidth) and
// `for_each_element` is no loop (the row unrolled as it is emitted): no loop is asked for
// anything, and a maximum takes its own NaN semantics in its one pass (a vector of rows has no
// row to take again).
Status EmitRowReductions(ElementalIrEmitter& e, const std::vector<const HloInstruction*>& reductions,
                         const std::vector<const HloInstruction*>& cached,
                         const std::vector<IrArray>& caches, const std::vector<size_t>& filled,
                         int64_t innermost_length, const RowElementLoop& for_each_element,
                         const RowReductionsAhead* ahead = nullptr,
                         std::vector<llvm::AllocaInst*>* uniform_tails = nullptr, bool across_rows = false);

// Asks the loop vectorizer to make the loop whose header is `header`, of `width` iterations, one
// vector of `width` lanes, neither interleaved nor unrolled (nor unrolled whole before it).
void RequestOneVector(llvm::BasicBlock* header, unsigned width);

// Rows this short (a classifier's 10 logits) are one vector each: the lanes of a 64-byte vector
// of f32. Such a row's loops, unrolled whole, were scalar code, every exponential computed alone
// and every reduction a chain of dependent adds: the log-softmax gradient of the MNIST step over
// f32[10000,10] on one core took 0.290 ms a run, 0.125 as one masked vector a loop (best of 2000).
// The length is that of the row's innermost loop: a row over several dimensions whose innermost
// has at most this many elements ([10,2] under each kept index) makes that innermost loop one
// vector, its outer loops left as they are.
inline constexpr int64_t kShortRowMaxLength = 16;
// A row of 2 stays unrolled whole: two scalar operations, and a vector of two lanes is no gain;
// over many rows (a layer norm over f32[200000,2], a maximum over [60000,10,2]) the vectorizer
// refused it, "loop not vectorized" on every compile.
inline constexpr int64_t kShortRowMinLength = 3;

// A kernel of short rows that are one masked vector each, narrower than the vector (a
// classifier's rows of 10 logits in 16 lanes), visits the rows of each block of this many in
// its task: the even ones, then the odd ones. In order, row r's masked load overlapped the
// 64-byte span of row r - 1's masked store wherever the kernel writes over its operand (the
// log-softmax gradient over the logits the product wrote): a load that overlaps an older store
// it cannot take its bytes from (a masked one) waits until that store has retired and been
// written, so each row waited for the whole of the row before it. Row r + 2 starts past row r's
// span (a vector of fewer than twice the row's lanes), and a block's odd rows find its even
// rows' stores long written. A block of 16 rows of 10 floats is 640 bytes, in L1 for both
// visits. A model of the MNIST step's kernel (100 rows of 10, masked AVX-512 loads and stores,
// in place, best of 3000 runs on one core, 5 rounds): in order 3.69 us, even then odd 1.09, into
// a buffer of its own 1.12. Into a buffer of its own the order counted as well where the two
// buffers lie a multiple of 4 KiB apart (large arrays, page-aligned), as the core compares a
// load with older stores by their addresses' low 12 bits first: softmax over f32[400000,10] from
// a parameter into its own output (xlens run, best of 100, 3 alternating pairs against the order
// before, load 7-10) 7.3-9.1 -> 2.6-3.1 ms, medians 16.2-17.4 -> 8.0-11.7.
inline constexpr int64_t kShortRowVisitBlock = 16;

// Rows narrower than a vector of 32-bit elements (a classifier's 10 logits in 16 lanes) are
// computed across rows where the kernel allows (cpu_row_emitter.cc): its loop over the rows is
// the vector loop, this many rows a step, each row's loops unrolled whole, so that a reduction
// is one vertical operation a column for all the step's rows instead of a horizontal reduction
// a row (shuffles and operations in one dependent chain, the next level waiting for it), and no
// lane is left empty. The step's rows are read and written column by column: 16 rows of n
// elements are n whole vectors, loaded and shuffled (the vectorizer's interleaved groups,
// cpu_jit.cc). The shuffles cost about as much as a light row's own work (a sum and a
// subtract), so such rows go across only up to kAcrossRowsLightMaxLength; rows whose loops
// compute a transcendental function per element go across at every length below a vector.
// Both cores, rows in L2, best of 5000 runs (xlens run), along -> across: softmax over
// f32[4096,n] for n = 2, 3, 4, 5, 8, 10, 12, 15: 20 -> 2, 37 -> 4, 19 -> 6, 38 -> 8, 12 -> 9,
// 23 -> 13, 31 -> 22, 32 -> 26 us, n = 16 (a full vector along the row) 17 -> 25; x minus its
// row's sum over f32[4096,n] for n = 3, 4, 5, 6, 7: 7 -> 1, 4 -> 2, 8 -> 2, 8 -> 3, 9 -> 5 us,
// n = 8, 10, 12, 15: 5 -> 6, 6 -> 6, 6 -> 9, 7 -> 12; f64[4096,10] 6 -> 9 (two registers a vector).
//
// And only from this many rows on: a kernel of two steps (the convolution step's gradient over
// 32 rows of 10 logits) gained on its own (0.41 -> 0.29 us a run, best of 5000) but lost in the
// step (traced, 3 alternating process pairs of 1500 runs, load 8: 0.52-0.57 -> 0.68-0.71 us),
// where the MNIST step's over 100 rows (1.29-1.33 -> 0.96-1.09 us) and the MLP step's over 128
// (1.71-1.85 -> 1.27-1.64) gained. Likely the code (not measured apart): the vector loop and the
// unrolled scalar rows after it are several times the rows' own masked loops, run cold in a step.
inline constexpr unsigned kAcrossRowsWidth = 16;
inline constexpr int64_t kAcrossRowsMinRows = 64;
inline constexpr int64_t kAcrossRowsMaxLength = 15;
inline constexpr int64_t kAcrossRowsLightMaxLength = 7;

// Whether rows of `length` elements whose `reductions` are these are summed in blocks of rows, in
// order (cpu_row_emitter.cc): every reduction a sum of bf16 (one operand, an add reducer), rows
// longer than kShortRowMaxLength. A bf16 add is an f32 add and a rounding done on the integer
// bits, so a row's running sum is an integer that the loop vectorizer finds no reduction in, and
// the sum is folded in order and rounded at every add (the evaluator's bits): along the row it ran
// scalar, a dependent add and rounding an element, about 10 cycles each. Across rows each lane of
// a vector is one row's running sum, each row still folded in order. Shorter rows keep their rows'
// own loops unrolled whole (ShortRowVectorizes).
bool RowsInOrderAcross(const std::vector<const HloInstruction*>& reductions, int64_t length);
// Such a block is this many vectors of kAcrossRowsWidth rows, summed side by side (independent
// chains of adds and roundings).
inline constexpr int64_t kRowsInOrderVectors = 2;
// The block's operands are computed and transposed this many columns at a time (32 rows of them:
// 4 KiB of bf16, in L1).
inline constexpr int64_t kRowsInOrderChunk = 64;

// The lanes of the one vector that a row's innermost loop of `length` iterations becomes: the
// power of two at or above `length`, for kShortRowMinLength <= length <= kShortRowMaxLength; 0 for
// any other row.
unsigned ShortRowVectorWidth(int64_t length);

// Whether a short row's loops may ask for one masked vector: its `reductions` are each of one
// operand, by add, multiply, minimum, maximum, and, or or xor of the reducer's two parameters,
// and they and `element_types` (the outputs an output loop writes) are f32, f64, integers or
// pred. Elsewhere the loop vectorizer cannot honour the request (a variadic argmax, a sum of
// bf16 or f8) and warns "loop not vectorized" on every compile, the loop left rolled and scalar
// where unrolled whole it was straight-line code; such rows keep the whole unroll. Their sums
// are reassociated as f32's are (EmitRowReductions), f16 and bf16 included, so they do not add in
// order: long rows are vectorized, and at 4096 rows or more the SLP vectorizer makes a short
// row unrolled whole one tree of vector adds.
bool ShortRowVectorizes(const std::vector<const HloInstruction*>& reductions,
                        const std::vector<PrimitiveType>& element_types);

// Asks the loop vectorizer to make the loop whose header is `header`, of fewer than `width`
// iterations or exactly as many, one vector of `width` lanes under a mask of its iterations (the
// tail folded in), neither interleaved nor unrolled.
void RequestOneMaskedVector(llvm::BasicBlock* header, unsigned width);

// The per-row divisors of `outputs`' computation: the per-row operands (the operands of the
// broadcast along the row) of divides of f32 or f64 elements by such a broadcast.
// `is_row_broadcast` says whether a broadcast spreads a per-row value along the row.
std::vector<const HloInstruction*> PerRowDivisors(
    const HloComputation& computation,
    const std::function<bool(const HloInstruction*)>& is_row_broadcast);

// Emits the element loop `emit_loop` twice when `divisors` (the per-row divisors' values for
// this row) is not empty: a version in which every division by one of them is a multiplication
// by its reciprocal, taken when every reciprocal is a normal number, and the plain version
// otherwise. Just the plain loop when there are no divisors.
Status EmitWithRowReciprocals(ElementalIrEmitter& e, const std::vector<llvm::Value*>& divisors,
                              const std::function<Status()>& emit_loop);

// A mask of a row's elements that keeps a prefix of its innermost dimension, the prefix's end
// moving with a kept dimension's index: a causal attention's, select(compare(iota over the rows,
// iota over the columns) GE, scores, -1e9) (jnp.tril). Such a mask is uniform on most of a row:
// the reductions' loop runs in three: with the predicate bound to true up to the last multiple of
// kColumnPrefixSplitAlignment inside the kept prefix, then up to the first multiple past it with
// the mask computed per element, and after it with the predicate bound to false, so that whatever depends only on the other arm is computed once per row and hoisted
// (softmax's exp(-1e9 - max) over the masked half of the row, 0 in f32 there, was half of its
// exponentials). Causal attention's softmax over f32[8,512,512] on both cores beside other work
// (xlens run --trace, the kernel's best of 600-800 runs, 13 pairs alternating with the unsplit
// loop): medians of the bests 0.372 -> 0.340 ms, lower in 11 of 13; its reads and writes of
// 16 MB bound it as much as its exponentials do.
struct ColumnPrefixMask {
  // The predicate of the selects (every user is one, in the row's shape).
  const HloInstruction* predicate = nullptr;
  // The kept dimension whose index r ends the prefix: the columns j <= r + offset are kept.
  int64_t kept_dimension = -1;
  int64_t offset = 0;
};

// The loop's split points are rounded to this many elements (the head's down, the split's up): the
// vector loop's step (two vectors of 16 f32 lanes where it computes exponentials), so that no part
// of the loop has a remainder.
inline constexpr int64_t kColumnPrefixSplitAlignment = 32;

// The prefix mask among `computation`'s selects over elements of `row_shape` (whose kept
// dimensions are `kept`) along its `column_dimension`, if any. Recognized: a signed compare of
// s32 or s64 sides made of iotas, scalar constants, broadcasts, adds, subtracts and negations that
// comes to r - j + c >= 0 with r a kept index and j the column's (kept: j <= r + c), none of whose
// elements wraps on the way: row >= col (jnp.tril), row + k >= col (jnp.tril(x, k), a KV cache's
// offset), col < row, row - col >= c..., and select(p, true, false) of such.
std::optional<ColumnPrefixMask> FindColumnPrefixMask(const HloComputation& computation, const Shape& row_shape,
                                                     int64_t column_dimension, const std::vector<int64_t>& kept);

// Whether `x`'s elements (of the row's shape, or reached from such through broadcasts) are the
// same all along `column_dimension` wherever `mask`'s predicate is false: past a causal mask,
// softmax's select(p, s, -1e9) is -1e9, exp(-1e9 - max) one value a row, and its quotient by the
// row's sum another. Recognized: the predicate itself, constants and iotas along other
// dimensions, broadcasts that do not spread along it or whose operand is the same along the
// dimension it spreads, elementwise operations of such, and select(predicate, anything, such).
bool UniformPastPrefix(const HloInstruction* x, const ColumnPrefixMask& mask, int64_t column_dimension);

// Whether a row reduction can be taken over n equal elements x in closed form, as exactly as the
// loop would (its order free): a sum of f32, f64 or 32- and 64-bit integers as n x (an integer
// sum wraps alike; a float one is within the reassociation the loop already takes, and exact
// where x is 0, infinite or NaN, or n and x are small integers, as in a fully masked row of
// softmax), a maximum, minimum, and or or of one operand as x once. Not a product, a variadic
// reduction (argmax), nor one of f16 or bf16 elements (summed widened, in the loop's own order).
bool ReducesInClosedForm(const HloInstruction* r);

}  // namespace xlens::codegen
