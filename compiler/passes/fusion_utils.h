// What the fusion passes (fusion, multi-output-fusion, horizontal-loop-fusion) share: the cost
// model (which instructions are expensive, which may sit in a loop kernel), what counts as a
// kernel, the decision record users read through `xlens opt --explain-fusion`, and one builder
// that turns a set of instructions into a fusion. Not a pass itself.
//
// Fusion text follows XLA: `%fusion.N = ... fusion(...), kind=kLoop, calls=%fused_computation.N`,
// fused parameters `param_0`, `param_1`, ..., fused computations placed before their caller. A
// fusion's metadata is its root's, except op_name: every distinct op_name of the instructions it
// contains, in data-flow order, joined by ";" (`op_name="dense/MatMul;dense/BiasAdd;dense/Relu"`),
// so a kernel can be traced back to every graph op inside it; XLA parses this as one string. Each
// fused instruction keeps its own metadata inside the fused computation.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/hlo/module.h"
#include "compiler/support/status.h"

namespace xlens {

// The backend a fusion pass is configured for: GPU fuses elementwise epilogues into dots and
// convolutions (kOutput); the CPU keeps them as library calls.
enum class FusionBackend { kCpu, kGpu };

// One fusion decision, as `xlens opt --explain-fusion` prints it.
struct FusionDecision {
  std::string producer;  // for sibling and horizontal fusion: the instruction merged in
  std::string consumer;  // the consumer (or the first sibling) as named when decided
  bool fused = false;
  std::string reason;  // why it was refused; for a fusion, a note (may be empty)
  std::string kind;    // for a fusion: "kLoop", "kInput" or "kOutput"
  std::string fusion;  // for a fusion: the fusion instruction it made or grew
  // Where the producer came from in the user's program, as DecisionSource gives it; empty when
  // its metadata does not say.
  std::string source;

  // "fused multiply.3 into add.4 (kLoop)" or "refused exponential.2 into add.7: <reason>", then
  // "  at train.py:15:11 (loss)" when the source is known.
  std::string ToString() const;
};

// "train.py:15:11 (loss)": the line of the user's program `producer` (or, for a fusion, its
// first fused instruction that says) came from, as the trace and profile credit its kernel
// (KernelStack); empty when nothing says.
std::string DecisionSource(const HloInstruction& producer);

// Limits that keep one kernel's code and argument list reasonable.
struct FusionLimits {
  int64_t max_instructions = 256;  // instructions of the fused computation, parameters included
  int64_t max_operands = 64;       // operands of the fusion instruction
};

// Expensive per element (transcendentals, divisions, reductions, dots, gathers, calls, ...), or a
// fusion that contains such an instruction: computing it twice costs more than reading it back.
bool IsExpensive(const HloInstruction& instruction);
// May be computed element by element inside a loop kernel: elementwise ops, broadcast, reshape,
// bitcast, transpose, slice, dynamic-slice, concatenate, pad, iota, reverse, copy, constant, gather.
bool IsLoopFusible(const HloInstruction& instruction);
// A reduce, or a fusion that contains one.
bool HasReduction(const HloInstruction& instruction);
// A dot or convolution, or a fusion that contains one.
bool HasDotOrConvolution(const HloInstruction& instruction);
// Every reduce in `instruction` (itself or inside its fusion) keeps at least one dimension and
// reduces only trailing ones: each row's result can be reused by the rest of that row.
bool HasOnlyRowReductions(const HloInstruction& instruction);
// Users plus one when it is its computation's root.
int64_t UseCount(const HloInstruction& instruction);
// The computations fusion works in: the entry and, transitively, the bodies, conditions, branches
// and call targets it runs (never reducers, comparators or fused computations).
std::vector<HloComputation*> FusibleComputations(const HloModule& module);

// Whether `instruction` launches a kernel of its own: everything but parameters, constants,
// tuples, get-tuple-elements and bitcasts (which are buffer bookkeeping).
bool CountsAsKernel(const HloInstruction& instruction);
// The kernels the entry computation launches: fusions plus unfused instructions that count.
// A while, conditional or call counts as one.
int64_t CountKernels(const HloModule& module);

// A set of instructions of one computation to become one fusion.
struct FusionPlan {
  std::vector<HloInstruction*> members;
  // Members that are also cloned into the fusion but stay outside for their other users (a cheap
  // producer duplicated into one consumer). Never outputs of the fusion.
  std::vector<HloInstruction*> duplicated;
  // A member fusion whose instruction and computation names the result takes (a fusion that
  // grows keeps its name); null for fresh `fusion` / `fused_computation` names.
  const HloInstruction* keep_name_of = nullptr;
};

struct FusionFootprint {
  int64_t instructions = 0;  // of the fused computation, parameters included
  int64_t operands = 0;
  int64_t outputs = 0;
};
FusionFootprint EstimateFusion(const FusionPlan& plan);
// Merging the members into one node would create a cycle when a path leaves a (non-duplicated)
// member and comes back into the set through an outside instruction. Returns the first outside
// instruction on such a path, or null.
//
// `positions`, when given, is a topological numbering of the computation (operands before users,
// e.g. post-order indices) taken since the last change to it: a search then stops at instructions
// numbered after every member, which cannot lead back into the set. Instructions without a
// number are searched through, so a numbering taken before new instructions appeared stays safe.
using TopologicalPositions = std::unordered_map<const HloInstruction*, int64_t>;
const HloInstruction* FindCycleWitness(const FusionPlan& plan,
                                       const TopologicalPositions* positions = nullptr);
// The post-order positions of `computation`'s instructions, for FindCycleWitness.
TopologicalPositions PostOrderPositions(const HloComputation& computation);
// The fusion kind the members would make: kOutput with a dot or convolution, kInput with a
// reduce (or a member fusion already kInput), kLoop otherwise.
FusionKind PlannedKind(const FusionPlan& plan);

// Replaces the members by one fusion. Its outputs are the non-duplicated members used outside the
// set (or the computation's root); with several, the fused root is a tuple and the outside users
// read get-tuple-elements. Member fusions are inlined (a multi-output member's get-tuple-element
// users join the set). The caller has checked FindCycleWitness and control dependencies.
StatusOr<HloInstruction*> BuildFusion(const FusionPlan& plan);

// Fuses `producer` (not a fusion) into `fusion` in place: the module comes out exactly as
// BuildFusion({producer, fusion}, duplicated, keep_name_of=fusion) leaves it (names, parameter
// numbers, instruction and computation order, user lists, metadata), but only the producer is
// cloned, so growing a fusion one producer at a time stays linear in its size. `fusion` must be
// in the form BuildFusion gives a fusion of plain instructions, and InPlaceFusionKeepsForm must
// hold: its computation lists its instructions in post-order with each parameter placed before
// its first user, every parameter is used, its operands are distinct, its root is no tuple and
// its op_name joins those inside it. The result keeps that form.
StatusOr<HloInstruction*> FuseProducerInPlace(HloInstruction* producer, HloInstruction* fusion,
                                              bool duplicate);
// Whether fusing `producer` keeps a fusion in the form FuseProducerInPlace needs: a plain
// instruction whose name cannot be taken for a fused parameter's (`param_N`).
bool InPlaceFusionKeepsForm(const HloInstruction& producer);

}  // namespace xlens
