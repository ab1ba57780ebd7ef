// fusion: producer-consumer fusion, XLA's InstructionFusion (CpuInstructionFusion on the CPU,
// GpuInstructionFusion on the GPU), with every decision recorded and explained.
//
// Walking each fusible computation from its root towards its parameters, every consumer tries to
// take in its producers, one at a time, growing one fusion:
//  * kLoop: elementwise ops, broadcast, reshape, bitcast, transpose, slice, dynamic-slice,
//    concatenate, pad, iota, reverse, copy, gather and small constants (at most 16 elements) fuse
//    into each other.
//  * kInput: a reduce takes in its loop-fusible producers. A reduction itself is fused into its
//    users only through elementwise epilogues (or reshapes) of its result, or broadcasts that
//    spread a row reduction (trailing dimensions reduced, at least one kept) back over its rows:
//    softmax and layer norm become one row-wise kernel (a kInput fusion whose reduce is not the
//    root: the emitter keeps each row's result for the rest of that row).
//  * kOutput (GPU only): a dot or convolution with one user fuses into a cheap elementwise
//    consumer of the same shape, the dot inside and the epilogue as the root; cheap producers
//    (a bias broadcast) may then join. The CPU keeps dots and convolutions as library calls.
// Never fused: parameters, tuples, get-tuple-elements, while/conditional/call, custom-calls,
// sorts, scatters, dynamic-update-slices, reduce-windows, collectives and anything with a side
// effect or a control dependency; kCustom fusions; nothing is fused into a dot's operands.
// A producer with other users is duplicated into the consumer when cheap (it stays for the
// others, as XLA does) and refused when expensive (exp, log, divide, power, tanh, logistic, rsqrt,
// sqrt, reductions, dots, gathers, fusions containing any of them). A cheap producer that reads
// other cheap computed values is not copied (the copies would cascade), but a broadcast of a value
// that is never copied ends the cascade: x - mean, the batch mean broadcast, is copied into the
// four reductions and two outputs that read it, rather than a kernel that writes x - mean and six
// that read it back. Fusions stay within FusionLimits. Existing fusions grow (a fusion consumer
// keeps its name; a fusion producer is inlined). Fusion text and metadata are described in
// fusion_utils.h.
//
// Reports a change when it made or grew a fusion. decisions() lists, after Run, the fusions made
// and, for each producer/consumer pair left apart, the last reason it was refused.
#pragma once

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "compiler/passes/fusion_utils.h"
#include "compiler/passes/hlo_pass.h"

namespace xlens {

class InstructionFusion : public HloPass {
 public:
  explicit InstructionFusion(FusionBackend backend, FusionLimits limits = {})
      : backend_(backend), limits_(limits) {}

  std::string_view name() const override { return "fusion"; }
  StatusOr<bool> Run(HloModule& module) override;

  // The decisions of the last Run, in the order they were taken.
  const std::vector<FusionDecision>& decisions() const { return decisions_; }
  // At most `fuel` fusions per Run (-1: no limit), as XLA's --xla_fuel gives a pass: a search
  // over it finds the one fusion decision after which a module goes wrong. Out of fuel, a
  // fusion is refused with that reason.
  void set_fuel(int64_t fuel) { fuel_ = fuel; }

 private:
  struct Verdict {
    bool fuse = false;
    bool duplicate = false;
    std::string reason;
  };

  StatusOr<bool> FuseComputation(HloComputation& computation);
  // Fuses producers into `consumer` until none is left to take; true when it fused any.
  // `live` holds the instructions still to visit; fused-away ones leave it, new fusions join it.
  StatusOr<bool> GrowConsumer(HloInstruction* consumer,
                              std::unordered_set<HloInstruction*>& live);
  Verdict CanBeConsumer(const HloInstruction& consumer) const;
  Verdict ShouldFuse(HloInstruction& producer, HloInstruction& consumer) const;
  Verdict CheckUseSites(const HloInstruction& producer, const HloInstruction& consumer) const;
  // Appends a decision; a fusion withdraws the earlier refusal of the same pair and a refusal
  // replaces it, so each pair left apart is explained once, by its last reason.
  void Record(const HloInstruction& producer, const HloInstruction& consumer, bool fused,
              std::string reason, std::string kind = "", std::string fusion = "");

  FusionBackend backend_;
  FusionLimits limits_;
  std::vector<FusionDecision> decisions_;
  int64_t fuel_ = -1;
  int64_t fused_ = 0;  // fusions made in this Run, against fuel_
  // "producer\nconsumer group" -> index in decisions_ of the refusal to replace or withdraw.
  std::unordered_map<std::string, size_t> refusal_index_;
  // A fusion's name -> the name of the instruction it grew from, so that a refusal recorded
  // against `add.4` is withdrawn when the producer later joins `fusion.2` (which grew from add.4).
  std::unordered_map<std::string, std::string> group_;
  // The fusions of this run that FuseProducerInPlace can grow: made from plain instructions, or
  // grown in place since. Growing any other fusion rebuilds it.
  std::unordered_set<const HloInstruction*> in_place_form_;
};

}  // namespace xlens
