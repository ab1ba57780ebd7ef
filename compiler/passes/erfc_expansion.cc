#include "compiler/passes/erfc_expansion.h"

#include <bit>
#include <cstdint>

#include "compiler/passes/expression_form.h"

namespace xlens {
namespace {

// StableHLO's CHLO legalization of erfc for f32 (materializeErfcApproximationF32 and the two
// approximations it selects between, for |z| below and above 1), as jax 0.10.2 prints it: every
// constant exactly the f32 the legalization rounded to, highest power first. {z} is the
// argument, {result} the value; "erfc." names its instructions, as JAX's do.
constexpr char kErfcExpansionF32[] = R"(
  erfc.123 = f32[] abs({z})
  erfc.c57 = f32[] constant(1)
  erfc.124 = pred[] compare(erfc.123, erfc.c57), direction=LT
  erfc.108 = f32[] multiply({z}, {z})
  erfc.c36 = f32[] constant(7.85386146e-05)
  erfc.109 = f32[] multiply(erfc.108, erfc.c36)
  erfc.c35 = f32[] constant(-0.000801019371)
  erfc.110 = f32[] add(erfc.109, erfc.c35)
  erfc.111 = f32[] multiply(erfc.110, erfc.108)
  erfc.c34 = f32[] constant(0.00518832775)
  erfc.112 = f32[] add(erfc.111, erfc.c34)
  erfc.113 = f32[] multiply(erfc.112, erfc.108)
  erfc.c33 = f32[] constant(-0.0268538129)
  erfc.114 = f32[] add(erfc.113, erfc.c33)
  erfc.115 = f32[] multiply(erfc.114, erfc.108)
  erfc.c32 = f32[] constant(0.112835854)
  erfc.116 = f32[] add(erfc.115, erfc.c32)
  erfc.117 = f32[] multiply(erfc.116, erfc.108)
  erfc.c31 = f32[] constant(-0.37612626)
  erfc.118 = f32[] add(erfc.117, erfc.c31)
  erfc.119 = f32[] multiply(erfc.118, erfc.108)
  erfc.c30 = f32[] constant(1.12837911)
  erfc.120 = f32[] add(erfc.119, erfc.c30)
  erfc.121 = f32[] multiply({z}, erfc.120)
  erfc.122 = f32[] subtract(erfc.c57, erfc.121)
  erfc.c37 = f32[] constant(0)
  erfc.105 = pred[] compare({z}, erfc.c37), direction=LT
  erfc.c56 = f32[] constant(2)
  erfc.63 = f32[] multiply({z}, {z})
  erfc.64 = f32[] negate(erfc.63)
  erfc.c38 = f32[] constant(-88.7228394)
  erfc.103 = pred[] compare(erfc.64, erfc.c38), direction=LT
  erfc.67 = f32[] exponential(erfc.64)
  erfc.65 = f32[] abs({z})
  erfc.68 = f32[] divide(erfc.c57, erfc.65)
  erfc.69 = f32[] multiply(erfc.67, erfc.68)
  erfc.70 = pred[] compare(erfc.65, erfc.c56), direction=LT
  erfc.66 = f32[] divide(erfc.c57, erfc.63)
  erfc.c55 = f32[] constant(0.0232682)
  erfc.71 = f32[] multiply(erfc.66, erfc.c55)
  erfc.c54 = f32[] constant(-0.138703942)
  erfc.72 = f32[] add(erfc.71, erfc.c54)
  erfc.73 = f32[] multiply(erfc.72, erfc.66)
  erfc.c53 = f32[] constant(0.368742466)
  erfc.74 = f32[] add(erfc.73, erfc.c53)
  erfc.75 = f32[] multiply(erfc.74, erfc.66)
  erfc.c52 = f32[] constant(-0.582473278)
  erfc.76 = f32[] add(erfc.75, erfc.c52)
  erfc.77 = f32[] multiply(erfc.76, erfc.66)
  erfc.c51 = f32[] constant(0.621000469)
  erfc.78 = f32[] add(erfc.77, erfc.c51)
  erfc.79 = f32[] multiply(erfc.78, erfc.66)
  erfc.c50 = f32[] constant(-0.494451523)
  erfc.80 = f32[] add(erfc.79, erfc.c50)
  erfc.81 = f32[] multiply(erfc.80, erfc.66)
  erfc.c49 = f32[] constant(0.340488)
  erfc.82 = f32[] add(erfc.81, erfc.c49)
  erfc.83 = f32[] multiply(erfc.82, erfc.66)
  erfc.c48 = f32[] constant(-0.274112701)
  erfc.84 = f32[] add(erfc.83, erfc.c48)
  erfc.85 = f32[] multiply(erfc.84, erfc.66)
  erfc.c47 = f32[] constant(0.563825965)
  erfc.86 = f32[] add(erfc.85, erfc.c47)
  erfc.c46 = f32[] constant(-10.477664)
  erfc.87 = f32[] multiply(erfc.66, erfc.c46)
  erfc.c45 = f32[] constant(12.9772)
  erfc.88 = f32[] add(erfc.87, erfc.c45)
  erfc.89 = f32[] multiply(erfc.88, erfc.66)
  erfc.c44 = f32[] constant(-7.49551868)
  erfc.90 = f32[] add(erfc.89, erfc.c44)
  erfc.91 = f32[] multiply(erfc.90, erfc.66)
  erfc.c43 = f32[] constant(2.92101908)
  erfc.92 = f32[] add(erfc.91, erfc.c43)
  erfc.93 = f32[] multiply(erfc.92, erfc.66)
  erfc.c42 = f32[] constant(-1.01526523)
  erfc.94 = f32[] add(erfc.93, erfc.c42)
  erfc.95 = f32[] multiply(erfc.94, erfc.66)
  erfc.c41 = f32[] constant(0.42184633)
  erfc.96 = f32[] add(erfc.95, erfc.c41)
  erfc.97 = f32[] multiply(erfc.96, erfc.66)
  erfc.c40 = f32[] constant(-0.282076746)
  erfc.98 = f32[] add(erfc.97, erfc.c40)
  erfc.99 = f32[] multiply(erfc.98, erfc.66)
  erfc.c39 = f32[] constant(0.564189494)
  erfc.100 = f32[] add(erfc.99, erfc.c39)
  erfc.101 = f32[] select(erfc.70, erfc.86, erfc.100)
  erfc.102 = f32[] multiply(erfc.69, erfc.101)
  erfc.104 = f32[] select(erfc.103, erfc.c37, erfc.102)
  erfc.106 = f32[] subtract(erfc.c56, erfc.104)
  erfc.107 = f32[] select(erfc.105, erfc.106, erfc.104)
  {result} = f32[] select(erfc.124, erfc.122, erfc.107)
)";

std::string Replace(std::string text, std::string_view from, std::string_view to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// The expansion alone, its argument the parameter: what MatchErfcExpansionF32 looks for.
const ExpressionForm* ErfcForm() {
  static const ExpressionForm* form = [] {
    const std::string text = "HloModule erfc_f32\nENTRY e {\n  z = f32[] parameter(0)" +
                             ErfcExpansionF32Instructions("z", "ROOT erfc") + "}\n";
    std::optional<ExpressionForm> parsed = ParseExpressionForm("erfc_f32", text);
    return parsed ? new ExpressionForm(std::move(*parsed)) : nullptr;  // a test parses it
  }();
  return form;
}

bool IsF32Constant(const HloInstruction* h, float value) {
  float got = 0;
  return h != nullptr && expression_form::ScalarF32Constant(h, &got) &&
         std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(value);
}

}  // namespace

std::string ErfcExpansionF32Instructions(std::string_view z, std::string_view result) {
  return Replace(Replace(kErfcExpansionF32, "{z}", z), "{result}", result);
}

const HloInstruction* MatchErfcExpansionF32(const HloInstruction& root) {
  // select(|z| < 1, 1 - z T(z^2), ...): z read off the first comparison, the rest checked by
  // the form.
  const ExpressionForm* form = ErfcForm();
  if (form == nullptr || root.opcode() != HloOpcode::kSelect || root.operand_count() != 3 ||
      root.operand(0)->opcode() != HloOpcode::kCompare || root.operand(0)->operand(0)->opcode() != HloOpcode::kAbs) {
    return nullptr;
  }
  const HloInstruction* z = root.operand(0)->operand(0)->operand(0);
  if (!z->shape().IsArray() || z->shape().element_type() != PrimitiveType::F32 ||
      z->shape().dimensions() != root.shape().dimensions()) {
    return nullptr;
  }
  ExpressionFormMatcher matcher(z);
  return matcher.Match(form->root, &root) ? z : nullptr;
}

const HloInstruction* MatchOnePlusOrMinusErfF32(const HloInstruction& h, bool* negated) {
  if (h.operand_count() != 2 || !h.shape().IsArray() || h.shape().element_type() != PrimitiveType::F32) {
    return nullptr;
  }
  const auto erf = [&](const HloInstruction* e) -> const HloInstruction* {
    return e->opcode() == HloOpcode::kErf && e->operand_count() == 1 && e->shape().IsArray() &&
                   e->shape().element_type() == PrimitiveType::F32 &&
                   e->operand(0)->shape().dimensions() == h.shape().dimensions()
               ? e->operand(0)
               : nullptr;
  };
  if (h.opcode() == HloOpcode::kAdd) {
    *negated = true;
    if (IsF32Constant(h.operand(0), 1.0f)) return erf(h.operand(1));
    if (IsF32Constant(h.operand(1), 1.0f)) return erf(h.operand(0));
  } else if (h.opcode() == HloOpcode::kSubtract && IsF32Constant(h.operand(0), 1.0f)) {
    *negated = false;
    return erf(h.operand(1));
  }
  return nullptr;
}

}  // namespace xlens
