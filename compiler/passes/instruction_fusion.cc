#include "compiler/passes/instruction_fusion.h"

#include <algorithm>
#include <unordered_set>

#include <fmt/format.h>

namespace xlens {

namespace {

// A copy of a producer reads the producer's operands. When an operand is itself a cheap value
// computed in this computation, the copy gives it one more user, so it gets copied in turn: on a
// graph where values have several users, the copies cascade and the kernels recompute ever more.
// Copying stops at inputs (parameters, constants, iota, broadcasts of those) and at values that
// are never copied (expensive or unfusible ones).
bool PullsComputationAlong(const HloInstruction& producer) {
  if (producer.opcode() == HloOpcode::kFusion) return true;
  for (const HloInstruction* operand : producer.operands()) {
    HloOpcode op = operand->opcode();
    if (op == HloOpcode::kParameter || op == HloOpcode::kConstant || op == HloOpcode::kIota) continue;
    if (op == HloOpcode::kBroadcast) {
      // A broadcast of a value that is never copied (an input, or an expensive or unfusible
      // one: a batch's mean) ends the cascade one step on: copying it only adds a reader.
      const HloInstruction& source = *operand->operand(0);
      HloOpcode s = source.opcode();
      if (s == HloOpcode::kParameter || s == HloOpcode::kConstant || IsExpensive(source) ||
          !IsLoopFusible(source)) {
        continue;
      }
    }
    if (IsExpensive(*operand) || !IsLoopFusible(*operand)) continue;
    return true;
  }
  return false;
}

constexpr int64_t kMaxFusedConstantElements = 16;
constexpr int kMaxRounds = 4;

std::string_view OpName(const HloInstruction& instruction) {
  return HloOpcodeString(instruction.opcode());
}

// How a producer is named in a reason: its opcode for a plain instruction ("exponential is
// expensive"), its name for a fusion.
std::string Describe(const HloInstruction& instruction) {
  if (instruction.opcode() == HloOpcode::kFusion) return instruction.name();
  return std::string(OpName(instruction));
}

bool IsRowBroadcast(const HloInstruction& instruction) {
  if (instruction.opcode() != HloOpcode::kBroadcast) return false;
  const std::vector<int64_t>& dims = instruction.dimensions();
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

bool HasControlDependencies(const HloInstruction& instruction) {
  return !instruction.control_predecessors().empty() ||
         !instruction.control_successors().empty();
}

std::vector<HloInstruction*> DistinctOperands(const HloInstruction& instruction) {
  std::vector<HloInstruction*> out;
  for (HloInstruction* operand : instruction.operands()) {
    if (std::find(out.begin(), out.end(), operand) == out.end()) out.push_back(operand);
  }
  return out;
}

}  // namespace

InstructionFusion::Verdict InstructionFusion::CanBeConsumer(const HloInstruction& consumer) const {
  const HloOpcode op = consumer.opcode();
  if (op == HloOpcode::kFusion) {
    if (consumer.fusion_kind == FusionKind::kCustom || consumer.fused_computation() == nullptr) {
      return {false, false, "kCustom fusions (library and Triton kernels) are left as they are"};
    }
    return {true, false, ""};
  }
  if (op == HloOpcode::kReduce) return {true, false, ""};
  if (IsLoopFusible(consumer) && consumer.operand_count() > 0) return {true, false, ""};
  if (op == HloOpcode::kDot || op == HloOpcode::kConvolution) {
    return {false, false,
            backend_ == FusionBackend::kCpu
                ? fmt::format("{} runs as a library call on the CPU and reads its operands from "
                              "memory",
                              consumer.name())
                : fmt::format("{} reads its operands from memory (a GEMM or convolution kernel); "
                              "only its elementwise epilogue is fused",
                              consumer.name())};
  }
  return {false, false,
          fmt::format("{} runs as its own operation; nothing is fused into it", OpName(consumer))};
}

InstructionFusion::Verdict InstructionFusion::CheckUseSites(const HloInstruction& producer,
                                                            const HloInstruction& consumer) const {
  std::vector<const HloInstruction*> sites;
  if (consumer.opcode() == HloOpcode::kFusion) {
    const HloComputation* fused = consumer.fused_computation();
    for (int64_t i = 0; i < consumer.operand_count(); ++i) {
      if (consumer.operand(i) != &producer) continue;
      const HloInstruction* parameter = fused->parameter_instruction(i);
      if (parameter == nullptr) continue;
      for (const HloInstruction* user : parameter->users()) sites.push_back(user);
    }
  } else {
    sites.push_back(&consumer);
  }
  const bool reduction = HasReduction(producer);
  const bool dot = HasDotOrConvolution(producer);
  for (const HloInstruction* site : sites) {
    const HloOpcode op = site->opcode();
    if (op == HloOpcode::kDot || op == HloOpcode::kConvolution) {
      return {false, false,
              fmt::format("it would feed {} inside {}: a dot reads its operands from memory, so "
                          "nothing is fused into them",
                          site->name(), consumer.name())};
    }
    if (!IsLoopFusible(*site) && op != HloOpcode::kReduce && op != HloOpcode::kTuple) {
      return {false, false,
              fmt::format("it would feed {} inside {}, which reads that operand from memory",
                          OpName(*site), consumer.name())};
    }
    if (reduction) {
      // Elementwise ops and reshapes of the result run once per reduced element.
      const bool reshape = (op == HloOpcode::kReshape || op == HloOpcode::kBitcast) &&
                           site->shape().num_elements() == producer.shape().num_elements();
      const bool epilogue = reshape || (site->IsElementwise() &&
                                        shape_util::SameDimensions(site->shape(), producer.shape()));
      const bool row = IsRowBroadcast(*site) && HasOnlyRowReductions(producer);
      if (!epilogue && !row && op != HloOpcode::kTuple) {
        return {false, false,
                fmt::format("{} is a reduction; it joins a consumer only through elementwise ops "
                            "on its result or a broadcast of a row reduction back over its rows, "
                            "and {} is neither",
                            Describe(producer), site->name())};
      }
    }
    if (dot && (!site->IsElementwise() || IsExpensive(*site) ||
                !shape_util::SameDimensions(site->shape(), producer.shape()))) {
      return {false, false,
              fmt::format("only cheap elementwise epilogues of the same shape are fused into a "
                          "dot, and {} is not one",
                          site->name())};
    }
  }
  return {true, false, ""};
}

InstructionFusion::Verdict InstructionFusion::ShouldFuse(HloInstruction& producer,
                                                         HloInstruction& consumer) const {
  const HloOpcode op = producer.opcode();
  if (op == HloOpcode::kParameter) return {};  // inputs of every kernel; nothing to explain
  if (HasControlDependencies(producer) || HasControlDependencies(consumer)) {
    return {false, false, "a control dependency fixes its place in the schedule"};
  }
  if (op == HloOpcode::kConstant) {
    const int64_t elements = producer.shape().IsArray() ? producer.shape().num_elements() : -1;
    if (elements < 0 || elements > kMaxFusedConstantElements) {
      return {false, false,
              fmt::format("the constant has {} elements; only constants of up to {} elements are "
                          "copied into kernels, bigger ones are read from memory",
                          elements, kMaxFusedConstantElements)};
    }
  } else if (op == HloOpcode::kTuple) {
    return {false, false, "a tuple only groups buffers; there is nothing to compute"};
  } else if (op == HloOpcode::kGetTupleElement) {
    return {false, false, "a get-tuple-element only selects a buffer; there is nothing to compute"};
  } else if (op == HloOpcode::kFusion) {
    if (producer.fusion_kind == FusionKind::kCustom || producer.fused_computation() == nullptr) {
      return {false, false, "kCustom fusions (library and Triton kernels) are left as they are"};
    }
    if (!producer.shape().IsArray()) {
      return {false, false,
              "it produces a tuple; multi-output fusions are merged by multi-output-fusion"};
    }
  } else if (op == HloOpcode::kReduce) {
    if (!producer.shape().IsArray()) {
      return {false, false, "a variadic reduce produces a tuple; it only ends a kernel"};
    }
  } else if (op != HloOpcode::kDot && op != HloOpcode::kConvolution && !IsLoopFusible(producer)) {
    return {false, false,
            fmt::format("{} runs as its own operation (control flow, library calls, sorts, "
                        "scatters, in-place updates and side effects are never fused)",
                        OpName(producer))};
  }

  const bool producer_dot = HasDotOrConvolution(producer);
  const bool consumer_dot = HasDotOrConvolution(consumer);
  if (producer_dot && backend_ == FusionBackend::kCpu) {
    return {false, false,
            fmt::format("the CPU backend keeps {} as its own kernel (a library call); only the "
                        "GPU fuses elementwise epilogues into it",
                        Describe(producer))};
  }
  if ((producer_dot || consumer_dot) && (HasReduction(producer) || HasReduction(consumer))) {
    return {false, false, "a dot epilogue and a reduction do not share a kernel"};
  }
  if (consumer_dot && IsExpensive(producer)) {
    return {false, false,
            fmt::format("only cheap producers (broadcasts, elementwise ops) join a dot's epilogue, "
                        "and {} is expensive",
                        Describe(producer))};
  }
  if (producer_dot && IsExpensive(consumer) && consumer.opcode() == HloOpcode::kFusion) {
    return {false, false,
            fmt::format("{} holds expensive ops; only cheap elementwise epilogues are fused into "
                        "a dot",
                        consumer.name())};
  }

  const int64_t uses = UseCount(producer);
  const bool duplicate = uses > 1;
  if (duplicate && IsExpensive(producer)) {
    return {false, false,
            fmt::format("{} is expensive and has {} users; duplicating it would compute it {}",
                        Describe(producer), uses,
                        uses == 2 ? std::string("twice") : fmt::format("{} times", uses))};
  }
  if (duplicate && PullsComputationAlong(producer)) {
    return {false, false,
            fmt::format("{} has {} users and reads values computed by other cheap ops; copying it "
                        "into each consumer would copy those too, and on a graph that fans out the "
                        "copies multiply",
                        Describe(producer), uses)};
  }
  if (Verdict sites = CheckUseSites(producer, consumer); !sites.fuse) return sites;

  FusionPlan plan;
  plan.members = {&producer, &consumer};
  if (duplicate) plan.duplicated = {&producer};
  const FusionFootprint footprint = EstimateFusion(plan);
  if (footprint.instructions > limits_.max_instructions) {
    return {false, false,
            fmt::format("the fusion would hold {} instructions, over the limit of {}",
                        footprint.instructions, limits_.max_instructions)};
  }
  if (footprint.operands > limits_.max_operands) {
    return {false, false,
            fmt::format("the fusion would take {} operands, over the limit of {}",
                        footprint.operands, limits_.max_operands)};
  }
  // A path that leaves the pair and comes back must start at a user of the producer other than
  // the consumer (the consumer's users lie downstream of both). A duplicated producer stays for
  // those users, so only a producer with other users that moves into the fusion needs the search,
  // which is linear in the computation: skipping it keeps fusion linear on long chains.
  const bool producer_has_other_users =
      producer.IsRoot() || std::any_of(producer.users().begin(), producer.users().end(),
                                       [&](const HloInstruction* u) { return u != &consumer; });
  if (!duplicate && producer_has_other_users) {
    if (const HloInstruction* witness = FindCycleWitness(plan)) {
      return {false, false,
              fmt::format("fusing would create a cycle: {} depends on it and feeds {}",
                          witness->name(), consumer.name())};
    }
  }
  Verdict fuse{true, duplicate, ""};
  if (duplicate) {
    fuse.reason = fmt::format("cheap, so copied; it stays for its {} other user{}", uses - 1,
                              uses == 2 ? "" : "s");
  } else if (producer_dot) {
    fuse.reason = "elementwise epilogue of the dot";
  } else if (HasReduction(producer)) {
    fuse.reason = "each row's reduction is reused by the rest of that row";
  }
  return fuse;
}

void InstructionFusion::Record(const HloInstruction& producer, const HloInstruction& consumer,
                               bool fused, std::string reason, std::string kind,
                               std::string fusion) {
  auto group_of = [&](const std::string& name) {
    auto group = group_.find(name);
    return group == group_.end() ? name : group->second;
  };
  const std::string key = group_of(producer.name()) + "\n" + group_of(consumer.name());
  auto previous = refusal_index_.find(key);
  if (previous != refusal_index_.end()) {
    decisions_[previous->second].consumer.clear();  // withdrawn; compacted at the end of Run
    refusal_index_.erase(previous);
  }
  if (!fused) refusal_index_[key] = decisions_.size();
  decisions_.push_back({producer.name(), consumer.name(), fused, std::move(reason),
                        std::move(kind), std::move(fusion), DecisionSource(producer)});
}

StatusOr<bool> InstructionFusion::GrowConsumer(HloInstruction* consumer,
                                               std::unordered_set<HloInstruction*>& live) {
  bool fused_any = false;
  for (bool again = true; again;) {
    again = false;
    const Verdict as_consumer = CanBeConsumer(*consumer);
    for (HloInstruction* producer : DistinctOperands(*consumer)) {
      const HloOpcode op = producer->opcode();
      if (!as_consumer.fuse) {
        const bool noise = op == HloOpcode::kParameter || op == HloOpcode::kConstant ||
                           op == HloOpcode::kGetTupleElement ||
                           consumer->opcode() == HloOpcode::kTuple ||
                           consumer->opcode() == HloOpcode::kGetTupleElement;
        if (!noise) Record(*producer, *consumer, false, as_consumer.reason);
        continue;
      }
      Verdict verdict = ShouldFuse(*producer, *consumer);
      if (!verdict.fuse) {
        if (!verdict.reason.empty()) Record(*producer, *consumer, false, verdict.reason);
        continue;
      }
      if (fuel_ >= 0 && fused_ >= fuel_) {
        Record(*producer, *consumer, false, fmt::format("out of fuel (at most {} fusions)", fuel_));
        continue;
      }
      ++fused_;
      FusionPlan plan;
      plan.members = {producer, consumer};
      if (verdict.duplicate) plan.duplicated = {producer};
      if (consumer->opcode() == HloOpcode::kFusion) plan.keep_name_of = consumer;
      const std::string kind(FusionKindString(PlannedKind(plan)));
      // Removed members (and the get-tuple-elements of a multi-output member) leave the worklist.
      for (HloInstruction* member : plan.members) {
        if (verdict.duplicate && member == producer) continue;
        live.erase(member);
        for (HloInstruction* user : member->users()) {
          if (user->opcode() == HloOpcode::kGetTupleElement) live.erase(user);
        }
      }
      const std::string consumer_name = consumer->name();
      const std::string group =
          group_.count(consumer_name) ? group_[consumer_name] : consumer_name;
      // Record before building: the producer and consumer may be gone afterwards.
      Record(*producer, *consumer, true, verdict.reason, kind);
      const size_t record = decisions_.size() - 1;
      // A fusion growing by one producer at a time is grown in place: rebuilding it each time
      // clones every instruction inside, quadratic in the fusion's size.
      const bool in_place = in_place_form_.count(consumer) > 0 && InPlaceFusionKeepsForm(*producer);
      const bool plain_pair = consumer->opcode() != HloOpcode::kFusion &&
                              InPlaceFusionKeepsForm(*producer) &&
                              InPlaceFusionKeepsForm(*consumer);
      in_place_form_.erase(producer);
      in_place_form_.erase(consumer);
      HloInstruction* fusion = nullptr;
      if (in_place) {
        ASSIGN_OR_RETURN(fusion, FuseProducerInPlace(producer, consumer, verdict.duplicate));
      } else {
        ASSIGN_OR_RETURN(fusion, BuildFusion(plan));
      }
      if (in_place || plain_pair) in_place_form_.insert(fusion);
      decisions_[record].fusion = fusion->name();
      group_[fusion->name()] = group;
      live.insert(fusion);
      consumer = fusion;
      fused_any = again = true;
      break;
    }
  }
  return fused_any;
}

StatusOr<bool> InstructionFusion::FuseComputation(HloComputation& computation) {
  bool changed = false;
  for (int round = 0; round < kMaxRounds; ++round) {
    bool round_changed = false;
    std::vector<HloInstruction*> order = computation.MakeInstructionPostOrder();
    std::unordered_set<HloInstruction*> live(order.begin(), order.end());
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      if (!live.count(*it)) continue;
      ASSIGN_OR_RETURN(bool fused, GrowConsumer(*it, live));
      round_changed = round_changed || fused;
    }
    changed = changed || round_changed;
    if (!round_changed) break;
  }
  return changed;
}

StatusOr<bool> InstructionFusion::Run(HloModule& module) {
  decisions_.clear();
  fused_ = 0;
  refusal_index_.clear();
  group_.clear();
  in_place_form_.clear();
  bool changed = false;
  for (HloComputation* computation : FusibleComputations(module)) {
    ASSIGN_OR_RETURN(bool fused, FuseComputation(*computation));
    changed = changed || fused;
  }
  std::erase_if(decisions_, [](const FusionDecision& d) { return d.consumer.empty(); });
  refusal_index_.clear();
  in_place_form_.clear();
  return changed;
}

}  // namespace xlens
