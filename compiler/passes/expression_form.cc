#include "compiler/passes/expression_form.h"

#include <algorithm>
#include <bit>

#include "compiler/hlo/parser.h"

namespace xlens {
namespace {

bool IsCommutative(const HloInstruction& i) {
  switch (i.opcode()) {
    case HloOpcode::kMaximum: case HloOpcode::kMinimum:
      return true;
    case HloOpcode::kCompare:
      return i.comparison_direction == ComparisonDirection::kEq ||
             i.comparison_direction == ComparisonDirection::kNe;
    default:
      return false;
  }
}

// Sums and products are compared as flat lists of terms or factors: (0.5 x) (1 + t) and
// x ((t + 1) 0.5) are the same GELU, and (k x) x x the same cube as x x x k.
bool IsAssociative(HloOpcode op) { return op == HloOpcode::kAdd || op == HloOpcode::kMultiply; }

}  // namespace

std::optional<ExpressionForm> ParseExpressionForm(std::string name, std::string_view text) {
  ParseOptions options;
  options.filename = name;
  StatusOr<std::unique_ptr<HloModule>> module = ParseHloModule(std::string(text), options);
  if (!module.ok()) return std::nullopt;
  const HloInstruction* root = (*module)->entry_computation()->root_instruction();
  return ExpressionForm{std::move(name), std::move(*module), root};
}

namespace expression_form {

bool IsRowMajor(const Shape& s) {
  return s.IsArray() && s.is_static() &&
         (!s.has_layout() || s.layout().minor_to_major == shape_util::DefaultMinorToMajor(s.rank()));
}

bool ScalarF32Constant(const HloInstruction* i, float* value) {
  if (i->opcode() == HloOpcode::kBroadcast && i->operand_count() == 1) i = i->operand(0);
  if (i->opcode() != HloOpcode::kConstant || !i->has_literal() || !i->shape().IsArray() ||
      i->shape().rank() != 0 || i->shape().element_type() != PrimitiveType::F32 ||
      i->literal().is_elided() || i->literal().is_text_only()) {
    return false;
  }
  *value = static_cast<float>(i->literal().GetAsDouble(0));
  return true;
}

}  // namespace expression_form

bool ExpressionFormMatcher::Match(const HloInstruction* t, const HloInstruction* c) {
  auto key = std::make_pair(t, c);
  if (auto it = memo_.find(key); it != memo_.end()) return it->second.ok;
  memo_[key] = Result{};  // a DAG has no cycles; this only keeps a failed budget failed
  if (++steps_ > kMaxSteps) return false;
  Result result = Compare(t, c);
  const bool ok = result.ok;
  memo_[key] = std::move(result);
  return ok;
}

void ExpressionFormMatcher::Collect(const HloInstruction* t, HloInstruction* c,
                                    std::unordered_set<HloInstruction*>* region,
                                    std::vector<HloInstruction*>* constants) {
  if (t->opcode() == HloOpcode::kParameter) return;
  if (t->opcode() == HloOpcode::kConstant) {
    constants->push_back(c);
    if (c->opcode() == HloOpcode::kBroadcast) constants->push_back(c->operand(0));
    return;
  }
  if (!region->insert(c).second) return;
  const Result& result = memo_.at({t, c});
  for (HloInstruction* i : result.inner) region->insert(i);
  for (const auto& [tc, cc] : result.children) Collect(tc, cc, region, constants);
}

bool ExpressionFormMatcher::Fits(const HloInstruction* c, const HloInstruction* t) const {
  const Shape& s = c->shape();
  return expression_form::IsRowMajor(s) && s.dimensions() == v_->shape().dimensions() &&
         s.element_type() == t->shape().element_type();
}

template <typename I>
void ExpressionFormMatcher::Flatten(I* i, HloOpcode op, bool candidate, std::vector<I*>* terms,
                                    std::vector<I*>* inner) {
  for (int64_t k = 0; k < i->operand_count(); ++k) {
    I* o = i->operands()[k];
    const bool nested = o->opcode() == op && (!candidate || (o != v_ && Fits(o, i)));
    if (nested && terms->size() + inner->size() < 4 * kMaxTerms) {
      inner->push_back(o);
      Flatten(o, op, candidate, terms, inner);
    } else {
      terms->push_back(o);
    }
  }
}

bool ExpressionFormMatcher::Assign(const std::vector<const HloInstruction*>& ts,
                                   const std::vector<HloInstruction*>& cs, size_t next,
                                   std::vector<bool>& used, Result& result) {
  if (next == ts.size()) return true;
  for (size_t j = 0; j < cs.size(); ++j) {
    if (used[j] || !Match(ts[next], cs[j])) continue;
    used[j] = true;
    result.children.push_back({ts[next], cs[j]});
    if (Assign(ts, cs, next + 1, used, result)) return true;
    result.children.pop_back();
    used[j] = false;
  }
  return false;
}

ExpressionFormMatcher::Result ExpressionFormMatcher::Compare(const HloInstruction* t, const HloInstruction* c) {
  Result result;
  if (t->opcode() == HloOpcode::kParameter) {
    result.ok = c == v_;
    return result;
  }
  if (c == v_) return result;
  if (t->opcode() == HloOpcode::kConstant) {
    float value;
    // Bit for bit, not ==: max(x, -0) is not a ReLU (it keeps -0 for every negative x, where
    // ReLU's fused forms give +0), and NaN never equals itself.
    result.ok = expression_form::ScalarF32Constant(c, &value) &&
                std::bit_cast<uint32_t>(value) ==
                    std::bit_cast<uint32_t>(static_cast<float>(t->literal().GetAsDouble(0)));
    return result;
  }
  if (c->opcode() != t->opcode() || c->operand_count() != t->operand_count() || !Fits(c, t)) {
    return result;
  }
  if (t->opcode() == HloOpcode::kCompare && c->comparison_direction != t->comparison_direction) {
    return result;
  }
  HloInstruction* mc = const_cast<HloInstruction*>(c);
  if (IsAssociative(t->opcode())) {
    std::vector<const HloInstruction*> ts, t_inner;
    std::vector<HloInstruction*> cs;
    Flatten(t, t->opcode(), false, &ts, &t_inner);
    Flatten(mc, t->opcode(), true, &cs, &result.inner);
    std::vector<bool> used(cs.size(), false);
    result.ok = ts.size() == cs.size() && ts.size() <= kMaxTerms && Assign(ts, cs, 0, used, result);
    return result;
  }
  for (int64_t k = 0; k < t->operand_count(); ++k) result.children.push_back({t->operand(k), mc->operands()[k]});
  result.ok = std::all_of(result.children.begin(), result.children.end(),
                          [&](const auto& p) { return Match(p.first, p.second); });
  if (!result.ok && t->operand_count() == 2 && IsCommutative(*t)) {
    result.children = {{t->operand(0), mc->operands()[1]}, {t->operand(1), mc->operands()[0]}};
    result.ok = Match(t->operand(0), c->operand(1)) && Match(t->operand(1), c->operand(0));
  }
  return result;
}

}  // namespace xlens
