#include "compiler/tools/hlo_reducer.h"

#include <algorithm>
#include <chrono>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "compiler/hlo/parser.h"
#include "compiler/hlo/printer.h"
#include "compiler/passes/dce.h"

namespace xlens::tools {

int64_t CountInstructions(const HloModule& module) {
  int64_t n = 0;
  for (const HloComputation* c : module.computations()) n += c->instruction_count();
  return n;
}

namespace {

using Clock = std::chrono::steady_clock;

// What "smaller" means, compared in order: instructions, then array elements, then text.
struct ModuleSize {
  int64_t instructions = 0;
  int64_t elements = 0;
  int64_t text = 0;
  auto operator<=>(const ModuleSize&) const = default;
};

ModuleSize SizeOf(const HloModule& module, const std::string& text) {
  ModuleSize size{CountInstructions(module), 0, static_cast<int64_t>(text.size())};
  for (const HloComputation* c : module.computations()) {
    for (const HloInstruction* i : c->instructions()) {
      if (i->shape().IsArray()) size.elements += i->shape().num_elements();
    }
  }
  return size;
}

// Removes what nothing uses, drops unused entry parameters (renumbering the others) and the
// entry layout, which a changed signature no longer matches.
Status Cleanup(HloModule& module) {
  HloDce dce;
  RETURN_IF_ERROR(dce.Run(module).status());
  HloComputation* entry = module.entry_computation();
  bool removed = false;
  for (HloInstruction* p : std::vector<HloInstruction*>(entry->parameter_instructions())) {
    if (p != nullptr && p->user_count() == 0 && p != entry->root_instruction()) {
      RETURN_IF_ERROR(entry->RemoveInstruction(p));
      removed = true;
    }
  }
  if (removed) {
    std::vector<HloInstruction*> order = entry->instructions();
    int64_t n = 0;
    for (HloInstruction* i : order) {
      if (i->opcode() == HloOpcode::kParameter) i->set_parameter_number(n++);
    }
    RETURN_IF_ERROR(entry->ReorderInstructions(order));
  }
  module.set_entry_computation_layout(std::nullopt);
  return OkStatus();
}

// A constant zero of `shape` (an array): a scalar, broadcast when the shape has dimensions.
HloInstruction* Zero(HloComputation& computation, const Shape& shape) {
  Shape scalar = Shape::Scalar(shape.element_type());
  if (shape.has_layout()) scalar.SetDefaultLayout();
  HloInstruction* zero = computation.AddInstruction(HloInstruction::CreateConstant(Literal(scalar)));
  if (shape.rank() == 0) return zero;
  auto broadcast = std::make_unique<HloInstruction>(HloOpcode::kBroadcast, shape);
  broadcast->AppendOperand(zero);
  broadcast->dimensions_attr = std::vector<int64_t>{};
  return computation.AddInstruction(std::move(broadcast));
}

// Replaces every use of `old` (and the root, if it is) by `replacement`.
void Replace(HloComputation& computation, HloInstruction* old, HloInstruction* replacement) {
  old->ReplaceAllUsesWith(replacement);
  if (computation.root_instruction() == old) computation.set_root_instruction(replacement);
}

class Reducer {
 public:
  Reducer(const ReductionTest& test, const ReduceOptions& options)
      : test_(test), options_(options), start_(Clock::now()) {}

  StatusOr<ReduceResult> Run(const HloModule& module) {
    ASSIGN_OR_RETURN(current_, ParseHloModule(PrintModule(module), ParseOptions{.verify = true}));
    current_text_ = PrintModule(*current_);
    size_ = SizeOf(*current_, current_text_);
    result_.initial_instructions = size_.instructions;
    ++result_.tests;
    ASSIGN_OR_RETURN(bool fails, test_(*current_));
    if (!fails) {
      return Error("the test passes on the module as given: there is no failure to keep while "
                   "reducing (check the test command, its exit status and the flags)");
    }
    Say(fmt::format("{} instructions; the test fails on the module as given", size_.instructions));
    while (!TimeUp()) {
      const ModuleSize before = size_;
      RETURN_IF_ERROR(DropOutputs());
      RETURN_IF_ERROR(Promote());
      RETURN_IF_ERROR(ReplaceInstructions(Replacement::kParameter));
      RETURN_IF_ERROR(ReplaceInstructions(Replacement::kOperand));
      RETURN_IF_ERROR(ReplaceInstructions(Replacement::kZero));
      RETURN_IF_ERROR(SimplifyConstants());
      RETURN_IF_ERROR(ShrinkDimensions());
      if (!(size_ < before)) break;
    }
    result_.timed_out = TimeUp();
    result_.final_instructions = size_.instructions;
    result_.seconds = Seconds();
    result_.module = std::move(current_);
    return std::move(result_);
  }

 private:
  double Seconds() const {
    return std::chrono::duration<double>(Clock::now() - start_).count();
  }
  bool TimeUp() const { return Seconds() >= options_.time_limit_seconds; }
  void Say(const std::string& line) const {
    if (options_.progress) options_.progress(line);
  }

  // A candidate from `text`, verified and cleaned; null when it does not verify or is no
  // smaller.
  std::unique_ptr<HloModule> Verified(const std::string& text) const {
    StatusOr<std::unique_ptr<HloModule>> parsed = ParseHloModule(text, ParseOptions{.verify = true});
    if (!parsed.ok()) return nullptr;
    return std::move(*parsed);
  }

  // Applies `mutate` to a copy of the current module; the candidate when it verifies, is
  // smaller and the test still fails on it.
  StatusOr<bool> Try(const std::function<Status(HloModule&)>& mutate, const std::string& what) {
    if (TimeUp()) return false;
    std::unique_ptr<HloModule> candidate = Verified(current_text_);
    if (candidate == nullptr) return false;
    if (!mutate(*candidate).ok() || !Cleanup(*candidate).ok()) return false;
    return TryText(PrintModule(*candidate), what);
  }

  StatusOr<bool> TryText(const std::string& text, const std::string& what) {
    if (TimeUp()) return false;
    std::unique_ptr<HloModule> candidate = Verified(text);
    if (candidate == nullptr) return false;
    if (!Cleanup(*candidate).ok()) return false;
    std::string printed = PrintModule(*candidate);
    candidate = Verified(printed);  // every candidate the test sees passes the verifier
    if (candidate == nullptr) return false;
    const ModuleSize size = SizeOf(*candidate, printed);
    if (!(size < size_)) return false;
    ++result_.tests;
    ASSIGN_OR_RETURN(bool fails, test_(*candidate));
    if (!fails) return false;
    ++result_.accepted;
    Say(fmt::format("{} -> {} instructions: {} (test {}, {:.1f} s)", size_.instructions,
                    size.instructions, what, result_.tests, Seconds()));
    current_ = std::move(candidate);
    current_text_ = std::move(printed);
    size_ = size;
    return true;
  }

  // Names of the entry's instructions in program order, without parameters.
  std::vector<std::string> EntryNames(bool with_root) const {
    std::vector<std::string> names;
    const HloComputation* entry = current_->entry_computation();
    for (const HloInstruction* i : entry->MakeInstructionPostOrder()) {
      if (i->opcode() == HloOpcode::kParameter) continue;
      if (!with_root && i == entry->root_instruction()) continue;
      names.push_back(i->name());
    }
    return names;
  }

  Status DropOutputs() {
    const HloInstruction* root = current_->entry_computation()->root_instruction();
    if (root->opcode() != HloOpcode::kTuple || root->operand_count() < 2) return OkStatus();
    const int64_t outputs = root->operand_count();
    for (int64_t i = 0; i < outputs; ++i) {
      ASSIGN_OR_RETURN(bool kept, Try(
          [i](HloModule& m) {
            HloComputation* entry = m.entry_computation();
            entry->set_root_instruction(entry->root_instruction()->operand(i));
            return OkStatus();
          },
          fmt::format("keep output {} of {}", i, outputs)));
      if (kept) return OkStatus();
    }
    return OkStatus();
  }

  // Makes an inner instruction the root: a binary search for the earliest one, in program order,
  // on which the test still fails; repeated while it finds one.
  Status Promote() {
    while (!TimeUp()) {
      std::vector<std::string> names = EntryNames(/*with_root=*/false);
      auto promote = [](const std::string& name) {
        return [name](HloModule& m) {
          HloComputation* entry = m.entry_computation();
          HloInstruction* i = entry->GetInstructionWithName(name);
          if (i == nullptr) return Error("gone");
          entry->set_root_instruction(i);
          return OkStatus();
        };
      };
      size_t lo = 0, hi = names.size();
      std::string best_text;
      std::string best_name;
      while (lo < hi && !TimeUp()) {
        const size_t mid = lo + (hi - lo) / 2;
        std::unique_ptr<HloModule> candidate = Verified(current_text_);
        if (candidate == nullptr || !promote(names[mid])(*candidate).ok() ||
            !Cleanup(*candidate).ok()) {
          lo = mid + 1;
          continue;
        }
        std::string text = PrintModule(*candidate);
        std::unique_ptr<HloModule> checked = Verified(text);
        bool fails = false;
        if (checked != nullptr && SizeOf(*checked, text) < size_) {
          ++result_.tests;
          ASSIGN_OR_RETURN(fails, test_(*checked));
        }
        if (fails) {
          best_text = std::move(text);
          best_name = names[mid];
          hi = mid;
        } else {
          lo = mid + 1;
        }
      }
      if (best_text.empty()) return OkStatus();
      // Accepting re-runs the test once more; it is deterministic, so it still fails.
      ASSIGN_OR_RETURN(bool kept, TryText(best_text, fmt::format("make %{} the root", best_name)));
      if (!kept) return OkStatus();
    }
    return OkStatus();
  }

  enum class Replacement { kParameter, kOperand, kZero };

  // Replaces instructions, nearest the root first, by a new parameter, by one of their operands
  // of the same shape (the instruction is bypassed), or by zero: what only fed them goes.
  Status ReplaceInstructions(Replacement how) {
    std::vector<std::string> names = EntryNames(/*with_root=*/true);
    std::reverse(names.begin(), names.end());
    for (const std::string& name : names) {
      if (TimeUp()) return OkStatus();
      const HloInstruction* i = current_->entry_computation()->GetInstructionWithName(name);
      if (i == nullptr || !i->shape().IsArray()) continue;
      if (i->operand_count() == 0 && (how != Replacement::kZero || i->opcode() == HloOpcode::kConstant)) {
        continue;
      }
      const int64_t choices = how == Replacement::kOperand ? i->operand_count() : 1;
      for (int64_t k = 0; k < choices; ++k) {
        if (how == Replacement::kOperand &&
            !shape_util::Compatible(i->operand(k)->shape(), i->shape())) {
          continue;
        }
        auto mutate = [name, how, k](HloModule& m) -> Status {
          HloComputation* entry = m.entry_computation();
          HloInstruction* old = entry->GetInstructionWithName(name);
          if (old == nullptr) return Error("gone");
          HloInstruction* replacement = nullptr;
          switch (how) {
            case Replacement::kParameter:
              replacement = entry->AddInstruction(
                  HloInstruction::CreateParameter(entry->num_parameters(), old->shape(), "p"));
              break;
            case Replacement::kOperand: replacement = old->operand(k); break;
            case Replacement::kZero: replacement = Zero(*entry, old->shape()); break;
          }
          Replace(*entry, old, replacement);
          return OkStatus();
        };
        const std::string what =
            how == Replacement::kParameter ? "a parameter"
            : how == Replacement::kZero    ? "zero"
                                           : fmt::format("its operand {}", k);
        ASSIGN_OR_RETURN(bool kept, Try(mutate, fmt::format("replace %{} by {}", name, what)));
        if (kept) break;
      }
    }
    return OkStatus();
  }

  // Constants become zeros of their shape (shorter text, fewer distinct values to think about).
  Status SimplifyConstants() {
    std::vector<std::pair<std::string, std::string>> constants;  // computation, instruction
    for (const HloComputation* c : current_->computations()) {
      for (const HloInstruction* i : c->instructions()) {
        if (i->opcode() == HloOpcode::kConstant && i->shape().IsArray() && i->has_literal()) {
          constants.push_back({c->name(), i->name()});
        }
      }
    }
    for (const auto& [computation, name] : constants) {
      if (TimeUp()) return OkStatus();
      auto mutate = [&](HloModule& m) -> Status {
        HloComputation* c = m.GetComputationWithName(computation);
        HloInstruction* i = c == nullptr ? nullptr : c->GetInstructionWithName(name);
        if (i == nullptr) return Error("gone");
        i->set_literal(Literal(i->shape()));
        return OkStatus();
      };
      RETURN_IF_ERROR(Try(mutate, fmt::format("constant %{} := 0", name)).status());
    }
    return OkStatus();
  }

  // Every dimension of one size, in every shape of the text, becomes 1 (or half).
  Status ShrinkDimensions() {
    static const std::regex kShape(R"(\b([a-z][a-z0-9]*)\[([0-9,]+)\])");
    std::set<int64_t, std::greater<>> sizes;
    for (auto it = std::sregex_iterator(current_text_.begin(), current_text_.end(), kShape);
         it != std::sregex_iterator(); ++it) {
      std::string dims = (*it)[2];
      for (size_t p = 0; p < dims.size();) {
        size_t comma = dims.find(',', p);
        const int64_t d = std::stoll(dims.substr(p, comma - p));
        if (d > 1) sizes.insert(d);
        p = comma == std::string::npos ? dims.size() : comma + 1;
      }
    }
    for (int64_t size : sizes) {
      for (int64_t to : {int64_t{1}, size / 2}) {
        if (TimeUp()) return OkStatus();
        if (to < 1 || (to == size / 2 && to == 1)) continue;
        std::string text;
        auto last = current_text_.cbegin();
        for (auto it = std::sregex_iterator(current_text_.begin(), current_text_.end(), kShape);
             it != std::sregex_iterator(); ++it) {
          text.append(last, (*it)[0].first);
          std::string dims = (*it)[2], out;
          for (size_t p = 0; p < dims.size();) {
            size_t comma = dims.find(',', p);
            std::string d = dims.substr(p, comma - p);
            out += (out.empty() ? "" : ",") + (std::stoll(d) == size ? std::to_string(to) : d);
            p = comma == std::string::npos ? dims.size() : comma + 1;
          }
          text += std::string((*it)[1]) + "[" + out + "]";
          last = (*it)[0].second;
        }
        text.append(last, current_text_.cend());
        ASSIGN_OR_RETURN(bool kept, TryText(text, fmt::format("dimensions of size {} -> {}", size, to)));
        if (kept) break;
      }
    }
    return OkStatus();
  }

  const ReductionTest& test_;
  const ReduceOptions& options_;
  const Clock::time_point start_;
  std::unique_ptr<HloModule> current_;
  std::string current_text_;
  ModuleSize size_;
  ReduceResult result_;
};

}  // namespace

StatusOr<ReduceResult> ReduceModule(const HloModule& module, const ReductionTest& test,
                                    const ReduceOptions& options) {
  Reducer reducer(test, options);
  return reducer.Run(module);
}

}  // namespace xlens::tools
