// dynamic-update-slice runs as a copy of the update into place (dynamic_update_slice_thunk.h):
// the same results as the evaluator for starts inside, past the end (clamped) and negative, for
// s32 and s64 indices, in a loop that updates its state in place and outside one, and the thunk
// sequence says it is that thunk, not a kernel.
#include <gtest/gtest.h>

#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/literal_comparison.h"
#include "compiler/hlo/parser.h"
#include "compiler/runtime/cpu_compiler.h"

namespace xlens::runtime {
namespace {

void CheckAgainstEvaluator(const std::string& text, std::vector<Literal> args) {
  auto module = ParseHloModule(text);
  ASSERT_TRUE(module.ok()) << module.status().message();
  auto expected = EvaluateModule(**module, args);
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  auto executable = CompileForCpu(std::move(*module), {});
  ASSERT_TRUE(executable.ok()) << executable.status().message();
  EXPECT_NE((*executable)->ThunkSequenceText().find("dynamic-update-slice"), std::string::npos)
      << (*executable)->ThunkSequenceText();
  auto got = (*executable)->Execute(args);
  ASSERT_TRUE(got.ok()) << got.status().message();
  Status same = ExpectLiteralNear(*expected, *got, ErrorSpec{0, 0});
  EXPECT_TRUE(same.ok()) << same.message();
}

Literal Iota(PrimitiveType type, std::vector<int64_t> dims) {
  Literal l(Shape(type, dims));
  for (int64_t i = 0; i < l.element_count(); ++i) l.SetFromDouble(i, static_cast<double>(i));
  return l;
}

Literal Scalar(PrimitiveType type, int64_t v) {
  Literal l(Shape(type, {}));
  l.SetFromInt64(0, v);
  return l;
}

TEST(DynamicUpdateSliceThunkTest, StartsInsidePastTheEndAndNegativeAreClampedAsXla) {
  const char* text = R"(HloModule m
ENTRY e {
  p = f32[5,6,3] parameter(0)
  u = f32[2,4,3] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  z = s32[] constant(0)
  ROOT d = f32[5,6,3] dynamic-update-slice(p, u, i, j, z)
})";
  for (auto [i, j] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {4, 9}, {-3, 2}, {3, 2}}) {
    std::vector<Literal> args;
    args.push_back(Iota(PrimitiveType::F32, {5, 6, 3}));
    Literal u(Shape(PrimitiveType::F32, {2, 4, 3}));
    for (int64_t k = 0; k < u.element_count(); ++k) u.SetFromDouble(k, -1.0 - k);
    args.push_back(std::move(u));
    args.push_back(Scalar(PrimitiveType::S32, i));
    args.push_back(Scalar(PrimitiveType::S32, j));
    CheckAgainstEvaluator(text, std::move(args));
  }
}

TEST(DynamicUpdateSliceThunkTest, ALoopWritesOneRowPerStepInPlace) {
  const char* text = R"(HloModule m
body {
  s = (s64[], f32[8,4]) parameter(0)
  i = s64[] get-tuple-element(s), index=0
  buf = f32[8,4] get-tuple-element(s), index=1
  z = s64[] constant(0)
  row = f32[1,4] dynamic-slice(buf, i, z), dynamic_slice_sizes={1,4}
  two = f32[1,4] constant({{2, 2, 2, 2}})
  e = f32[1,4] multiply(row, two)
  upd = f32[8,4] dynamic-update-slice(buf, e, i, z)
  one = s64[] constant(1)
  next = s64[] add(i, one)
  ROOT t = (s64[], f32[8,4]) tuple(next, upd)
}
cond {
  s = (s64[], f32[8,4]) parameter(0)
  i = s64[] get-tuple-element(s), index=0
  n = s64[] constant(8)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  p = f32[8,4] parameter(0)
  zero = s64[] constant(0)
  init = (s64[], f32[8,4]) tuple(zero, p)
  w = (s64[], f32[8,4]) while(init), condition=cond, body=body
  ROOT r = f32[8,4] get-tuple-element(w), index=1
})";
  std::vector<Literal> args;
  args.push_back(Iota(PrimitiveType::F32, {8, 4}));
  CheckAgainstEvaluator(text, std::move(args));
}

}  // namespace
}  // namespace xlens::runtime
