#include "compiler/hlo/elided_constants.h"

#include <random>

#include <fmt/format.h>

#include "compiler/hlo/random_literal.h"

namespace xlens {
namespace {

StatusOr<Literal> Filled(const Literal& literal, ElidedConstantFill fill, std::mt19937_64& rng) {
  if (literal.shape().IsTuple()) {
    std::vector<Literal> elements;
    for (const Literal& element : literal.tuple_elements()) {
      ASSIGN_OR_RETURN(Literal e, Filled(element, fill, rng));
      elements.push_back(std::move(e));
    }
    Literal tuple = Literal::MakeTuple(std::move(elements));
    return tuple;
  }
  if (!literal.is_elided()) return literal;
  Literal out;
  if (fill == ElidedConstantFill::kZeros) {
    out = Literal(literal.shape());
  } else {
    ASSIGN_OR_RETURN(out, MakeRandomLiteral(literal.shape(), rng));
  }
  if (literal.shape().has_layout()) out.set_layout(literal.shape().layout());
  return out;
}

}  // namespace

std::optional<ElidedConstantFill> ParseElidedConstantFill(std::string_view text) {
  if (text == "zeros") return ElidedConstantFill::kZeros;
  if (text == "random") return ElidedConstantFill::kRandom;
  return std::nullopt;
}

bool HasElidedValues(const Literal& literal) {
  if (literal.is_elided()) return true;
  for (const Literal& element : literal.tuple_elements()) {
    if (HasElidedValues(element)) return true;
  }
  return false;
}

std::vector<const HloInstruction*> ElidedConstants(const HloModule& module) {
  std::vector<const HloInstruction*> out;
  for (const HloComputation* computation : module.computations()) {
    for (const HloInstruction* instruction : computation->instructions()) {
      if (instruction->opcode() == HloOpcode::kConstant && instruction->has_literal() &&
          HasElidedValues(instruction->literal())) {
        out.push_back(instruction);
      }
    }
  }
  return out;
}

Status CheckConstantValuesPresent(const HloModule& module, std::string_view how_to_fill) {
  std::vector<const HloInstruction*> elided = ElidedConstants(module);
  if (elided.empty()) return OkStatus();
  std::string others = elided.size() > 1 ? fmt::format(" (and {} more)", elided.size() - 1) : "";
  return Error(fmt::format("constant {} is elided in the text ({{...}}){}: running the module "
                           "needs its values; {}",
                           elided[0]->name(), others, how_to_fill));
}

StatusOr<int64_t> FillElidedConstants(HloModule& module, ElidedConstantFill fill, uint64_t seed) {
  std::mt19937_64 rng(seed);
  int64_t filled = 0;
  for (HloComputation* computation : module.computations()) {
    for (HloInstruction* instruction : computation->instructions()) {
      if (instruction->opcode() != HloOpcode::kConstant || !instruction->has_literal() ||
          !HasElidedValues(instruction->literal())) {
        continue;
      }
      StatusOr<Literal> values = Filled(instruction->literal(), fill, rng);
      if (!values.ok()) {
        return values.status().WithContext(fmt::format("filling constant {}", instruction->name()));
      }
      instruction->set_literal(std::move(values).value());
      ++filled;
    }
  }
  return filled;
}

StatusOr<int64_t> ResolveElidedConstants(HloModule& module, std::string_view fill,
                                         uint64_t seed) {
  if (fill.empty()) {
    RETURN_IF_ERROR(CheckConstantValuesPresent(
        module, "--fill_elided_constants=zeros or --fill_elided_constants=random (with --seed) "
                "fills them in"));
    return int64_t{0};
  }
  std::optional<ElidedConstantFill> how = ParseElidedConstantFill(fill);
  if (!how) {
    return Error(fmt::format("--fill_elided_constants: expected zeros or random, found '{}'", fill));
  }
  return FillElidedConstants(module, *how, seed);
}

}  // namespace xlens
