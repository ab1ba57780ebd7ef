// The reference evaluator: executes a verified module on the host, one instruction at a time.
// It is the oracle every compiled result is checked against, so it favours exactness and clarity
// over speed (but an elementwise op over 16M elements runs in well under a second).
//
// No input can make it recurse without bound, run unstoppably or start work it cannot finish:
// calls, fusions, conditionals and while loops nest on a heap-allocated stack of frames (100,000
// nested calls are fine); computations nested through the ops that apply them element by element
// (reduce, map, sort, scatter, ...) are bounded by kMaxNestedApplications; an instruction whose
// work is over EvaluatorOptions::max_work is refused before it starts; and `cancel` stops it.
#pragma once

#include <atomic>
#include <span>

#include "compiler/hlo/literal.h"
#include "compiler/hlo/module.h"
#include "compiler/support/status.h"

namespace xlens {

class DeviceCollectives;  // collective_rendezvous.h

// The default of EvaluatorOptions::max_work: about an hour of the evaluator's time. Beyond it an
// instruction is far more likely a mistake (a window of 2^62) than a computation to wait for.
inline constexpr double kDefaultMaxEvaluatorWork = 1e12;
// How deep computations may nest through reducers, comparators, combiners and mapped
// computations (each level runs a new evaluation on the machine stack).
inline constexpr int kMaxNestedApplications = 64;

struct EvaluatorOptions {
  // Polled before every instruction and every application of a called scalar computation; once
  // it reads true, the evaluation stops with an error that ends in "cancelled" and names where it
  // was (the instructions on the call stack, while loops with their iteration).
  const std::atomic<bool>* cancel = nullptr;
  // Instructions whose work (EvaluationWork) is above this are refused before the evaluation
  // starts running them, with the figure. 0: no limit.
  double max_work = kDefaultMaxEvaluatorWork;
  // The simulated device this evaluation runs on among several (multi_device_evaluator.h):
  // replica-id and partition-id read its ids and collectives meet the other devices. nullptr:
  // one device (replica 0, partition 0), where every collective is a group of one.
  DeviceCollectives* device = nullptr;
};

// Runs the entry computation on `arguments` (one literal per parameter, shapes must match).
// Unsupported opcodes (send, recv, ...) and element types (F8, S4, ...) give an error that names
// them. Collectives run as on one device (multi_device_evaluator.h runs several).
StatusOr<Literal> EvaluateModule(const HloModule& module, std::span<const Literal> arguments,
                                 const EvaluatorOptions& options = {});

// Runs one computation (used for called computations and in tests).
StatusOr<Literal> EvaluateComputation(const HloComputation& computation,
                                      std::span<const Literal> arguments,
                                      const EvaluatorOptions& options = {});

// Runs one instruction on the values of its operands (one literal per operand, in order), as the
// evaluator would inside a computation; its called computations run as usual. Parameters have no
// value of their own and give an error, as do the opcodes and types EvaluateModule refuses.
StatusOr<Literal> EvaluateInstruction(const HloInstruction& instruction,
                                      std::span<const Literal* const> operands,
                                      const EvaluatorOptions& options = {});

// The scalar operations one evaluation of `instruction` costs the evaluator: multiply-adds of a
// dot or convolution, applications of the called computation of a reduce, reduce-window, map,
// sort, scatter or select-and-scatter, elements produced otherwise; 0 for the instructions that
// only call others (call, fusion, while, conditional), whose computations count on their own.
// A double, so that absurd figures (2^62 x 2^62) are representable.
double EvaluationWork(const HloInstruction& instruction);

// The first instruction of `module` (any computation) whose EvaluationWork is above `max_work`,
// as an error with the figure; OK when there is none or `max_work` is 0.
Status CheckEvaluationWork(const HloModule& module, double max_work);

}  // namespace xlens
