#include "compiler/passes/copy_insertion.h"

#include <algorithm>
#include <charconv>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "compiler/hlo/module.h"

namespace xlens {

namespace {

using Index = std::vector<int64_t>;

StatusOr<int64_t> ParseNumber(const std::string& text) {
  size_t begin = text.find_first_not_of(" \t\n");
  size_t end = text.find_last_not_of(" \t\n");
  int64_t value = 0;
  if (begin == std::string::npos) return Error("input_output_alias: empty number");
  auto [ptr, ec] = std::from_chars(text.data() + begin, text.data() + end + 1, value);
  if (ec != std::errc() || ptr != text.data() + end + 1) {
    return Error("input_output_alias: bad number '" + text + "'");
  }
  return value;
}

StatusOr<Index> ParseIndexList(const std::string& text) {
  Index index;
  std::string token;
  for (char c : text + ",") {
    if (c != ',') {
      token += c;
      continue;
    }
    if (token.find_first_not_of(" \t\n") != std::string::npos) {
      ASSIGN_OR_RETURN(int64_t n, ParseNumber(token));
      index.push_back(n);
    }
    token.clear();
  }
  return index;
}

// Where the array at `index` of `value` is defined: tuples, get-tuple-elements and bitcasts only
// forward buffers. `exclusive` (when given) turns false if a step on the way has another user.
std::pair<HloInstruction*, Index> SourceOf(HloInstruction* value, Index index,
                                           bool* exclusive = nullptr) {
  while (true) {
    HloInstruction* next = nullptr;
    if (value->opcode() == HloOpcode::kTuple && !index.empty() &&
        index[0] < value->operand_count()) {
      next = value->operand(index[0]);
      index.erase(index.begin());
    } else if (value->opcode() == HloOpcode::kGetTupleElement) {
      index.insert(index.begin(), value->tuple_index());
      next = value->operand(0);
    } else if (value->opcode() == HloOpcode::kBitcast) {
      next = value->operand(0);
    } else {
      return {value, index};
    }
    if (exclusive != nullptr && next->user_count() != 1) *exclusive = false;
    value = next;
  }
}

std::vector<Index> ArrayLeaves(const Shape& shape) {
  std::vector<Index> leaves;
  shape.ForEachLeaf([&](const Shape& leaf, const std::vector<int64_t>& index) {
    if (leaf.IsArray()) leaves.push_back(index);
  });
  return leaves;
}

bool IsPrefix(const Index& a, const Index& b) {
  return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
}

bool Related(const Index& a, const Index& b) { return IsPrefix(a, b) || IsPrefix(b, a); }

HloInstruction* MakeCopy(HloComputation* comp, HloInstruction* value) {
  auto copy = HloInstruction::CreateUnary(HloOpcode::kCopy, value->shape(), value);
  copy->metadata = value->metadata;
  return comp->AddInstruction(std::move(copy));
}

Shape TupleOfOperands(const HloInstruction& tuple) {
  std::vector<Shape> elements;
  for (const HloInstruction* op : tuple.operands()) elements.push_back(op->shape());
  return Shape::Tuple(std::move(elements));
}

using LeafFn = std::function<HloInstruction*(HloInstruction* leaf, const Index& index)>;

// `value` with the arrays at `targets` replaced by what `fn` makes of them. A tuple instruction
// nobody else uses is edited in place; any other tuple is taken apart and rebuilt.
HloInstruction* Rebuild(HloComputation* comp, HloInstruction* value, Index& prefix,
                        const std::set<Index>& targets, const LeafFn& fn) {
  bool any = std::any_of(targets.begin(), targets.end(),
                         [&](const Index& t) { return IsPrefix(prefix, t); });
  if (!any) return value;
  if (!value->shape().IsTuple()) return fn(value, prefix);
  if (value->opcode() == HloOpcode::kTuple && value->user_count() <= 1) {
    for (int64_t i = 0; i < value->operand_count(); ++i) {
      prefix.push_back(i);
      HloInstruction* element = Rebuild(comp, value->operand(i), prefix, targets, fn);
      prefix.pop_back();
      if (element != value->operand(i)) value->ReplaceOperandWith(i, element);
    }
    value->set_shape(TupleOfOperands(*value));
    return value;
  }
  auto tuple = std::make_unique<HloInstruction>(HloOpcode::kTuple, Shape());
  for (int64_t i = 0; i < value->shape().tuple_shapes_size(); ++i) {
    auto gte = std::make_unique<HloInstruction>(HloOpcode::kGetTupleElement,
                                                value->shape().tuple_shapes(i));
    gte->AppendOperand(value);
    gte->tuple_index_attr = i;
    prefix.push_back(i);
    tuple->AppendOperand(Rebuild(comp, comp->AddInstruction(std::move(gte)), prefix, targets, fn));
    prefix.pop_back();
  }
  tuple->set_shape(TupleOfOperands(*tuple));
  return comp->AddInstruction(std::move(tuple));
}

class Inserter {
 public:
  explicit Inserter(HloModule& module) : module_(module) {}

  StatusOr<bool> Run() {
    ASSIGN_OR_RETURN(aliases_, ParseInputOutputAliases(module_));
    std::unordered_set<HloComputation*> bodies_done;
    for (HloComputation* comp : module_.computations()) {
      if (comp->IsFusionComputation()) continue;
      for (HloInstruction* instr : comp->MakeInstructionPostOrder()) {
        switch (instr->opcode()) {
          case HloOpcode::kWhile:
            if (instr->while_body() == nullptr) break;
            CopyWhileInit(instr);
            if (bodies_done.insert(instr->while_body()).second) CopyWhileBody(instr->while_body());
            break;
          case HloOpcode::kConditional:
            for (HloComputation* branch : instr->branch_computations()) CopyOwnedResult(branch);
            break;
          case HloOpcode::kCall:
            if (instr->to_apply() != nullptr) CopyOwnedResult(instr->to_apply());
            break;
          default:
            break;
        }
      }
    }
    CopyEntryOutputs();
    return changed_;
  }

 private:
  void ReplaceRoot(HloComputation* comp, const std::set<Index>& targets, const LeafFn& fn) {
    if (targets.empty()) return;
    Index prefix;
    HloInstruction* root = Rebuild(comp, comp->root_instruction(), prefix, targets, fn);
    comp->set_root_instruction(root);
    changed_ = true;
  }

  LeafFn CopyEach(HloComputation* comp) {
    return [comp](HloInstruction* leaf, const Index&) { return MakeCopy(comp, leaf); };
  }

  void CopyEntryOutputs() {
    HloComputation* entry = module_.entry_computation();
    std::set<std::pair<HloInstruction*, Index>> seen;
    std::set<Index> targets;
    for (const Index& leaf : ArrayLeaves(entry->root_instruction()->shape())) {
      auto source = SourceOf(entry->root_instruction(), leaf);
      bool aliased = source.first->opcode() == HloOpcode::kParameter &&
                     std::any_of(aliases_.begin(), aliases_.end(), [&](const InputOutputAlias& a) {
                       return a.output_index == leaf &&
                              a.parameter == source.first->parameter_number() &&
                              a.parameter_index == source.second;
                     });
      bool read_only = (source.first->opcode() == HloOpcode::kParameter && !aliased) ||
                       source.first->opcode() == HloOpcode::kConstant;
      if (read_only || !seen.insert(source).second) targets.insert(leaf);
    }
    ReplaceRoot(entry, targets, CopyEach(entry));
  }

  // Branches and callees write the caller's result buffer, never their parameters or constants.
  void CopyOwnedResult(HloComputation* comp) {
    std::set<std::pair<HloInstruction*, Index>> seen;
    std::set<Index> targets;
    for (const Index& leaf : ArrayLeaves(comp->root_instruction()->shape())) {
      auto source = SourceOf(comp->root_instruction(), leaf);
      HloOpcode op = source.first->opcode();
      if (op == HloOpcode::kParameter || op == HloOpcode::kConstant ||
          !seen.insert(source).second) {
        targets.insert(leaf);
      }
    }
    ReplaceRoot(comp, targets, CopyEach(comp));
  }

  void CopyWhileInit(HloInstruction* loop) {
    HloComputation* comp = loop->parent();
    HloInstruction* init = loop->operand(0);
    std::set<std::pair<HloInstruction*, Index>> seen;
    std::set<Index> targets;
    for (const Index& leaf : ArrayLeaves(init->shape())) {
      bool exclusive = init->user_count() == 1;
      auto source = SourceOf(init, leaf, &exclusive);
      HloOpcode op = source.first->opcode();
      if (!exclusive || op == HloOpcode::kParameter || op == HloOpcode::kConstant ||
          !seen.insert(source).second) {
        targets.insert(leaf);
      }
    }
    if (targets.empty()) return;
    Index prefix;
    HloInstruction* rebuilt = Rebuild(comp, init, prefix, targets, CopyEach(comp));
    if (rebuilt != init) loop->ReplaceOperandWith(0, rebuilt);
    changed_ = true;
  }

  // The instructions of `body` that read state element `leaf` (through get-tuple-elements and
  // bitcasts); the tuples that only assemble the root do not read anything.
  std::vector<HloInstruction*> StateReaders(HloComputation* body, const Index& leaf) {
    std::unordered_set<const HloInstruction*> root_tuples;
    std::vector<const HloInstruction*> stack = {body->root_instruction()};
    while (!stack.empty()) {
      const HloInstruction* t = stack.back();
      stack.pop_back();
      if (t->opcode() != HloOpcode::kTuple || !root_tuples.insert(t).second) continue;
      for (const HloInstruction* op : t->operands()) stack.push_back(op);
    }
    std::vector<HloInstruction*> readers;
    std::vector<std::pair<HloInstruction*, Index>> work = {{body->parameter_instruction(0), {}}};
    while (!work.empty()) {
      auto [value, path] = work.back();
      work.pop_back();
      for (HloInstruction* user : value->users()) {
        if (user->opcode() == HloOpcode::kGetTupleElement) {
          Index next = path;
          next.push_back(user->tuple_index());
          if (Related(next, leaf)) work.push_back({user, next});
        } else if (user->opcode() == HloOpcode::kBitcast) {
          work.push_back({user, path});
        } else if (!root_tuples.count(user) &&
                   std::find(readers.begin(), readers.end(), user) == readers.end()) {
          readers.push_back(user);
        }
      }
    }
    return readers;
  }

  // A dynamic-update-slice of the state slot it writes (a list's buffer in a loop: SetItem at
  // the step) updates it in place when the slot is its operand 0 and none of the others, as XLA's
  // copy insertion lets it: buffer assignment already shares its operand 0's buffer.
  static bool UpdatesOperandZeroOnly(HloInstruction* def, HloInstruction* param,
                                     const Index& leaf) {
    if (def->opcode() != HloOpcode::kDynamicUpdateSlice) return false;
    auto is_slot = [&](HloInstruction* operand) {
      auto source = SourceOf(operand, {});
      return source.first == param && source.second == leaf;
    };
    if (!is_slot(def->operand(0))) return false;
    for (int64_t k = 1; k < def->operand_count(); ++k) {
      if (SourceOf(def->operand(k), {}).first == param &&
          Related(SourceOf(def->operand(k), {}).second, leaf)) {
        return false;
      }
    }
    return true;
  }

  void CopyWhileBody(HloComputation* body) {
    if (body->num_parameters() != 1) return;
    HloInstruction* param = body->parameter_instruction(0);
    HloInstruction* root = body->root_instruction();
    if (root == param) return;
    std::unordered_map<const HloInstruction*, int64_t> position;
    for (HloInstruction* instr : body->MakeInstructionPostOrder()) {
      position[instr] = static_cast<int64_t>(position.size());
    }
    enum class Action { kCopy, kCopyTwice };
    std::map<Index, Action> actions;
    std::map<Index, HloInstruction*> writers;  // what writes each state slot
    std::set<std::pair<HloInstruction*, Index>> seen;
    for (const Index& leaf : ArrayLeaves(root->shape())) {
      auto source = SourceOf(root, leaf);
      bool repeated = !seen.insert(source).second;
      HloInstruction* def = source.first;
      if (def == param) {
        if (source.second != leaf || repeated) actions[leaf] = Action::kCopyTwice;
      } else if (repeated || def->opcode() == HloOpcode::kParameter ||
                 def->opcode() == HloOpcode::kConstant) {
        actions[leaf] = Action::kCopy;
      } else {
        bool in_place = true;
        for (HloInstruction* reader : StateReaders(body, leaf)) {
          if (reader == def ? !def->IsElementwise() && !UpdatesOperandZeroOnly(def, param, leaf)
                            : position[reader] >= position[def]) {
            in_place = false;
          }
        }
        if (in_place) {
          writers[leaf] = def;
        } else {
          actions[leaf] = Action::kCopy;
        }
      }
    }
    std::set<Index> targets;
    for (const auto& [leaf, action] : actions) targets.insert(leaf);
    ReplaceRoot(body, targets, [&](HloInstruction* value, const Index& leaf) {
      HloInstruction* copy = MakeCopy(body, value);
      if (actions.at(leaf) == Action::kCopyTwice) copy = MakeCopy(body, copy);
      writers[leaf] = copy;
      return copy;
    });
    for (const auto& [leaf, writer] : writers) {
      for (HloInstruction* reader : StateReaders(body, leaf)) {
        const auto& ops = writer->operands();
        const auto& preds = writer->control_predecessors();
        if (reader == writer || std::find(ops.begin(), ops.end(), reader) != ops.end() ||
            std::find(preds.begin(), preds.end(), reader) != preds.end()) {
          continue;
        }
        reader->AddControlDependencyTo(writer);
        changed_ = true;
      }
    }
  }

  HloModule& module_;
  std::vector<InputOutputAlias> aliases_;
  bool changed_ = false;
};

}  // namespace

StatusOr<std::vector<InputOutputAlias>> ParseInputOutputAliases(const HloModule& module) {
  std::vector<InputOutputAlias> aliases;
  static const std::regex kEntry(R"(\{([0-9,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([0-9,\s]*)\})");
  for (const RawAttribute& attr : module.header_attributes()) {
    if (attr.key != "input_output_alias") continue;
    for (std::sregex_iterator it(attr.value.begin(), attr.value.end(), kEntry), end; it != end;
         ++it) {
      InputOutputAlias alias;
      ASSIGN_OR_RETURN(alias.output_index, ParseIndexList((*it)[1].str()));
      ASSIGN_OR_RETURN(alias.parameter, ParseNumber((*it)[2].str()));
      ASSIGN_OR_RETURN(alias.parameter_index, ParseIndexList((*it)[3].str()));
      aliases.push_back(std::move(alias));
    }
  }
  return aliases;
}

StatusOr<bool> CopyInsertion::Run(HloModule& module) {
  if (module.entry_computation() == nullptr) return Error("copy-insertion: module has no entry");
  return Inserter(module).Run();
}

}  // namespace xlens
