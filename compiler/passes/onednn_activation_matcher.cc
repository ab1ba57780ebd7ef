#include "compiler/passes/onednn_activation_matcher.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cmath>
#include <map>
#include <memory>
#include <unordered_set>

#include "compiler/passes/erfc_expansion.h"
#include "compiler/passes/expression_form.h"

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

// jax.nn.gelu(x, approximate=False): 0.5 x erfc(-x / sqrt 2), erfc expanded into rational
// approximations (erfc_expansion.h), as JAX lowers it for f32. Tried first: it contains smaller
// forms.
std::string JaxGeluErfText() {
  return R"(HloModule gelu_erf_jax
ENTRY main.1 {
  x.1 = f32[] parameter(0)
  constant.59 = f32[] constant(0.5)
  mul_jit__lambda__.1 = f32[] multiply(x.1, constant.59)
  neg.1 = f32[] negate(x.1)
  constant.58 = f32[] constant(0.707106769)
  mul.2 = f32[] multiply(neg.1, constant.58))" +
         ErfcExpansionF32Instructions("mul.2", "erfc.125") + R"(  ROOT mul.3 = f32[] multiply(mul_jit__lambda__.1, erfc.125)
})";
}

const FormText kForms[] = {
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
  OneDnnPostOp::Kind kind;
  ExpressionForm form;
};

const std::vector<Form>& Forms() {
  static const std::vector<Form>* forms = [] {
    auto* forms = new std::vector<Form>();
    auto add = [&](const char* name, OneDnnPostOp::Kind kind, const std::string& text) {
      std::optional<ExpressionForm> form = ParseExpressionForm(name, text);
      if (form) forms->push_back({kind, std::move(*form)});  // a test checks that every form parses
    };
    add("gelu_erf(jax)", OneDnnPostOp::Kind::kGeluErf, JaxGeluErfText());
    for (const FormText& f : kForms) add(f.name, f.kind, f.text);
    return forms;
  }();
  return *forms;
}

using expression_form::IsRowMajor;
using expression_form::ScalarF32Constant;

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
  for (const Form& f : Forms()) names.push_back(f.form.name);
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
  for (const Form& f : Forms()) {
    const ExpressionForm& form = f.form;
    for (HloInstruction* candidate : reachable) {
      if (candidate->opcode() != form.root->opcode()) continue;
      ExpressionFormMatcher matcher(v);
      if (!matcher.Match(form.root, candidate)) continue;
      std::unordered_set<HloInstruction*> region;
      std::vector<HloInstruction*> constants;
      matcher.Collect(form.root, candidate, &region, &constants);
      if (!Closed(v, region, candidate) || region.size() <= best_size) continue;
      ActivationMatch match;
      match.op.kind = f.kind;
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
