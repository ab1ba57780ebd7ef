// An elementwise expression written as HLO on scalars (a form: the entry's parameter 0 stands for
// a value v), and the matcher that finds it in a computation by structure: every instruction
// elementwise over v's shape, up to the operand order of commutative operations and the grouping
// of sums and products, f32 constants bit for bit. The oneDNN activation templates
// (onednn_activation_matcher.h) and JAX's erfc expansion (erfc_expansion.h) are read by it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "compiler/hlo/module.h"

namespace xlens {

// A form parsed once: its module and the root of its entry.
struct ExpressionForm {
  std::string name;
  std::unique_ptr<HloModule> module;
  const HloInstruction* root = nullptr;
};

// `text` parsed (its file name in messages is `name`); nullopt when it does not parse.
std::optional<ExpressionForm> ParseExpressionForm(std::string name, std::string_view text);

namespace expression_form {

// A static array shape with the default (row-major) layout, or none.
bool IsRowMajor(const Shape& s);

// A rank-0 f32 constant, or a broadcast of one; its value.
bool ScalarF32Constant(const HloInstruction* i, float* value);

}  // namespace expression_form

// Whether the expression at a candidate instruction is the expression at a form's instruction,
// up to commutation and the grouping of sums and products, with the form's parameter standing
// for `v`. Memoised on pairs, and sums and products are limited to kMaxTerms terms, so the work
// is bounded whatever the candidate is.
class ExpressionFormMatcher {
 public:
  explicit ExpressionFormMatcher(const HloInstruction* v) : v_(v) {}

  bool Match(const HloInstruction* t, const HloInstruction* c);

  // The candidate instructions of a successful Match(t, c), with the constants they read.
  void Collect(const HloInstruction* t, HloInstruction* c, std::unordered_set<HloInstruction*>* region,
               std::vector<HloInstruction*>* constants);

 private:
  static constexpr int64_t kMaxSteps = 1 << 16;
  static constexpr size_t kMaxTerms = 6;

  struct Result {
    bool ok = false;
    std::vector<std::pair<const HloInstruction*, HloInstruction*>> children;
    std::vector<HloInstruction*> inner;  // the candidate's nested sums or products
  };

  // Elementwise over the value's shape, of the element type the form has there.
  bool Fits(const HloInstruction* c, const HloInstruction* t) const;
  // The terms of a sum (factors of a product) rooted at `i`, through nested ones; `inner`
  // receives the nested instructions. Candidate nesting stops at `v`.
  template <typename I>
  void Flatten(I* i, HloOpcode op, bool candidate, std::vector<I*>* terms, std::vector<I*>* inner);
  // Pairs every form term with a distinct candidate term.
  bool Assign(const std::vector<const HloInstruction*>& ts, const std::vector<HloInstruction*>& cs,
              size_t next, std::vector<bool>& used, Result& result);
  Result Compare(const HloInstruction* t, const HloInstruction* c);

  const HloInstruction* v_;
  std::map<std::pair<const HloInstruction*, const HloInstruction*>, Result> memo_;
  int64_t steps_ = 0;
};

}  // namespace xlens
