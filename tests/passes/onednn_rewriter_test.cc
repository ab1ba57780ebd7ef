#include "compiler/passes/onednn_rewriter.h"

#include "compiler/passes/onednn_activation_matcher.h"
#include "compiler/support/cpu_features.h"

#include <fstream>
#include <map>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "pass_test_util.h"

namespace xlens {
namespace {

using ::testing::HasSubstr;
using xlens::testing::CountOpcode;

std::string ReadTestFile(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::unique_ptr<HloModule> Rewrite(OneDnnRewriter& pass, std::string_view text,
                                   bool expect_change = true) {
  return xlens::testing::RunPassOnText(pass, text, expect_change);
}

std::vector<const HloInstruction*> CustomFusions(const HloModule& module) {
  std::vector<const HloInstruction*> out;
  for (const HloInstruction* i : module.entry_computation()->MakeInstructionPostOrder()) {
    if (i->opcode() == HloOpcode::kFusion && i->fusion_kind == FusionKind::kCustom) out.push_back(i);
  }
  return out;
}

std::string Calls(const HloModule& module) {
  std::string s;
  for (const HloInstruction* f : CustomFusions(module)) {
    std::optional<OneDnnCall> call = MatchOneDnnCall(*f);
    s += (call ? call->ToString() : "NOT A ONEDNN CALL") + "\n";
  }
  return s;
}

// The GELU MLP as JAX lowers it (jax.nn.gelu(x @ w1, approximate=True) @ w2), with op_names.
constexpr char kGeluMlp[] = R"(HloModule m
ENTRY e {
  x = f32[8,16]{1,0} parameter(0)
  w1 = f32[16,32]{1,0} parameter(1)
  d = f32[8,32]{1,0} dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/dot_general"}
  p2 = f32[8,32]{1,0} multiply(d, d), metadata={op_name="jit(f)/integer_pow"}
  p3 = f32[8,32]{1,0} multiply(p2, d), metadata={op_name="jit(f)/integer_pow"}
  c7 = f32[] constant(0.044715)
  b7 = f32[8,32]{1,0} broadcast(c7), dimensions={}
  m10 = f32[8,32]{1,0} multiply(p3, b7), metadata={op_name="jit(f)/mul"}
  a4 = f32[8,32]{1,0} add(d, m10), metadata={op_name="jit(f)/add"}
  c6 = f32[] constant(0.797884583)
  b6 = f32[8,32]{1,0} broadcast(c6), dimensions={}
  m11 = f32[8,32]{1,0} multiply(a4, b6), metadata={op_name="jit(f)/mul"}
  t = f32[8,32]{1,0} tanh(m11), metadata={op_name="jit(f)/tanh"}
  c5 = f32[] constant(1)
  b5 = f32[8,32]{1,0} broadcast(c5), dimensions={}
  a5 = f32[8,32]{1,0} add(t, b5), metadata={op_name="jit(f)/add"}
  c4 = f32[] constant(0.5)
  b4 = f32[8,32]{1,0} broadcast(c4), dimensions={}
  m12 = f32[8,32]{1,0} multiply(a5, b4), metadata={op_name="jit(f)/mul"}
  g = f32[8,32]{1,0} multiply(d, m12), metadata={op_name="jit(f)/mul"}
  w2 = f32[32,4]{1,0} parameter(2)
  ROOT y = f32[8,4]{1,0} dot(g, w2), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/dot_general_2"}
})";

TEST(OneDnnRewriterTest, TanhGeluIsFusedAndItsProvenanceKept) {
  OneDnnRewriter checked;
  Rewrite(checked, kGeluMlp);
  // Once more, to read the decisions of the run that rewrote the module.
  OneDnnRewriter pass;
  auto module = xlens::testing::ParseModuleOrDie(kGeluMlp);
  ASSERT_NE(module, nullptr);
  ASSERT_TRUE(xlens::testing::RunPassChecked(pass, *module).ok());
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(Calls(*module), "matmul(lhs, rhs) + gelu_tanh\nmatmul(lhs, rhs)\n");
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kTanh), 0);
  const HloInstruction* first = CustomFusions(*module)[0];
  // Every absorbed instruction is in the fused computation with its own name and metadata, and
  // the call's op_name names every graph op inside it.
  const HloInstruction* tanh = nullptr;
  for (const HloInstruction* i : first->fused_computation()->instructions()) {
    if (i->name() == "t") tanh = i;
  }
  ASSERT_NE(tanh, nullptr);
  EXPECT_EQ(tanh->metadata.op_name, "jit(f)/tanh");
  EXPECT_EQ(first->metadata.op_name,
            "jit(f)/dot_general;jit(f)/integer_pow;jit(f)/mul;jit(f)/add;jit(f)/tanh");
  // The decisions name what went in and why, and which fusion it went into.
  bool tanh_decided = false;
  for (const FusionDecision& d : pass.decisions()) {
    if (d.producer == "t") {
      tanh_decided = d.fused && d.kind == "kCustom" && d.fusion == first->name() &&
                     d.reason == "oneDNN post-op gelu_tanh";
    }
  }
  EXPECT_TRUE(tanh_decided);
}

TEST(OneDnnRewriterTest, ALargeResultsTanhGeluIsTheThunksOrLeftToTheCompilersOwnLoop) {
  // The same MLP with a [256,512] hidden layer. On a CPU with AVX-512 the thunk applies the GELU
  // itself to each part's block after oneDNN's call (OneDnnPostOpAppliedByThunk), so it is fused.
  // Elsewhere oneDNN's GELU would be slower than the loop after the call, so the call computes
  // the product alone and the GELU stays in the module.
  std::string text = kGeluMlp;
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"f32[8,16]", "f32[256,16]"}, {"f32[16,32]", "f32[16,512]"}, {"f32[8,32]", "f32[256,512]"},
           {"f32[32,4]", "f32[512,4]"}, {"f32[8,4]", "f32[256,4]"}}) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
      text.replace(at, from.size(), to);
    }
  }
  OneDnnRewriter pass;
  auto module = Rewrite(pass, text);
  OneDnnPostOp gelu;
  gelu.kind = OneDnnPostOp::Kind::kGeluTanh;
  EXPECT_EQ(OneDnnPostOpAppliedByThunk(gelu), CpuHasAvx512F());
  if (CpuHasAvx512F()) {
    EXPECT_EQ(Calls(*module), "matmul(lhs, rhs) + gelu_tanh\nmatmul(lhs, rhs)\n");
    EXPECT_EQ(CountOpcode(*module, HloOpcode::kTanh), 0);
  } else {
    EXPECT_EQ(Calls(*module), "matmul(lhs, rhs)\nmatmul(lhs, rhs)\n");
    EXPECT_EQ(CountOpcode(*module, HloOpcode::kTanh), 1);
  }
}

TEST(OneDnnRewriterTest, BiasReluAndScalingChainInOrder) {
  OneDnnRewriter pass;
  auto module = Rewrite(pass, R"(HloModule m
ENTRY e {
  x = f32[8,16]{1,0} parameter(0)
  w = f32[16,32]{1,0} parameter(1)
  b = f32[32]{0} parameter(2)
  d = f32[8,32]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[8,32]{1,0} broadcast(b), dimensions={1}
  a = f32[8,32]{1,0} add(bb, d)
  z = f32[] constant(0)
  zb = f32[8,32]{1,0} broadcast(z), dimensions={}
  r = f32[8,32]{1,0} maximum(a, zb)
  two = f32[] constant(2)
  tb = f32[8,32]{1,0} broadcast(two), dimensions={}
  s = f32[8,32]{1,0} multiply(tb, r)
  ROOT n = f32[8,32]{1,0} negate(s)
})");
  ASSERT_NE(module, nullptr);
  // The negation after the scaling is an affine map too: it joins the same region.
  EXPECT_EQ(Calls(*module), "matmul(lhs, rhs) + binary_add[bias] + relu + linear(-2x+0)\n");
  EXPECT_EQ(module->entry_computation()->instruction_count(), 4);  // 3 parameters, the call
}

TEST(OneDnnRewriterTest, AFullAddendAfterAReluEndsTheChain) {
  // The thunk applies the ReLU and what follows it after oneDNN has written the product, which
  // may be where a residual of the output's shape lay: the residual's add is left out.
  OneDnnRewriter pass;
  auto module = Rewrite(pass, R"(HloModule m
ENTRY e {
  x = f32[8,16]{1,0} parameter(0)
  w = f32[16,32]{1,0} parameter(1)
  res = f32[8,32]{1,0} parameter(2)
  d = f32[8,32]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z = f32[] constant(0)
  zb = f32[8,32]{1,0} broadcast(z), dimensions={}
  r = f32[8,32]{1,0} maximum(d, zb)
  ROOT a = f32[8,32]{1,0} add(r, res)
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(Calls(*module), "matmul(lhs, rhs) + relu\n");
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kAdd), 1);
}

TEST(OneDnnRewriterTest, MinorTransposesAreReadInPlace) {
  OneDnnRewriter pass;
  auto module = Rewrite(pass, R"(HloModule m
ENTRY e {
  a = f32[16,8]{1,0} parameter(0)
  b = f32[4,32,16]{2,1,0} parameter(1)
  ta = f32[8,16]{1,0} transpose(a), dimensions={1,0}
  w = f32[16,32]{1,0} parameter(2)
  d = f32[8,32]{1,0} dot(ta, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  q = f32[4,8,16]{2,1,0} broadcast(ta), dimensions={1,2}
  tb = f32[4,16,32]{2,1,0} transpose(b), dimensions={0,2,1}
  bd = f32[4,8,32]{2,1,0} dot(q, tb), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  ROOT t = (f32[8,32]{1,0}, f32[4,8,32]{2,1,0}) tuple(d, bd)
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(Calls(*module), "matmul(lhs^T, rhs)\nmatmul(lhs, rhs^T)\n");
  // ta has another user (the broadcast): it stays for that one and is cloned into the call; tb
  // is gone.
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kTranspose), 1);
}

TEST(OneDnnRewriterTest, ContiguousSlicesAreReadInPlaceAtTheirOffset) {
  OneDnnRewriter pass;
  auto module = Rewrite(pass, R"(HloModule m
ENTRY e {
  q = f32[4,32,16]{2,1,0} parameter(0)
  k = f32[4,32,16]{2,1,0} parameter(1)
  q2 = f32[1,32,16]{2,1,0} slice(q), slice={[2:3], [0:32], [0:16]}
  k3 = f32[1,32,16]{2,1,0} slice(k), slice={[3:4], [0:32], [0:16]}
  tk = f32[1,16,32]{2,1,0} transpose(k3), dimensions={0,2,1}
  s = f32[1,32,32]{2,1,0} dot(q2, tk), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  rows = f32[1,8,16]{2,1,0} slice(q), slice={[1:2], [8:16], [0:16]}
  cols = f32[1,16,16]{2,1,0} slice(k), slice={[0:1], [0:16], [0:16]}
  r = f32[1,8,16]{2,1,0} dot(rows, cols), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  half = f32[1,32,8]{2,1,0} slice(k), slice={[0:1], [0:32], [0:8]}
  h = f32[1,32,8]{2,1,0} dot(s, half), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  ROOT t = (f32[1,8,16]{2,1,0}, f32[1,32,8]{2,1,0}) tuple(r, h)
})");
  ASSERT_NE(module, nullptr);
  std::vector<std::pair<int64_t, int64_t>> offsets;
  for (const HloInstruction* f : CustomFusions(*module)) {
    std::optional<OneDnnCall> call = MatchOneDnnCall(*f);
    ASSERT_TRUE(call.has_value()) << f->ToString();
    offsets.push_back({call->lhs_offset, call->rhs_offset});
  }
  // q's element 2 from 2 * 32 * 16, k's 3 (read transposed) from 3 * 32 * 16; rows 8-15 of q's
  // element 1 from 512 + 8 * 16, with the first 16 rows of k's element 0 from 0. The columns
  // 0-7 of k's rows do not lie together: that slice stays a copy, and the scores s are read as
  // they are.
  EXPECT_THAT(offsets, ::testing::UnorderedElementsAre(std::pair<int64_t, int64_t>{1024, 1536},
                                                       std::pair<int64_t, int64_t>{640, 0},
                                                       std::pair<int64_t, int64_t>{0, 0}));
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kSlice), 1);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kTranspose), 0);

  // k's element read transposed by two products (two blocks of q's rows): the transpose stays
  // outside for the second while the first reads it, and so does the slice below it; each call
  // reads k in place all the same, and nothing is left outside.
  auto shared = Rewrite(pass, R"(HloModule m
ENTRY e {
  q = f32[4,32,16]{2,1,0} parameter(0)
  k = f32[4,32,16]{2,1,0} parameter(1)
  k1 = f32[1,32,16]{2,1,0} slice(k), slice={[1:2], [0:32], [0:16]}
  tk = f32[1,16,32]{2,1,0} transpose(k1), dimensions={0,2,1}
  top = f32[1,16,16]{2,1,0} slice(q), slice={[1:2], [0:16], [0:16]}
  bottom = f32[1,16,16]{2,1,0} slice(q), slice={[1:2], [16:32], [0:16]}
  s0 = f32[1,16,32]{2,1,0} dot(top, tk), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  s1 = f32[1,16,32]{2,1,0} dot(bottom, tk), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  ROOT t = (f32[1,16,32]{2,1,0}, f32[1,16,32]{2,1,0}) tuple(s0, s1)
})");
  ASSERT_NE(shared, nullptr);
  offsets.clear();
  for (const HloInstruction* f : CustomFusions(*shared)) {
    std::optional<OneDnnCall> call = MatchOneDnnCall(*f);
    ASSERT_TRUE(call.has_value()) << f->ToString();
    offsets.push_back({call->lhs_offset, call->rhs_offset});
  }
  EXPECT_THAT(offsets, ::testing::UnorderedElementsAre(std::pair<int64_t, int64_t>{512, 512},
                                                       std::pair<int64_t, int64_t>{768, 512}));
  EXPECT_EQ(CountOpcode(*shared, HloOpcode::kSlice), 0);
  EXPECT_EQ(CountOpcode(*shared, HloOpcode::kTranspose), 0);
}

// JAX takes an attention head as reshape(slice(q)): a reshape between row-major arrays keeps the
// slice's bytes where they lie, so the call reads through it in place too, where it drops the
// batch element (q's head 2, k's 3 read transposed), merges two batch elements into rows (q's
// 1-2 as [64,16]) or is shared by two products (those rows; k's head under its transpose; v's
// head 1), where it stays outside for the other and keeps its slice there, and nothing is left
// once all are read; so is a reshape of a whole array (k flattened into rows). A reshape from
// another layout moves elements: it and its slice stay a copy.
TEST(OneDnnRewriterTest, ReshapedContiguousSlicesAreReadInPlace) {
  OneDnnRewriter pass;
  auto module = Rewrite(pass, R"(HloModule m
ENTRY e {
  q = f32[4,32,16]{2,1,0} parameter(0)
  k = f32[4,32,16]{2,1,0} parameter(1)
  v = f32[4,16,16]{2,1,0} parameter(2)
  q2s = f32[1,32,16]{2,1,0} slice(q), slice={[2:3], [0:32], [0:16]}
  q2 = f32[32,16]{1,0} reshape(q2s)
  k3s = f32[1,32,16]{2,1,0} slice(k), slice={[3:4], [0:32], [0:16]}
  k3 = f32[32,16]{1,0} reshape(k3s)
  tk = f32[16,32]{1,0} transpose(k3), dimensions={1,0}
  s = f32[32,32]{1,0} dot(q2, tk), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  pair = f32[2,32,16]{2,1,0} slice(q), slice={[1:3], [0:32], [0:16]}
  rows = f32[64,16]{1,0} reshape(pair)
  v1s = f32[1,16,16]{2,1,0} slice(v), slice={[1:2], [0:16], [0:16]}
  v1 = f32[16,16]{1,0} reshape(v1s)
  r = f32[64,16]{1,0} dot(rows, v1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  u = f32[64,32]{1,0} dot(rows, tk), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  w = f32[16,16]{1,0} dot(v1, v1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ks = f32[1,32,16]{1,2,0} slice(k), slice={[0:1], [0:32], [0:16]}
  moved = f32[32,16]{1,0} reshape(ks)
  x = f32[32,16]{1,0} dot(moved, v1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  flat = f32[128,16]{1,0} reshape(k)
  y = f32[128,16]{1,0} dot(flat, v1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = (f32[32,32]{1,0}, f32[64,16]{1,0}, f32[64,32]{1,0}, f32[16,16]{1,0}, f32[32,16]{1,0}, f32[128,16]{1,0}) tuple(s, r, u, w, x, y)
})");
  ASSERT_NE(module, nullptr);
  std::vector<std::pair<int64_t, int64_t>> offsets;
  for (const HloInstruction* f : CustomFusions(*module)) {
    std::optional<OneDnnCall> call = MatchOneDnnCall(*f);
    ASSERT_TRUE(call.has_value()) << f->ToString();
    offsets.push_back({call->lhs_offset, call->rhs_offset});
  }
  // s: q from 2 * 512, k from 3 * 512; r: q's rows from 512, v from 256; u: q's rows, k's head;
  // w: v's head twice; x: the reshape of k's column-major head 0 as it is, then v's head; y:
  // all of k flattened into rows, read where it lies, then v's head.
  EXPECT_THAT(offsets, ::testing::UnorderedElementsAre(
                           std::pair<int64_t, int64_t>{1024, 1536}, std::pair<int64_t, int64_t>{512, 256},
                           std::pair<int64_t, int64_t>{512, 1536}, std::pair<int64_t, int64_t>{256, 256},
                           std::pair<int64_t, int64_t>{0, 256}, std::pair<int64_t, int64_t>{0, 256}));
  // Left outside: only that reshape and its slice.
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kSlice), 1);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kReshape), 1);
}

// JAX's weight gradient and update for x @ w: w - transpose(g^T x) * 0.1.
constexpr char kGradientStep[] = R"(HloModule m
ENTRY e {
  g = f32[8,64]{1,0} parameter(0)
  x = f32[8,32]{1,0} parameter(1)
  w = f32[32,64]{1,0} parameter(2)
  tg = f32[64,8]{1,0} transpose(g), dimensions={1,0}
  d = f32[64,32]{1,0} dot(tg, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = f32[] constant(0.1)
  cb = f32[64,32]{1,0} broadcast(c), dimensions={}
  m = f32[64,32]{1,0} multiply(d, cb)
  t = f32[32,64]{1,0} transpose(m), dimensions={1,0}
  ROOT s = f32[32,64]{1,0} subtract(w, t)
})";

TEST(OneDnnRewriterTest, TransposedProductIsTheProductOfTransposedOperands) {
  OneDnnRewriter checked;
  Rewrite(checked, kGradientStep);
  // The transpose is taken into the product, (g^T x)^T = x^T g, so one call computes the
  // update: x read transposed in place, g^T^T is g, the scaling and the subtraction its
  // post-ops. Once more, to read the decisions of the run that rewrote the module.
  OneDnnRewriter pass;
  auto module = xlens::testing::ParseModuleOrDie(kGradientStep);
  ASSERT_NE(module, nullptr);
  ASSERT_TRUE(xlens::testing::RunPassChecked(pass, *module).ok());
  EXPECT_EQ(Calls(*module), "matmul(lhs^T, rhs) + linear(-0.1x-0) + binary_add\n");
  EXPECT_EQ(module->entry_computation()->instruction_count(), 4);  // 3 parameters, the call
  const HloInstruction* call = module->entry_computation()->root_instruction();
  ASSERT_EQ(call->opcode(), HloOpcode::kFusion);
  // lhs^T is x's transpose read in place, rhs g itself; the result is w's shape, row-major.
  std::optional<OneDnnCall> c = MatchOneDnnCall(*call);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(call->operand(c->lhs_parameter)->name(), "x");
  EXPECT_EQ(call->operand(c->rhs_parameter)->name(), "g");
  EXPECT_EQ(call->shape().dimensions(), (std::vector<int64_t>{32, 64}));
  bool decided = false;
  for (const FusionDecision& d : pass.decisions()) {
    decided |= d.producer == "t" && d.fused && d.reason.find("transposed operands") != std::string::npos;
  }
  EXPECT_TRUE(decided);
}

TEST(OneDnnRewriterTest, ANarrowWeightGradientIsSwappedWhereTheNarrowLoopsRun) {
  // The MNIST step's update w - 0.5 transpose(g^T x): swapped, x^T g has rows of 10 where g^T x
  // has rows of 784, which the runtime's loops for narrow results take (AVX-512); elsewhere the
  // call keeps its wide rows and the transpose stays after it.
  OneDnnRewriter pass;
  auto module = Rewrite(pass, R"(HloModule m
ENTRY e {
  g = f32[100,10]{1,0} parameter(0)
  x = f32[100,784]{1,0} parameter(1)
  w = f32[784,10]{1,0} parameter(2)
  tg = f32[10,100]{1,0} transpose(g), dimensions={1,0}
  d = f32[10,784]{1,0} dot(tg, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = f32[] constant(0.5)
  cb = f32[10,784]{1,0} broadcast(c), dimensions={}
  m = f32[10,784]{1,0} multiply(d, cb)
  t = f32[784,10]{1,0} transpose(m), dimensions={1,0}
  ROOT s = f32[784,10]{1,0} subtract(w, t)
})");
  ASSERT_NE(module, nullptr);
  if (__builtin_cpu_supports("avx512f")) {
    EXPECT_EQ(Calls(*module), "matmul(lhs^T, rhs) + linear(-0.5x-0) + binary_add\n");
    EXPECT_EQ(CountOpcode(*module, HloOpcode::kTranspose), 0);
  } else {
    EXPECT_EQ(Calls(*module), "matmul(lhs^T, rhs) + linear(0.5x+0)\n");
    EXPECT_EQ(CountOpcode(*module, HloOpcode::kTranspose), 1);
  }
}

TEST(OneDnnRewriterTest, ANarrowWeightGradientIsSwappedFromTheNarrowLoopsShortestK) {
  // The same update over a batch of k: swapped from kNarrowTransposedLhsMinK (16), where the
  // runtime's loops take x^T g; at 15 the call keeps its wide rows and the transpose after it.
  for (int64_t k : {kNarrowTransposedLhsMinK - 1, kNarrowTransposedLhsMinK}) {
    SCOPED_TRACE("k = " + std::to_string(k));
    const std::string b = std::to_string(k);
    OneDnnRewriter pass;
    auto module = Rewrite(pass, "HloModule m\nENTRY e {\n  g = f32[" + b + ",10]{1,0} parameter(0)\n"
                                "  x = f32[" + b + ",784]{1,0} parameter(1)\n  w = f32[784,10]{1,0} parameter(2)\n"
                                "  tg = f32[10," + b + "]{1,0} transpose(g), dimensions={1,0}\n"
                                "  d = f32[10,784]{1,0} dot(tg, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                                "  c = f32[] constant(0.5)\n  cb = f32[10,784]{1,0} broadcast(c), dimensions={}\n"
                                "  m = f32[10,784]{1,0} multiply(d, cb)\n"
                                "  t = f32[784,10]{1,0} transpose(m), dimensions={1,0}\n"
                                "  ROOT s = f32[784,10]{1,0} subtract(w, t)\n}\n");
    ASSERT_NE(module, nullptr);
    if (__builtin_cpu_supports("avx512f") && k >= kNarrowTransposedLhsMinK) {
      EXPECT_EQ(Calls(*module), "matmul(lhs^T, rhs) + linear(-0.5x-0) + binary_add\n");
      EXPECT_EQ(CountOpcode(*module, HloOpcode::kTranspose), 0);
    } else {
      EXPECT_EQ(Calls(*module), "matmul(lhs^T, rhs) + linear(0.5x+0)\n");
      EXPECT_EQ(CountOpcode(*module, HloOpcode::kTranspose), 1);
    }
  }
}

TEST(OneDnnRewriterTest, BatchedTransposedProductWithANegation) {
  OneDnnRewriter pass;
  // Per head: transpose(-(a b)) = -(b^T a^T), b stored transposed already ([.., n, k]).
  auto module = Rewrite(pass, R"(HloModule m
ENTRY e {
  a = f32[2,64,16]{2,1,0} parameter(0)
  b = f32[2,64,16]{2,1,0} parameter(1)
  tb = f32[2,16,64]{2,1,0} transpose(b), dimensions={0,2,1}
  d = f32[2,64,64]{2,1,0} dot(a, tb), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  n = f32[2,64,64]{2,1,0} negate(d)
  ROOT t = f32[2,64,64]{2,1,0} transpose(n), dimensions={0,2,1}
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(Calls(*module), "matmul(lhs, rhs^T) + linear(-1x+0)\n");
  EXPECT_EQ(module->entry_computation()->instruction_count(), 3);  // 2 parameters, the call
  const HloInstruction* call = module->entry_computation()->root_instruction();
  std::optional<OneDnnCall> c = MatchOneDnnCall(*call);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(call->operand(c->lhs_parameter)->name(), "b");
  EXPECT_EQ(call->operand(c->rhs_parameter)->name(), "a");
}

TEST(OneDnnRewriterTest, ATransposeThatCannotMoveStaysOutside) {
  // Each module keeps one call and the transpose of its result.
  const char* const kModules[] = {
      // The product's result is read twice.
      R"(HloModule m
ENTRY e {
  a = f32[8,16]{1,0} parameter(0)
  b = f32[16,32]{1,0} parameter(1)
  d = f32[8,32]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[32,8]{1,0} transpose(d), dimensions={1,0}
  ROOT r = (f32[32,8]{1,0}, f32[8,32]{1,0}) tuple(t, d)
})",
      // The chain multiplies by a tensor that is not a scalar.
      R"(HloModule m
ENTRY e {
  a = f32[8,16]{1,0} parameter(0)
  b = f32[16,32]{1,0} parameter(1)
  e = f32[8,32]{1,0} parameter(2)
  d = f32[8,32]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  m = f32[8,32]{1,0} multiply(d, e)
  ROOT t = f32[32,8]{1,0} transpose(m), dimensions={1,0}
})",
      // b^T, a new transposed lhs, would be [128,256] for a [128,64] result: packing it would
      // cost more than the transpose.
      R"(HloModule m
ENTRY e {
  a = f32[64,256]{1,0} parameter(0)
  b = f32[256,128]{1,0} parameter(1)
  d = f32[64,128]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = f32[128,64]{1,0} transpose(d), dimensions={1,0}
})",
      // The swapped product's rows would be 10 long instead of 32: the call keeps its wide rows.
      R"(HloModule m
ENTRY e {
  a = f32[10,16]{1,0} parameter(0)
  b = f32[16,32]{1,0} parameter(1)
  d = f32[10,32]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = f32[32,10]{1,0} transpose(d), dimensions={1,0}
})",
  };
  for (const char* text : kModules) {
    SCOPED_TRACE(text);
    OneDnnRewriter pass;
    auto module = Rewrite(pass, text);
    ASSERT_NE(module, nullptr);
    EXPECT_EQ(Calls(*module), "matmul(lhs, rhs)\n");
    EXPECT_EQ(CountOpcode(*module, HloOpcode::kTranspose), 1);
  }
}

TEST(OneDnnRewriterTest, SubtractionsBecomeNegationsAndAdds) {
  OneDnnRewriter pass;
  auto module = Rewrite(pass, R"(HloModule m
ENTRY e {
  x = f32[8,16]{1,0} parameter(0)
  w = f32[16,32]{1,0} parameter(1)
  b = f32[32]{0} parameter(2)
  d = f32[8,32]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[8,32]{1,0} broadcast(b), dimensions={1}
  ROOT s = f32[8,32]{1,0} subtract(d, bb)
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(Calls(*module), "matmul(lhs, rhs) + linear(-1x+0) + binary_add[bias] + linear(-1x+0)\n");
  EXPECT_EQ(module->entry_computation()->instruction_count(), 4);
}

TEST(OneDnnRewriterTest, AChainHoldsOneLinearMap) {
  OneDnnRewriter pass;
  // oneDNN applies all linear post-ops of a call with the first one's parameters: (d * 2 + r) * 3
  // keeps the second scaling outside.
  auto module = Rewrite(pass, R"(HloModule m
ENTRY e {
  x = f32[8,16]{1,0} parameter(0)
  w = f32[16,32]{1,0} parameter(1)
  r = f32[8,32]{1,0} parameter(2)
  d = f32[8,32]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  two = f32[] constant(2)
  tb = f32[8,32]{1,0} broadcast(two), dimensions={}
  s = f32[8,32]{1,0} multiply(d, tb)
  a = f32[8,32]{1,0} add(s, r)
  three = f32[] constant(3)
  hb = f32[8,32]{1,0} broadcast(three), dimensions={}
  ROOT t = f32[8,32]{1,0} multiply(a, hb)
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(Calls(*module), "matmul(lhs, rhs) + linear(2x+0) + binary_add\n");
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kMultiply), 1);
}

TEST(OneDnnRewriterTest, AValueUsedOutsideEndsTheChain) {
  OneDnnRewriter pass;
  // The bias add's result also feeds the ReLU mask of a backward pass: the add is fused, the
  // ReLU stays outside so that both read the call's result.
  auto module = Rewrite(pass, R"(HloModule m
ENTRY e {
  x = f32[8,16]{1,0} parameter(0)
  w = f32[16,32]{1,0} parameter(1)
  b = f32[32]{0} parameter(2)
  d = f32[8,32]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[8,32]{1,0} broadcast(b), dimensions={1}
  a = f32[8,32]{1,0} add(d, bb)
  z = f32[] constant(0)
  zb = f32[8,32]{1,0} broadcast(z), dimensions={}
  r = f32[8,32]{1,0} maximum(a, zb)
  m = pred[8,32]{1,0} compare(a, zb), direction=GT
  ROOT t = (f32[8,32]{1,0}, pred[8,32]{1,0}) tuple(r, m)
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(Calls(*module), "matmul(lhs, rhs) + binary_add[bias]\n");
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kMaximum), 1);
}

TEST(OneDnnRewriterTest, LookAlikesAreNotTakenForActivations) {
  OneDnnRewriter pass;
  // x * sigmoid(1.702 x) (the sigmoid approximation of GELU) and max(x, 0.1) are neither GELU
  // nor ReLU nor affine: the product is called alone and they stay outside.
  auto module = Rewrite(pass, R"(HloModule m
ENTRY e {
  x = f32[8,16]{1,0} parameter(0)
  w = f32[16,32]{1,0} parameter(1)
  d = f32[8,32]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  k = f32[] constant(1.702)
  kb = f32[8,32]{1,0} broadcast(k), dimensions={}
  s = f32[8,32]{1,0} multiply(d, kb)
  l = f32[8,32]{1,0} logistic(s)
  g = f32[8,32]{1,0} multiply(d, l)
  d2 = f32[8,32]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = f32[] constant(0.1)
  cb = f32[8,32]{1,0} broadcast(c), dimensions={}
  r = f32[8,32]{1,0} maximum(d2, cb)
  ROOT t = (f32[8,32]{1,0}, f32[8,32]{1,0}) tuple(g, r)
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(Calls(*module), "matmul(lhs, rhs)\nmatmul(lhs, rhs)\n");
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kLogistic), 1);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kMaximum), 1);
}

// A [8,16] x [16,32] product `d` with `epilogue` on top of it (its ROOT reads `d`).
std::string OnTopOfAProduct(const std::string& epilogue) {
  return "HloModule m\nENTRY e {\n  x = f32[8,16]{1,0} parameter(0)\n  w = f32[16,32]{1,0} parameter(1)\n"
         "  d = f32[8,32]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
         "  zero = f32[] constant(0)\n  one = f32[] constant(1)\n  half = f32[] constant(0.5)\n"
         "  zb = f32[8,32]{1,0} broadcast(zero), dimensions={}\n"
         "  ob = f32[8,32]{1,0} broadcast(one), dimensions={}\n"
         "  hb = f32[8,32]{1,0} broadcast(half), dimensions={}\n" +
         epilogue + "}\n";
}

// tf.nn.gelu(d, approximate=True) with `k` for 0.044715 and `a` and `b` the operands of the
// power.
std::string TfTanhGelu(const std::string& k, const std::string& a, const std::string& b) {
  return "  three = f32[] constant(3)\n  tb = f32[8,32]{1,0} broadcast(three), dimensions={}\n"
         "  k = f32[] constant(" + k + ")\n  kb = f32[8,32]{1,0} broadcast(k), dimensions={}\n"
         "  s = f32[] constant(0.797884583)\n  sb = f32[8,32]{1,0} broadcast(s), dimensions={}\n"
         "  hx = f32[8,32]{1,0} multiply(hb, d)\n  x3 = f32[8,32]{1,0} power(" + a + ", " + b + ")\n"
         "  kx3 = f32[8,32]{1,0} multiply(kb, x3)\n  in = f32[8,32]{1,0} add(d, kx3)\n"
         "  sc = f32[8,32]{1,0} multiply(sb, in)\n  t = f32[8,32]{1,0} tanh(sc)\n"
         "  t1 = f32[8,32]{1,0} add(ob, t)\n  ROOT r = f32[8,32]{1,0} multiply(hx, t1)\n";
}

// tf.nn.gelu(d, approximate=False), the division written `a / b`.
std::string TfErfGelu(const std::string& a, const std::string& b) {
  return "  c = f32[] constant(1.41421354)\n  cb = f32[8,32]{1,0} broadcast(c), dimensions={}\n"
         "  hx = f32[8,32]{1,0} multiply(hb, d)\n  sc = f32[8,32]{1,0} divide(" + a + ", " + b + ")\n"
         "  e = f32[8,32]{1,0} erf(sc)\n  e1 = f32[8,32]{1,0} add(ob, e)\n"
         "  ROOT r = f32[8,32]{1,0} multiply(hx, e1)\n";
}

// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) grouped as a hand-written version does (with
// x^4 for x^3 when `fourth`).
std::string HandGroupedTanhGelu(bool fourth) {
  return "  k = f32[] constant(0.044715)\n  kb = f32[8,32]{1,0} broadcast(k), dimensions={}\n"
         "  s = f32[] constant(0.797884583)\n  sb = f32[8,32]{1,0} broadcast(s), dimensions={}\n"
         "  hx = f32[8,32]{1,0} multiply(d, hb)\n  k1 = f32[8,32]{1,0} multiply(d, kb)\n"
         "  k2 = f32[8,32]{1,0} multiply(k1, d)\n  k3 = f32[8,32]{1,0} multiply(k2, d)\n" +
         std::string(fourth ? "  k4 = f32[8,32]{1,0} multiply(k3, d)\n  in = f32[8,32]{1,0} add(d, k4)\n"
                            : "  in = f32[8,32]{1,0} add(d, k3)\n") +
         "  sc = f32[8,32]{1,0} multiply(in, sb)\n  t = f32[8,32]{1,0} tanh(sc)\n"
         "  t1 = f32[8,32]{1,0} add(t, ob)\n  ROOT r = f32[8,32]{1,0} multiply(hx, t1)\n";
}

// ReLU everywhere but on (9, 11], where it is 0: equal to ReLU at every point a sampling
// classifier would try on a grid of eighths over [-8, 8] and at +-12 and +-30.
constexpr char kPiecewiseRelu[] =
    "  relu = f32[8,32]{1,0} maximum(d, zb)\n"
    "  nine = f32[] constant(9)\n  nb = f32[8,32]{1,0} broadcast(nine), dimensions={}\n"
    "  eleven = f32[] constant(11)\n  eb = f32[8,32]{1,0} broadcast(eleven), dimensions={}\n"
    "  above9 = pred[8,32]{1,0} compare(d, nb), direction=GT\n"
    "  above11 = pred[8,32]{1,0} compare(d, eb), direction=GT\n"
    "  hole = f32[8,32]{1,0} select(above9, zb, relu)\n"
    "  ROOT r = f32[8,32]{1,0} select(above11, relu, hole)\n";

TEST(OneDnnRewriterTest, EveryFormParses) {
  EXPECT_EQ(OneDnnActivationForms(),
            (std::vector<std::string>{"gelu_erf(jax)", "gelu_tanh(jax)", "gelu_tanh(tf)",
                                      "gelu_erf(erf, multiply)", "gelu_erf(erf, divide)",
                                      "logistic(1/(1+exp(-x)))", "logistic", "relu6", "relu6(clamp)", "relu",
                                      "linear"}));
}

TEST(OneDnnRewriterTest, TensorFlowAndJaxFormsInAnyCommutedOrder) {
  struct Case {
    std::string epilogue, call;
  };
  const std::vector<Case> cases = {
      {TfTanhGelu("0.044715", "d", "tb"), "matmul(lhs, rhs) + gelu_tanh"},
      {TfErfGelu("d", "cb"), "matmul(lhs, rhs) + gelu_erf"},
      // Grouped as written by hand: (0.5 x) (tanh(...) + 1), the cube as ((x k) x) x.
      {HandGroupedTanhGelu(false), "matmul(lhs, rhs) + gelu_tanh"},
      {"  ROOT r = f32[8,32]{1,0} logistic(d)\n", "matmul(lhs, rhs) + logistic"},
      {"  n = f32[8,32]{1,0} negate(d)\n  ex = f32[8,32]{1,0} exponential(n)\n"
       "  den = f32[8,32]{1,0} add(ob, ex)\n  ROOT r = f32[8,32]{1,0} divide(ob, den)\n",
       "matmul(lhs, rhs) + logistic"},
      {"  ROOT r = f32[8,32]{1,0} maximum(zb, d)\n", "matmul(lhs, rhs) + relu"},
      // jax.nn.relu6 (either operand order of each), and tf.nn.relu6 as TensorFlow lowers it.
      {"  six = f32[] constant(6)\n  sixb = f32[8,32]{1,0} broadcast(six), dimensions={}\n"
       "  m = f32[8,32]{1,0} maximum(zb, d)\n  ROOT r = f32[8,32]{1,0} minimum(sixb, m)\n",
       "matmul(lhs, rhs) + relu6"},
      {"  six = f32[] constant(6)\n  ROOT r = f32[8,32]{1,0} clamp(zero, d, six)\n", "matmul(lhs, rhs) + relu6"},
      // (1 - d) / 2 * -1: 1 - d alone, as 0.5 d - 0.5 would not round as the chain does where
      // 1 - d is subnormal or past the largest float (see ALinearMapRoundsAsItsChain).
      {"  s = f32[8,32]{1,0} subtract(ob, d)\n  two = f32[] constant(2)\n"
       "  twob = f32[8,32]{1,0} broadcast(two), dimensions={}\n"
       "  q = f32[8,32]{1,0} divide(s, twob)\n  ROOT r = f32[8,32]{1,0} negate(q)\n",
       "matmul(lhs, rhs) + linear(-1x+1)"},
      // -(d / 2 - 1) = -0.5 d + 1: a power of two's scaling is exact, and the shift after it
      // rounds once either way.
      {"  two = f32[] constant(2)\n  twob = f32[8,32]{1,0} broadcast(two), dimensions={}\n"
       "  q = f32[8,32]{1,0} divide(d, twob)\n  s = f32[8,32]{1,0} subtract(q, ob)\n"
       "  ROOT r = f32[8,32]{1,0} negate(s)\n",
       "matmul(lhs, rhs) + linear(-0.5x+1)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.epilogue);
    OneDnnRewriter pass;
    auto module = Rewrite(pass, OnTopOfAProduct(c.epilogue));
    ASSERT_NE(module, nullptr);
    EXPECT_EQ(Calls(*module), c.call + "\n");
  }
}

TEST(OneDnnRewriterTest, NearMissesAreNotAbsorbed) {
  // One constant off, the operands of a non-commutative operation swapped, or a function that
  // agrees with ReLU only where one would sample it: the product is called alone (or with the
  // part that is a post-op: the negation of (1 + exp(-x)) / 1).
  const std::vector<std::pair<std::string, std::string>> cases = {
      {TfTanhGelu("0.044716", "d", "tb"), ""},
      {TfTanhGelu("0.044715", "tb", "d"), ""},  // 3^x
      {TfErfGelu("cb", "d"), ""},               // sqrt(2) / x
      {HandGroupedTanhGelu(true), ""},           // x^4 for x^3
      {"  n = f32[8,32]{1,0} negate(d)\n  ex = f32[8,32]{1,0} exponential(n)\n"
       "  den = f32[8,32]{1,0} add(ob, ex)\n  ROOT r = f32[8,32]{1,0} divide(den, ob)\n",
       " + linear(-1x+0)"},
      {"  h = f32[] constant(0.0001)\n  hb2 = f32[8,32]{1,0} broadcast(h), dimensions={}\n"
       "  ROOT r = f32[8,32]{1,0} maximum(d, hb2)\n",
       ""},
      {kPiecewiseRelu, ""},
      // max(x, -0) keeps -0 for every negative x: not a ReLU, nor is min(max(x, -0), 6) a ReLU6.
      {"  nz = f32[] constant(-0)\n  nzb = f32[8,32]{1,0} broadcast(nz), dimensions={}\n"
       "  ROOT r = f32[8,32]{1,0} maximum(d, nzb)\n",
       ""},
      {"  nz = f32[] constant(-0)\n  nzb = f32[8,32]{1,0} broadcast(nz), dimensions={}\n"
       "  six = f32[] constant(6)\n  sb = f32[8,32]{1,0} broadcast(six), dimensions={}\n"
       "  m = f32[8,32]{1,0} maximum(d, nzb)\n  ROOT r = f32[8,32]{1,0} minimum(m, sb)\n",
       ""},
      {"  nz = f32[] constant(-0)\n  six = f32[] constant(6)\n"
       "  ROOT r = f32[8,32]{1,0} clamp(nz, d, six)\n",
       ""},
      // A clamp to 0 and 5, and one with its bounds swapped (6 everywhere): no ReLU6.
      {"  five = f32[] constant(5)\n  ROOT r = f32[8,32]{1,0} clamp(zero, d, five)\n", ""},
      {"  six = f32[] constant(6)\n  ROOT r = f32[8,32]{1,0} clamp(six, d, zero)\n", ""},
      // min(max(x, 0), 7): the ReLU alone.
      {"  seven = f32[] constant(7)\n  sb = f32[8,32]{1,0} broadcast(seven), dimensions={}\n"
       "  m = f32[8,32]{1,0} maximum(d, zb)\n  ROOT r = f32[8,32]{1,0} minimum(m, sb)\n",
       " + relu"},
  };
  for (const auto& [epilogue, post_ops] : cases) {
    SCOPED_TRACE(epilogue);
    OneDnnRewriter pass;
    auto module = Rewrite(pass, OnTopOfAProduct(epilogue));
    ASSERT_NE(module, nullptr);
    EXPECT_EQ(Calls(*module), "matmul(lhs, rhs)" + post_ops + "\n");
  }
}

TEST(OneDnnRewriterTest, ALinearMapRoundsAsItsChain) {
  // One eltwise_linear alpha x + beta is taken for a chain of scalar scalings and shifts only
  // where it gives the chain's f32 result for every x: (d + 1e8) - 1e8 is not d (4 off for d
  // near 0), d * 1e37 * 1e-37 is infinite where d * 1 is not, d / 3 is not d * (1 / 3). The
  // chain ends after its first step, whose result the rest reads as a kernel of its own.
  auto constant = [](const std::string& name, const std::string& value) {
    return "  " + name + " = f32[] constant(" + value + ")\n  " + name + "b = f32[8,32]{1,0} broadcast(" +
           name + "), dimensions={}\n";
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {constant("c", "1e8") + "  s = f32[8,32]{1,0} add(d, cb)\n  ROOT r = f32[8,32]{1,0} subtract(s, cb)\n",
       " + linear(1x+1e+08)"},
      {constant("c", "1e37") + constant("k", "1e-37") +
           "  s = f32[8,32]{1,0} multiply(d, cb)\n  ROOT r = f32[8,32]{1,0} multiply(s, kb)\n",
       " + linear(1e+37x+0)"},
      {constant("c", "3") + "  ROOT r = f32[8,32]{1,0} divide(d, cb)\n", ""},
      // A shift too small to hide a flushed product, or too large to keep an infinite one.
      {constant("c", "0.25") + constant("k", "1e-35") +
           "  s = f32[8,32]{1,0} multiply(d, cb)\n  ROOT r = f32[8,32]{1,0} add(s, kb)\n",
       " + linear(0.25x+0)"},
      {constant("c", "4") + constant("k", "-1e35") +
           "  s = f32[8,32]{1,0} multiply(d, cb)\n  ROOT r = f32[8,32]{1,0} add(s, kb)\n",
       " + linear(4x+0)"},
      // Exact: a power of two's scaling and then a shift, negations anywhere.
      {constant("c", "0.25") + "  n = f32[8,32]{1,0} negate(d)\n  s = f32[8,32]{1,0} multiply(n, cb)\n"
           "  ROOT r = f32[8,32]{1,0} add(s, ob)\n",
       " + linear(-0.25x+1)"},
  };
  for (const auto& [epilogue, post_ops] : cases) {
    SCOPED_TRACE(epilogue);
    OneDnnRewriter pass;
    auto module = Rewrite(pass, OnTopOfAProduct(epilogue));
    ASSERT_NE(module, nullptr);
    EXPECT_EQ(Calls(*module), "matmul(lhs, rhs)" + post_ops + "\n");
  }
}

TEST(OneDnnRewriterTest, ConvolutionWithBiasAndRelu) {
  OneDnnRewriter pass;
  auto module = Rewrite(pass, R"(HloModule m
ENTRY e {
  x = f32[2,6,6,3]{3,2,1,0} parameter(0)
  k = f32[3,3,3,4]{3,2,1,0} parameter(1)
  b = f32[4]{0} parameter(2)
  c = f32[2,6,6,4]{3,2,1,0} convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  bb = f32[2,6,6,4]{3,2,1,0} broadcast(b), dimensions={3}
  a = f32[2,6,6,4]{3,2,1,0} add(c, bb)
  z = f32[] constant(0)
  zb = f32[2,6,6,4]{3,2,1,0} broadcast(z), dimensions={}
  ROOT r = f32[2,6,6,4]{3,2,1,0} maximum(zb, a)
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(Calls(*module), "convolution + binary_add[bias] + relu\n");
}

TEST(OneDnnRewriterTest, JaxErfGeluIsRecognised) {
  // jax.nn.gelu(x @ w + b, approximate=False) as JAX lowers it: erf spelled as piecewise
  // rational approximations with compares and selects.
  OneDnnRewriter pass;
  auto text = ReadTestFile(std::string(XLENS_SOURCE_DIR) + "/tests/runtime/testdata/dense_bias_gelu_erf.hlo");
  auto module = Rewrite(pass, text);
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(Calls(*module), "matmul(lhs, rhs) + binary_add[bias] + gelu_erf\n");
}

TEST(OneDnnRewriterTest, WhatOneDnnCannotTakeIsLeftWithAReason) {
  OneDnnRewriter pass;
  auto module = Rewrite(pass, R"(HloModule m
ENTRY e {
  x = f64[8,16]{1,0} parameter(0)
  w = f64[16,32]{1,0} parameter(1)
  ROOT d = f64[8,32]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})",
                        /*expect_change=*/false);
  ASSERT_NE(module, nullptr);
  ASSERT_EQ(pass.decisions().size(), 1u);
  EXPECT_FALSE(pass.decisions()[0].fused);
  EXPECT_THAT(pass.decisions()[0].reason, HasSubstr("f32 row-major arrays only"));
}

// The gradients of a stride-2 convolution as JAX writes them, after conv-canonicalization: the
// input's gradient reads the reversed kernel with its features swapped, the kernel's gradient
// reads the input and the output's gradient with batch and features swapped.
constexpr char kConvolutionGradients[] = R"(HloModule m
ENTRY e {
  x = f32[2,6,6,3]{3,2,1,0} parameter(0)
  k = f32[3,3,3,4]{3,2,1,0} parameter(1)
  dy = f32[2,3,3,4]{3,2,1,0} parameter(2)
  rev = f32[3,3,3,4]{3,2,1,0} reverse(k), dimensions={0,1}, metadata={op_name="jit(f)/rev"}
  tk = f32[3,3,4,3]{3,2,1,0} transpose(rev), dimensions={0,1,3,2}, metadata={op_name="jit(f)/conv_general_dilated"}
  dx = f32[2,6,6,3]{3,2,1,0} convolution(dy, tk), window={size=3x3 pad=2_1x2_1 lhs_dilate=2x2}, dim_labels=b01f_01io->b01f, metadata={op_name="jit(f)/conv_general_dilated"}
  tx = f32[3,6,6,2]{3,2,1,0} transpose(x), dimensions={3,1,2,0}, metadata={op_name="jit(f)/conv_general_dilated"}
  tdy = f32[3,3,2,4]{3,2,1,0} transpose(dy), dimensions={1,2,0,3}, metadata={op_name="jit(f)/conv_general_dilated"}
  dk = f32[3,3,3,4]{3,2,1,0} convolution(tx, tdy), window={size=3x3 pad=0_1x0_1 rhs_dilate=2x2}, dim_labels=b01f_01io->b01f, metadata={op_name="jit(f)/conv_general_dilated"}
  tdk = f32[3,3,3,4]{3,2,1,0} transpose(dk), dimensions={1,2,0,3}
  ndy = f32[3,3,2,4]{3,2,1,0} negate(tdy)
  ROOT r = (f32[2,6,6,3]{3,2,1,0}, f32[3,3,3,4]{3,2,1,0}, f32[3,3,2,4]{3,2,1,0}) tuple(dx, tdk, ndy)
})";

TEST(OneDnnRewriterTest, GradientConvolutionsReadTheirOperandsInPlace) {
  OneDnnRewriter checked;
  Rewrite(checked, kConvolutionGradients);  // the evaluator agrees before and after
  OneDnnRewriter pass;
  auto module = xlens::testing::ParseModuleOrDie(kConvolutionGradients);
  ASSERT_NE(module, nullptr);
  ASSERT_TRUE(xlens::testing::RunPassChecked(pass, *module).ok());
  EXPECT_EQ(Calls(*module), "convolution_backward_weights\nconvolution_backward_data\n");
  // The reverse and the kernel's transpose are gone; the input's transpose too; the transpose of
  // the output's gradient stays for its other user (and is read in place all the same); the
  // result's transpose is not the call's.
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kReverse), 0);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kTranspose), 2);
  const HloInstruction* data = CustomFusions(*module)[1];
  bool reverse_inside = false;
  for (const HloInstruction* i : data->fused_computation()->instructions()) {
    if (i->name() == "rev") reverse_inside = i->metadata.op_name == "jit(f)/rev";
  }
  EXPECT_TRUE(reverse_inside);
  EXPECT_EQ(data->metadata.op_name, "jit(f)/rev;jit(f)/conv_general_dilated");
  std::map<std::string, std::string> notes;
  for (const FusionDecision& d : pass.decisions()) {
    if (d.fused) notes[d.producer] = d.reason;
  }
  EXPECT_EQ(notes["rev"], "kernel read unreversed by convolution_backward_data");
  EXPECT_EQ(notes["tk"], "operand read in place through strides (no transpose)");
  EXPECT_EQ(notes["tx"], "operand read in place through strides (no transpose)");
  EXPECT_EQ(notes["tdy"], "operand read in place through strides (no transpose)");
  EXPECT_EQ(notes["dk"], "oneDNN convolution_backward_weights");
}

TEST(OneDnnRewriterTest, ConvolutionsOneDnnCannotComputeAreLeftWithAReason) {
  struct Case {
    std::string convolution, reason;
  };
  const std::vector<Case> cases = {
      {"c = f32[2,10,10,4]{3,2,1,0} convolution(x, k), window={size=3x3 pad=2_1x2_1 lhs_dilate=2x2}, dim_labels=b01f_01io->b01f",
       "base dilation without a kernel reversed in every spatial dimension"},
      {"c = f32[2,5,5,4]{3,2,1,0} convolution(x, k), window={size=3x3 stride=2x2 pad=2_1x2_1 lhs_dilate=2x2 rhs_reversal=1x1}, dim_labels=b01f_01io->b01f",
       "base dilation or a reversed kernel together with a stride"},
      {"c = f32[2,6,5,4]{3,2,1,0} convolution(x, k), window={size=3x3 pad=3_0x1_1 rhs_reversal=1x1}, dim_labels=b01f_01io->b01f",
       "padding beyond the kernel's extent in a backward-data convolution"},
      {"c = f32[2,4,3,4]{3,2,1,0} convolution(x, k), window={size=3x3 pad=-1_2x0_0}, dim_labels=b01f_01io->b01f",
       "negative padding"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.convolution);
    OneDnnRewriter pass;
    auto module = Rewrite(pass, "HloModule m\nENTRY e {\n  x = f32[2,5,5,3]{3,2,1,0} parameter(0)\n"
                                "  k = f32[3,3,3,4]{3,2,1,0} parameter(1)\n  ROOT " + c.convolution + "\n}\n",
                          /*expect_change=*/false);
    ASSERT_NE(module, nullptr);
    ASSERT_EQ(pass.decisions().size(), 1u);
    EXPECT_FALSE(pass.decisions()[0].fused);
    EXPECT_EQ(pass.decisions()[0].reason, c.reason + "; left to Eigen");
  }
  // Activations that do not lie channels-last (the input's features outermost) stay too.
  OneDnnRewriter pass;
  auto module = Rewrite(pass, R"(HloModule m
ENTRY e {
  x = f32[3,2,5,5]{3,2,1,0} parameter(0)
  k = f32[3,3,3,4]{3,2,1,0} parameter(1)
  ROOT c = f32[2,5,5,4]{3,2,1,0} convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=fb01_01io->b01f
})",
                        /*expect_change=*/false);
  ASSERT_NE(module, nullptr);
  ASSERT_EQ(pass.decisions().size(), 1u);
  EXPECT_THAT(pass.decisions()[0].reason, HasSubstr("channels-last"));
}

}  // namespace
}  // namespace xlens
