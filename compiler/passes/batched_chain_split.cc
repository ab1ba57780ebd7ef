#include "compiler/passes/batched_chain_split.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "compiler/hlo/computation.h"

namespace xlens {
namespace {

// The number of leading batch dimensions of a canonical dot (dot-decomposer's form), or 0.
int64_t BatchDimensions(const HloInstruction& dot) {
  if (dot.opcode() != HloOpcode::kDot || !dot.dot_dimension_numbers || !dot.shape().IsArray()) return 0;
  const DotDimensionNumbers& dn = *dot.dot_dimension_numbers;
  const int64_t nb = static_cast<int64_t>(dn.lhs_batch_dimensions.size());
  const int64_t rank = dot.shape().rank();
  if (nb == 0 || dn.rhs_batch_dimensions.size() != dn.lhs_batch_dimensions.size() || rank != nb + 2 ||
      dot.operand(0)->shape().rank() != rank || dot.operand(1)->shape().rank() != rank ||
      dn.lhs_contracting_dimensions != std::vector<int64_t>{nb + 1} ||
      dn.rhs_contracting_dimensions != std::vector<int64_t>{nb}) {
    return 0;
  }
  for (int64_t d = 0; d < nb; ++d) {
    if (dn.lhs_batch_dimensions[d] != d || dn.rhs_batch_dimensions[d] != d) return 0;
  }
  return nb;
}

bool LeadsWith(const HloInstruction& i, int64_t batch) {
  return i.shape().IsArray() && i.shape().rank() >= 1 && i.shape().dimensions(0) == batch;
}

// A broadcast of a scalar: the same for every batch element, made anew at the slice's shape.
bool IsScalarBroadcast(const HloInstruction& i) {
  return i.opcode() == HloOpcode::kBroadcast && i.operand_count() == 1 && i.operand(0)->shape().IsArray() &&
         i.operand(0)->shape().rank() == 0;
}

// Whether `i`, between the two products, computes each batch element from that element alone.
bool KeepsBatchesApart(const HloInstruction& i, int64_t batch) {
  if (!LeadsWith(i, batch)) return false;
  switch (i.opcode()) {
    case HloOpcode::kBroadcast:
      return !i.dimensions().empty() && i.dimensions(0) == 0 && LeadsWith(*i.operand(0), batch);
    case HloOpcode::kReduce: {
      const std::vector<int64_t>& reduced = i.dimensions();
      return i.operand_count() == 2 && i.operand(1)->shape().IsArray() && i.operand(1)->shape().rank() == 0 &&
             std::find(reduced.begin(), reduced.end(), 0) == reduced.end();
    }
    case HloOpcode::kReshape:  // row-major: element (b, ...) stays in batch element b
      return LeadsWith(*i.operand(0), batch);
    default:
      return i.IsElementwise();
  }
}

Shape WithBatch(const Shape& shape, int64_t group) {
  Shape s = shape;
  s.set_dimensions(0, group);
  return s;
}

// Batch elements [first, first + group) of `x`.
std::unique_ptr<HloInstruction> SliceBatch(HloInstruction* x, int64_t first, int64_t group) {
  const Shape& in = x->shape();
  auto slice = std::make_unique<HloInstruction>(HloOpcode::kSlice, WithBatch(in, group));
  slice->AppendOperand(x);
  slice->slice_starts.assign(in.rank(), 0);
  slice->slice_limits = in.dimensions();
  slice->slice_strides.assign(in.rank(), 1);
  slice->slice_starts[0] = first;
  slice->slice_limits[0] = first + group;
  slice->has_slice = true;
  slice->metadata = x->metadata;
  return slice;
}

// The chain ending in `second`: the first product and the instructions between them (post
// order), when it can be split; false otherwise.
struct Chain {
  HloInstruction* first = nullptr;
  HloInstruction* second = nullptr;
  std::vector<HloInstruction*> between;
};

bool FindChain(HloInstruction* second, int64_t batch, Chain* chain) {
  HloInstruction* p = second->operand(0);
  // Everything p is computed from, short of other products.
  std::set<HloInstruction*> up;
  std::vector<HloInstruction*> stack{p};
  std::vector<HloInstruction*> firsts;
  while (!stack.empty()) {
    HloInstruction* x = stack.back();
    stack.pop_back();
    if (!up.insert(x).second) continue;
    if (x->opcode() == HloOpcode::kDot) {
      if (BatchDimensions(*x) > 0 && LeadsWith(*x, batch)) firsts.push_back(x);
      continue;
    }
    for (HloInstruction* o : x->operands()) stack.push_back(o);
  }
  for (HloInstruction* first : firsts) {
    // What is computed from `first` on the way to p: the instructions between the products.
    std::set<HloInstruction*> down;
    std::vector<HloInstruction*> work{first};
    bool ok = true;
    while (!work.empty() && ok) {
      HloInstruction* x = work.back();
      work.pop_back();
      for (HloInstruction* u : x->users()) {
        if (u == second) continue;
        if (!up.count(u)) ok = false;  // read elsewhere too: the whole result is needed
        if (down.insert(u).second) work.push_back(u);
      }
    }
    if (!ok || (p != first && !down.count(p))) continue;
    for (HloInstruction* x : down) {
      if (!KeepsBatchesApart(*x, batch)) ok = false;
      for (HloInstruction* o : x->operands()) {
        // Any other operand: a scalar, a scalar's broadcast, or an array of the batch's elements.
        if (o == first || down.count(o) || (o->shape().IsArray() && o->shape().rank() == 0) ||
            IsScalarBroadcast(*o) || LeadsWith(*o, batch)) {
          continue;
        }
        ok = false;
      }
    }
    // Control dependencies would not carry over to the copies.
    auto ordered = [](const HloInstruction* x) {
      return !x->control_predecessors().empty() || !x->control_successors().empty();
    };
    if (!ok || ordered(first) || ordered(second) || std::any_of(down.begin(), down.end(), ordered)) continue;
    chain->first = first;
    chain->second = second;
    chain->between.clear();
    for (HloInstruction* x : second->parent()->MakeInstructionPostOrder()) {
      if (down.count(x)) chain->between.push_back(x);
    }
    return true;
  }
  return false;
}

// Replaces the chain by one chain per `group` batch elements and the concatenation of their
// results.
Status Split(const Chain& chain, int64_t batch, int64_t group) {
  HloComputation* computation = chain.second->parent();
  std::set<HloInstruction*> between(chain.between.begin(), chain.between.end());
  auto concat = std::make_unique<HloInstruction>(HloOpcode::kConcatenate, chain.second->shape());
  concat->dimensions_attr = std::vector<int64_t>{0};
  concat->metadata = chain.second->metadata;
  for (int64_t b = 0; b < batch; b += group) {
    auto one = [&](const Shape& shape) { return WithBatch(shape, group); };
    std::map<HloInstruction*, HloInstruction*> sliced;  // an operand from outside -> its slice
    // A transpose that keeps the batch dimension where it is (dot-decomposer's k^T) is made
    // anew over its operand's slice, so that the product still reads it in place.
    std::function<HloInstruction*(HloInstruction*)> slice_of = [&](HloInstruction* x) -> HloInstruction* {
      auto it = sliced.find(x);
      if (it != sliced.end()) return it->second;
      HloInstruction* s;
      if (x->opcode() == HloOpcode::kTranspose && !x->dimensions().empty() && x->dimensions(0) == 0 &&
          LeadsWith(*x->operand(0), batch)) {
        s = computation->AddInstruction(x->CloneWithNewOperands(one(x->shape()), {slice_of(x->operand(0))}));
      } else {
        s = computation->AddInstruction(SliceBatch(x, b, group));
      }
      sliced[x] = s;
      return s;
    };
    std::map<HloInstruction*, HloInstruction*> made;  // chain instruction -> its copy for the group
    auto operand_of = [&](HloInstruction* o) -> HloInstruction* {
      if (o == chain.first || between.count(o)) return made.at(o);
      if (o->shape().IsArray() && o->shape().rank() == 0) return o;
      if (IsScalarBroadcast(*o)) {
        auto it = sliced.find(o);
        if (it == sliced.end()) {
          it = sliced.emplace(o, computation->AddInstruction(
                                     o->CloneWithNewOperands(one(o->shape()), {o->operand(0)}))).first;
        }
        return it->second;
      }
      return slice_of(o);
    };
    made[chain.first] = computation->AddInstruction(chain.first->CloneWithNewOperands(
        one(chain.first->shape()), {slice_of(chain.first->operand(0)), slice_of(chain.first->operand(1))}));
    for (HloInstruction* x : chain.between) {
      std::vector<HloInstruction*> operands;
      for (HloInstruction* o : x->operands()) operands.push_back(operand_of(o));
      made[x] = computation->AddInstruction(x->CloneWithNewOperands(one(x->shape()), operands));
    }
    HloInstruction* result = computation->AddInstruction(chain.second->CloneWithNewOperands(
        one(chain.second->shape()), {operand_of(chain.second->operand(0)), slice_of(chain.second->operand(1))}));
    concat->AppendOperand(result);
  }
  // The whole chain goes with the second product (the operands it leaves unused).
  return computation->ReplaceInstruction(chain.second, computation->AddInstruction(std::move(concat)));
}

}  // namespace

StatusOr<bool> BatchedChainSplit::Run(HloModule& module) {
  bool changed = false;
  for (HloComputation* computation : module.computations()) {
    for (HloInstruction* second : computation->MakeInstructionPostOrder()) {
      if (second->opcode() != HloOpcode::kDot || BatchDimensions(*second) == 0) continue;
      const int64_t batch = second->shape().dimensions(0);
      Chain chain;
      if (batch < 2 || !FindChain(second, batch, &chain)) continue;
      const int64_t bytes = shape_util::ByteSizeOf(chain.first->shape());
      if (bytes < min_bytes_ || bytes / batch > max_chain_bytes_) continue;
      // As many batch elements per chain as the bound allows (a divisor of the batch): fewer
      // chains to compile, each still in the cache.
      int64_t group = 1;
      for (int64_t g = 2; g < batch; ++g) {
        if (batch % g == 0 && bytes / batch * g <= max_chain_bytes_) group = g;
      }
      RETURN_IF_ERROR(Split(chain, batch, group));
      changed = true;
    }
  }
  return changed;
}

}  // namespace xlens
