// HLO text of modules nested as deep as a test asks: the inputs that once exhausted the stack of
// every walker that recursed per call.
#pragma once

#include <string>

#include <fmt/format.h>

namespace xlens::testing {

// ENTRY calls c{depth-1}, which calls c{depth-2}, ... c0 adds its parameter to itself: f(x) = 2x.
inline std::string NestedCallsText(int depth) {
  std::string text = "HloModule nested_calls\n\nc0 {\n  p = f32[] parameter(0)\n  ROOT r = f32[] add(p, p)\n}\n";
  for (int i = 1; i < depth; ++i) {
    text += fmt::format("c{} {{\n  p = f32[] parameter(0)\n  ROOT r = f32[] call(p), to_apply=c{}\n}}\n",
                        i, i - 1);
  }
  text += fmt::format("ENTRY e {{\n  p = f32[] parameter(0)\n  ROOT r = f32[] call(p), to_apply=c{}\n}}\n",
                      depth - 1);
  return text;
}

// Level i runs level i-1 through, in turn, a fusion, a conditional (selecting branch 1 of 2) and
// a while loop that runs its body once (the state is (counter, value)); level 0 adds 1.
// f(x) = x + 1 however deep.
inline std::string NestedControlFlowText(int depth) {
  std::string text =
      "HloModule nested_control_flow\n\n"
      "l0 {\n  p = f32[] parameter(0)\n  one = f32[] constant(1)\n  ROOT r = f32[] add(p, one)\n}\n"
      "never {\n  p = f32[] parameter(0)\n  ROOT r = f32[] negate(p)\n}\n";
  for (int i = 1; i < depth; ++i) {
    switch (i % 3) {
      case 0:
        text += fmt::format(
            "l{} {{\n  p = f32[] parameter(0)\n  ROOT r = f32[] fusion(p), kind=kLoop, calls=l{}\n}}\n",
            i, i - 1);
        break;
      case 1:
        text += fmt::format(
            "l{} {{\n  p = f32[] parameter(0)\n  b = s32[] constant(1)\n"
            "  ROOT r = f32[] conditional(b, p, p), branch_computations={{never, l{}}}\n}}\n",
            i, i - 1);
        break;
      default:
        text += fmt::format(
            "cond{0} {{\n  s = (s32[], f32[]) parameter(0)\n  n = s32[] get-tuple-element(s), index=0\n"
            "  z = s32[] constant(0)\n  ROOT c = pred[] compare(n, z), direction=EQ\n}}\n"
            "body{0} {{\n  s = (s32[], f32[]) parameter(0)\n  n = s32[] get-tuple-element(s), index=0\n"
            "  v = f32[] get-tuple-element(s), index=1\n  one = s32[] constant(1)\n"
            "  m = s32[] add(n, one)\n  w = f32[] call(v), to_apply=l{1}\n"
            "  ROOT t = (s32[], f32[]) tuple(m, w)\n}}\n"
            "l{0} {{\n  p = f32[] parameter(0)\n  z = s32[] constant(0)\n"
            "  i = (s32[], f32[]) tuple(z, p)\n"
            "  w = (s32[], f32[]) while(i), condition=cond{0}, body=body{0}\n"
            "  ROOT r = f32[] get-tuple-element(w), index=1\n}}\n",
            i, i - 1);
        break;
    }
  }
  text += fmt::format("ENTRY e {{\n  p = f32[] parameter(0)\n  ROOT r = f32[] call(p), to_apply=l{}\n}}\n",
                      depth - 1);
  return text;
}

// ENTRY maps m{depth-1} over an f32[2], whose body maps m{depth-2} over its scalar, ... m0 doubles.
// Each level applies the next element by element: a nesting the evaluator runs on the machine
// stack and bounds.
inline std::string NestedMapsText(int depth) {
  std::string text = "HloModule nested_maps\n\nm0 {\n  a = f32[] parameter(0)\n  ROOT r = f32[] add(a, a)\n}\n";
  for (int i = 1; i < depth; ++i) {
    text += fmt::format("m{} {{\n  a = f32[] parameter(0)\n  ROOT r = f32[] map(a), dimensions={{}}, to_apply=m{}\n}}\n",
                        i, i - 1);
  }
  text += fmt::format("ENTRY e {{\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] map(p), dimensions={{0}}, to_apply=m{}\n}}\n",
                      depth - 1);
  return text;
}

}  // namespace xlens::testing
