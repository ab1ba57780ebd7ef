#include "compiler/passes/onednn_activation_matcher.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cmath>
#include <map>
#include <memory>
#include <unordered_set>

#include "compiler/hlo/parser.h"

namespace xlens {
namespace {

// The forms, as HLO on scalars: parameter 0 is the value the activation reads. Constants are
// compared bit for bit in f32; commutative operations match in either operand order, and sums
// and products however they are grouped.
struct FormText {
  const char* name;
  OneDnnPostOp::Kind kind;
  const char* text;
};

const FormText kForms[] = {
    // jax.nn.gelu(x, approximate=False): 0.5 x erfc(-x / sqrt 2), erfc expanded into rational
    // approximations, as JAX lowers it for f32 (largest first: it contains smaller forms).
    {"gelu_erf(jax)", OneDnnPostOp::Kind::kGeluErf, R"(HloModule gelu_erf_jax
ENTRY main.1 {
  x.1 = f32[] parameter(0)
  constant.59 = f32[] constant(0.5)
  mul_jit__lambda__.1 = f32[] multiply(x.1, constant.59)
  neg.1 = f32[] negate(x.1)
  constant.58 = f32[] constant(0.707106769)
  mul.2 = f32[] multiply(neg.1, constant.58)
  erfc.123 = f32[] abs(mul.2)
  constant.57 = f32[] constant(1)
  erfc.124 = pred[] compare(erfc.123, constant.57), direction=LT
  erfc.108 = f32[] multiply(mul.2, mul.2)
  constant.36 = f32[] constant(7.85386146e-05)
  erfc.109 = f32[] multiply(erfc.108, constant.36)
  constant.35 = f32[] constant(-0.000801019371)
  erfc.110 = f32[] add(erfc.109, constant.35)
  erfc.111 = f32[] multiply(erfc.110, erfc.108)
  constant.34 = f32[] constant(0.00518832775)
  erfc.112 = f32[] add(erfc.111, constant.34)
  erfc.113 = f32[] multiply(erfc.112, erfc.108)
  constant.33 = f32[] constant(-0.0268538129)
  erfc.114 = f32[] add(erfc.113, constant.33)
  erfc.115 = f32[] multiply(erfc.114, erfc.108)
  constant.32 = f32[] constant(0.112835854)
  erfc.116 = f32[] add(erfc.115, constant.32)
  erfc.117 = f32[] multiply(erfc.116, erfc.108)
  constant.31 = f32[] constant(-0.37612626)
  erfc.118 = f32[] add(erfc.117, constant.31)
  erfc.119 = f32[] multiply(erfc.118, erfc.108)
  constant.30 = f32[] constant(1.12837911)
  erfc.120 = f32[] add(erfc.119, constant.30)
  erfc.121 = f32[] multiply(mul.2, erfc.120)
  erfc.122 = f32[] subtract(constant.57, erfc.121)
  constant.37 = f32[] constant(0)
  erfc.105 = pred[] compare(mul.2, constant.37), direction=LT
  constant.56 = f32[] constant(2)
  erfc.63 = f32[] multiply(mul.2, mul.2)
  erfc.64 = f32[] negate(erfc.63)
  constant.38 = f32[] constant(-88.7228394)
  erfc.103 = pred[] compare(erfc.64, constant.38), direction=LT
  erfc.67 = f32[] exponential(erfc.64)
  erfc.65 = f32[] abs(mul.2)
  erfc.68 = f32[] divide(constant.57, erfc.65)
  erfc.69 = f32[] multiply(erfc.67, erfc.68)
  erfc.70 = pred[] compare(erfc.65, constant.56), direction=LT
  erfc.66 = f32[] divide(constant.57, erfc.63)
  constant.55 = f32[] constant(0.0232682)
  erfc.71 = f32[] multiply(erfc.66, constant.55)
  constant.54 = f32[] constant(-0.138703942)
  erfc.72 = f32[] add(erfc.71, constant.54)
  erfc.73 = f32[] multiply(erfc.72, erfc.66)
  constant.53 = f32[] constant(0.368742466)
  erfc.74 = f32[] add(erfc.73, constant.53)
  erfc.75 = f32[] multiply(erfc.74, erfc.66)
  constant.52 = f32[] constant(-0.582473278)
  erfc.76 = f32[] add(erfc.75, constant.52)
  erfc.77 = f32[] multiply(erfc.76, erfc.66)
  constant.51 = f32[] constant(0.621000469)
  erfc.78 = f32[] add(erfc.77, constant.51)
  erfc.79 = f32[] multiply(erfc.78, erfc.66)
  constant.50 = f32[] constant(-0.494451523)
  erfc.80 = f32[] add(erfc.79, constant.50)
  erfc.81 = f32[] multiply(erfc.80, erfc.66)
  constant.49 = f32[] constant(0.340488)
  erfc.82 = f32[] add(erfc.81, constant.49)
  erfc.83 = f32[] multiply(erfc.82, erfc.66)
  constant.48 = f32[] constant(-0.274112701)
  erfc.84 = f32[] add(erfc.83, constant.48)
  erfc.85 = f32[] multiply(erfc.84, erfc.66)
  constant.47 = f32[] constant(0.563825965)
  erfc.86 = f32[] add(erfc.85, constant.47)
  constant.46 = f32[] constant(-10.477664)
  erfc.87 = f32[] multiply(erfc.66, constant.46)
  constant.45 = f32[] constant(12.9772)
  erfc.88 = f32[] add(erfc.87, constant.45)
  erfc.89 = f32[] multiply(erfc.88, erfc.66)
  constant.44 = f32[] constant(-7.49551868)
  erfc.90 = f32[] add(erfc.89, constant.44)
  erfc.91 = f32[] multiply(erfc.90, erfc.66)
  constant.43 = f32[] constant(2.92101908)
  erfc.92 = f32[] add(erfc.91, constant.43)
  erfc.93 = f32[] multiply(erfc.92, erfc.66)
  constant.42 = f32[] constant(-1.01526523)
  erfc.94 = f32[] add(erfc.93, constant.42)
  erfc.95 = f32[] multiply(erfc.94, erfc.66)
  constant.41 = f32[] constant(0.42184633)
  erfc.96 = f32[] add(erfc.95, constant.41)
  erfc.97 = f32[] multiply(erfc.96, erfc.66)
  constant.40 = f32[] constant(-0.282076746)
  erfc.98 = f32[] add(erfc.97, constant.40)
  erfc.99 = f32[] multiply(erfc.98, erfc.66)
  constant.39 = f32[] constant(0.564189494)
  erfc.100 = f32[] add(erfc.99, constant.39)
  erfc.101 = f32[] select(erfc.70, erfc.86, erfc.100)
  erfc.102 = f32[] multiply(erfc.69, erfc.101)
  erfc.104 = f32[] select(erfc.103, constant.37, erfc.102)
  erfc.106 = f32[] subtract(constant.56, erfc.104)
  erfc.107 = f32[] select(erfc.105, erfc.106, erfc.104)
  erfc.125 = f32[] select(erfc.124, erfc.122, erfc.107)
  ROOT mul.3 = f32[] multiply(mul_jit__lambda__.1, erfc.125)
})"},
    // jax.nn.gelu(x, approximate=True).
    {"gelu_tanh(jax)", OneDnnPostOp::Kind::kGeluTanh, R"(HloModule gelu_tanh_jax
ENTRY e {
  x = f32[] parameter(0)
  x2 = f32[] multiply(x, x)
  x3 = f32[] multiply(x2, x)
  k = f32[] constant(0.044715)
  kx3 = f32[] multiply(x3, k)
  inner = f32[] add(x, kx3)
  s = f32[] constant(0.797884583)
  scaled = f32[] multiply(inner, s)
  t = f32[] tanh(scaled)
  one = f32[] constant(1)
  t1 = f32[] add(t, one)
  half = f32[] constant(0.5)
  cdf = f32[] multiply(t1, half)
  ROOT r = f32[] multiply(x, cdf)
})"},
    // tf.nn.gelu(x, approximate=True): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 pow(x, 3)))).
    {"gelu_tanh(tf)", OneDnnPostOp::Kind::kGeluTanh, R"(HloModule gelu_tanh_tf
ENTRY e {
  x = f32[] parameter(0)
  half = f32[] constant(0.5)
  hx = f32[] multiply(half, x)
  three = f32[] constant(3)
  x3 = f32[] power(x, three)
  k = f32[] constant(0.044715)
  kx3 = f32[] multiply(k, x3)
  inner = f32[] add(x, kx3)
  s = f32[] constant(0.797884583)
  scaled = f32[] multiply(s, inner)
  t = f32[] tanh(scaled)
  one = f32[] constant(1)
  t1 = f32[] add(one, t)
  ROOT r = f32[] multiply(hx, t1)
})"},
    // 0.5 x (1 + erf(x / sqrt 2)) with an erf instruction: multiplied by 1/sqrt 2 (JAX, written
    // out by hand) or divided by sqrt 2 (tf.nn.gelu(x, approximate=False)).
    {"gelu_erf(erf, multiply)", OneDnnPostOp::Kind::kGeluErf, R"(HloModule gelu_erf_multiply
ENTRY e {
  x = f32[] parameter(0)
  half = f32[] constant(0.5)
  hx = f32[] multiply(x, half)
  c = f32[] constant(0.707106769)
  scaled = f32[] multiply(x, c)
  erf = f32[] erf(scaled)
  one = f32[] constant(1)
  e1 = f32[] add(erf, one)
  ROOT r = f32[] multiply(hx, e1)
})"},
    {"gelu_erf(erf, divide)", OneDnnPostOp::Kind::kGeluErf, R"(HloModule gelu_erf_divide
ENTRY e {
  x = f32[] parameter(0)
  half = f32[] constant(0.5)
  hx = f32[] multiply(half, x)
  c = f32[] constant(1.41421354)
  scaled = f32[] divide(x, c)
  erf = f32[] erf(scaled)
  one = f32[] constant(1)
  e1 = f32[] add(one, erf)
  ROOT r = f32[] multiply(hx, e1)
})"},
    // jax.nn.sigmoid as older JAX versions and hand-written code spell it.
    {"logistic(1/(1+exp(-x)))", OneDnnPostOp::Kind::kLogistic, R"(HloModule logistic_expanded
ENTRY e {
  x = f32[] parameter(0)
  n = f32[] negate(x)
  ex = f32[] exponential(n)
  one = f32[] constant(1)
  d = f32[] add(ex, one)
  ROOT r = f32[] divide(one, d)
})"},
    {"logistic", OneDnnPostOp::Kind::kLogistic, R"(HloModule logistic
ENTRY e {
  x = f32[] parameter(0)
  ROOT r = f32[] logistic(x)
})"},
    // jax.nn.relu6: min(max(x, 0), 6).
    {"relu6", OneDnnPostOp::Kind::kRelu6, R"(HloModule relu6
ENTRY e {
  x = f32[] parameter(0)
  zero = f32[] constant(0)
  r = f32[] maximum(x, zero)
  six = f32[] constant(6)
  ROOT r6 = f32[] minimum(r, six)
})"},
    // tf.nn.relu6 (and Keras's ReLU(6.0)), as TensorFlow's XLA bridge lowers it: clamp(0, x, 6),
    // which XLA defines as min(max(x, 0), 6).
    {"relu6(clamp)", OneDnnPostOp::Kind::kRelu6, R"(HloModule relu6_clamp
ENTRY e {
  x = f32[] parameter(0)
  zero = f32[] constant(0)
  six = f32[] constant(6)
  ROOT r6 = f32[] clamp(zero, x, six)
})"},
    // jax.nn.relu, tf.nn.relu: max(x, 0).
    {"relu", OneDnnPostOp::Kind::kRelu, R"(HloModule relu
ENTRY e {
  x = f32[] parameter(0)
  zero = f32[] constant(0)
  ROOT r = f32[] maximum(x, zero)
})"},
};

struct Form {
  std::string name;
  OneDnnPostOp::Kind kind;
  std::unique_ptr<HloModule> module;
  const HloInstruction* root;
};

const std::vector<Form>& Forms() {
  static const std::vector<Form>* forms = [] {
    auto* forms = new std::vector<Form>();
    for (const FormText& f : kForms) {
      ParseOptions options;
      options.filename = f.name;
      StatusOr<std::unique_ptr<HloModule>> module = ParseHloModule(f.text, options);
      if (!module.ok()) continue;  // a test checks that every form parses
      const HloInstruction* root = (*module)->entry_computation()->root_instruction();
      forms->push_back({f.name, f.kind, std::move(*module), root});
    }
    return forms;
  }();
  return *forms;
}

bool IsRowMajor(const Shape& s) {
  return s.IsArray() && s.is_static() &&
         (!s.has_layout() || s.layout().minor_to_major == shape_util::DefaultMinorToMajor(s.rank()));
}

// A rank-0 f32 constant, or a broadcast of one; its value.
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

// Whether the expression at a candidate instruction is the expression at a form's instruction,
// up to commutation and the grouping of sums and products, with the form's parameter standing
// for `v`. Memoised on pairs, and sums and products are limited to kMaxTerms terms, so the work
// is bounded whatever the candidate is.
class FormMatcher {
 public:
  explicit FormMatcher(const HloInstruction* v) : v_(v) {}

  bool Match(const HloInstruction* t, const HloInstruction* c) {
    auto key = std::make_pair(t, c);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second.ok;
    memo_[key] = Result{};  // a DAG has no cycles; this only keeps a failed budget failed
    if (++steps_ > kMaxSteps) return false;
    Result result = Compare(t, c);
    const bool ok = result.ok;
    memo_[key] = std::move(result);
    return ok;
  }

  // The candidate instructions of a successful Match(t, c), with the constants they read.
  void Collect(const HloInstruction* t, HloInstruction* c, std::unordered_set<HloInstruction*>* region,
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

 private:
  static constexpr int64_t kMaxSteps = 1 << 16;
  static constexpr size_t kMaxTerms = 6;

  struct Result {
    bool ok = false;
    std::vector<std::pair<const HloInstruction*, HloInstruction*>> children;
    std::vector<HloInstruction*> inner;  // the candidate's nested sums or products
  };

  // Elementwise over the value's shape, of the element type the form has there.
  bool Fits(const HloInstruction* c, const HloInstruction* t) const {
    const Shape& s = c->shape();
    return IsRowMajor(s) && s.dimensions() == v_->shape().dimensions() &&
           s.element_type() == t->shape().element_type();
  }

  // The terms of a sum (factors of a product) rooted at `i`, through nested ones; `inner`
  // receives the nested instructions. Candidate nesting stops at `v`.
  template <typename I>
  void Flatten(I* i, HloOpcode op, bool candidate, std::vector<I*>* terms, std::vector<I*>* inner) {
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

  // Pairs every form term with a distinct candidate term.
  bool Assign(const std::vector<const HloInstruction*>& ts, const std::vector<HloInstruction*>& cs,
              size_t next, std::vector<bool>& used, Result& result) {
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

  Result Compare(const HloInstruction* t, const HloInstruction* c) {
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
      result.ok = ScalarF32Constant(c, &value) &&
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

  const HloInstruction* v_;
  std::map<std::pair<const HloInstruction*, const HloInstruction*>, Result> memo_;
  int64_t steps_ = 0;
};

// Whether the region (instructions computing the activation) is read outside only through its
// root, and holds every reader of `v`.
bool Closed(const HloInstruction* v, const std::unordered_set<HloInstruction*>& region,
            const HloInstruction* root) {
  auto inside = [&](const HloInstruction* i) {
    return !i->IsRoot() && std::all_of(i->users().begin(), i->users().end(), [&](HloInstruction* u) {
             return region.count(u) > 0;
           });
  };
  if (!inside(v)) return false;
  return std::all_of(region.begin(), region.end(),
                     [&](const HloInstruction* m) { return m == root || inside(m); });
}

bool IsPowerOfTwo(float c) {
  int exponent = 0;
  return std::isnormal(c) && std::frexp(std::fabs(c), &exponent) == 0.5;
}

// Whether x / c is x * (1 / c) for every f32 x: c a power of two whose reciprocal is a float.
bool ExactReciprocal(float c) { return IsPowerOfTwo(c) && std::isnormal(1.0f / c); }

// Whether adding c after a scaling by a power of two rounds once either way, fused (fma) or not:
// the scaled value is exact but where it leaves the normal range, and there adding c gives the
// same f32 as adding it to the flushed zero (|c| at least 2^-100, far above any subnormal) or to
// the infinity (|c| at most 2^103, half the last step below 2^128, so the sum still rounds up).
bool ShiftAfterExactScaling(float c) {
  return c == 0 || (std::fabs(c) >= std::ldexp(1.0f, -100) && std::fabs(c) <= std::ldexp(1.0f, 103));
}

// Scaling and shifting by scalar constants, and negation, one after another, taken as one
// eltwise_linear alpha x + beta only where oneDNN's f32 alpha x + beta (fused or not) is the
// chain's own f32 result for every input: one scaling or shift, or a scaling by a power of two
// and then a shift (ShiftAfterExactScaling), with negations anywhere. (x + 1e8) - 1e8 is not x,
// nor is x * 1e37 * 1e-37 (it overflows where x does not): such a chain ends at its first step's
// result, and the rest is a kernel after the call (oneDNN 2.6 would apply one call's first linear
// parameters to a second linear post-op; see FindChain).
std::optional<ActivationMatch> MatchLinear(HloInstruction* v) {
  ActivationMatch match;
  double alpha = 1, beta = 0;
  int steps = 0;                 // scalings and shifts taken
  bool exact_scaling = false;  // the first was by a power of two
  HloInstruction* value = v;
  while (!value->IsRoot() && value->users().size() == 1 && UseCount(*value) == 1) {
    HloInstruction* u = value->users()[0];
    if (!IsRowMajor(u->shape()) || u->shape().element_type() != PrimitiveType::F32 ||
        u->shape().dimensions() != v->shape().dimensions()) {
      break;
    }
    float c = 0;
    HloInstruction* constant = nullptr;
    if (u->opcode() == HloOpcode::kNegate) {
      alpha = -alpha;
      beta = -beta;
    } else if (u->operand_count() == 2 && u->operand(0) != u->operand(1)) {
      const int64_t at = u->operand(0) == value ? 0 : 1;
      constant = u->operand(1 - at);
      if (steps == 2 || !ScalarF32Constant(constant, &c)) break;
      const bool shift = u->opcode() == HloOpcode::kAdd || u->opcode() == HloOpcode::kSubtract;
      // A zero beta adds nothing (LinearPostOpBeta: x + (-0)), where x + 0 and 0 - x turn -0
      // into +0: a shift by zero is left to a kernel after the call.
      if (shift && c == 0) break;
      if (steps == 1 && !(exact_scaling && shift && ShiftAfterExactScaling(c))) break;
      exact_scaling = steps == 0 && ((u->opcode() == HloOpcode::kMultiply && IsPowerOfTwo(c)) ||
                                     (u->opcode() == HloOpcode::kDivide && at == 0 && ExactReciprocal(c)));
      ++steps;
      switch (u->opcode()) {
        case HloOpcode::kMultiply: alpha *= c; beta *= c; break;
        case HloOpcode::kAdd: beta += c; break;
        case HloOpcode::kSubtract:
          if (at == 0) {
            beta -= c;
          } else {
            alpha = -alpha;
            beta = c - beta;
          }
          break;
        case HloOpcode::kDivide:
          if (at != 0 || !ExactReciprocal(c)) {
            constant = nullptr;
            break;
          }
          alpha /= c;
          beta /= c;
          break;
        default:
          constant = nullptr;
          break;
      }
      if (constant == nullptr) break;
    } else {
      break;
    }
    match.members.push_back(u);
    if (constant != nullptr) {
      match.members.push_back(constant);
      if (constant->opcode() == HloOpcode::kBroadcast) match.members.push_back(constant->operand(0));
    }
    match.root = u;
    match.op.kind = OneDnnPostOp::Kind::kLinear;
    match.op.alpha = alpha;
    match.op.beta = beta == 0 ? 0.0 : beta;  // no "-0" in listings
    value = u;
  }
  if (match.root == nullptr) return std::nullopt;
  match.form = "linear";
  return match;
}

}  // namespace

std::vector<std::string> OneDnnActivationForms() {
  std::vector<std::string> names;
  for (const Form& f : Forms()) names.push_back(f.name);
  names.push_back("linear");
  return names;
}

std::optional<ActivationMatch> MatchOneDnnActivation(HloInstruction* v) {
  if (v->IsRoot() || v->users().empty()) return std::nullopt;
  // The elementwise instructions of v's shape reachable from v: where a root can be.
  constexpr size_t kMaxRegion = 256;  // JAX's erf GELU is about 100 instructions
  std::vector<HloInstruction*> reachable;
  std::unordered_set<const HloInstruction*> seen{v};
  std::vector<HloInstruction*> stack{v};
  while (!stack.empty() && reachable.size() < kMaxRegion) {
    HloInstruction* i = stack.back();
    stack.pop_back();
    for (HloInstruction* u : i->users()) {
      if (!u->IsElementwise() || !u->shape().IsArray() ||
          u->shape().dimensions() != v->shape().dimensions() || !seen.insert(u).second) {
        continue;
      }
      reachable.push_back(u);
      stack.push_back(u);
    }
  }
  // Largest first: the form with the most instructions wins (an erf GELU holds an abs, a
  // comparison against 0, ...); for one form, the root latest in the computation.
  std::optional<ActivationMatch> best;
  size_t best_size = 0;
  for (const Form& form : Forms()) {
    for (HloInstruction* candidate : reachable) {
      if (candidate->opcode() != form.root->opcode()) continue;
      FormMatcher matcher(v);
      if (!matcher.Match(form.root, candidate)) continue;
      std::unordered_set<HloInstruction*> region;
      std::vector<HloInstruction*> constants;
      matcher.Collect(form.root, candidate, &region, &constants);
      if (!Closed(v, region, candidate) || region.size() <= best_size) continue;
      ActivationMatch match;
      match.op.kind = form.kind;
      match.form = form.name;
      match.root = candidate;
      match.members.assign(region.begin(), region.end());
      match.members.insert(match.members.end(), constants.begin(), constants.end());
      best_size = region.size();
      best = std::move(match);
    }
  }
  if (best) return best;
  return MatchLinear(v);
}

}  // namespace xlens
