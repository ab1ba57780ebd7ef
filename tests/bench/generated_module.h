// A generated module for benchmarks: parameters, then a mix of elementwise ops, broadcasts and
// reductions, each reading recent values, in XLA's long form with metadata, as a traced model
// looks. tests/bench/parse_vs_xla.py writes the same module for XLA.
#pragma once

#include <string>

#include <fmt/format.h>

namespace xlens::bench {

// A module of `n` instructions: four parameters, then a mix of elementwise ops, broadcasts and
// reductions, each reading recent values, written in XLA's long form.
inline std::string MakeLargeModuleText(int n) {
  std::string text = "HloModule large\n\nadd { a = f32[] parameter(0) b = f32[] parameter(1) "
                     "ROOT s = f32[] add(a, b) }\n\nENTRY %main {\n";
  for (int i = 0; i < 4; ++i) {
    text += fmt::format("  %v{} = f32[16,8]{{1,0}} parameter({})\n", i, i);
  }
  text += "  %zero = f32[] constant(0)\n";
  const char* ops[] = {"add", "multiply", "subtract", "maximum"};
  int i = 4;
  for (; i < n - 1; ++i) {
    if (i % 10 == 0) {
      text += fmt::format("  %r{} = f32[16]{{0}} reduce(f32[16,8]{{1,0}} %v{}, f32[] %zero), "
                          "dimensions={{1}}, to_apply=add\n", i, i - 1);
      text += fmt::format("  %v{} = f32[16,8]{{1,0}} broadcast(f32[16]{{0}} %r{}), dimensions={{0}}, "
                          "metadata={{op_type=\"Sum\" op_name=\"layer{}/sum\"}}\n", i, i, i);
      ++i;
      text += fmt::format("  %v{} = f32[16,8]{{1,0}} negate(f32[16,8]{{1,0}} %v{})\n", i, i - 1);
      continue;
    }
    text += fmt::format("  %v{} = f32[16,8]{{1,0}} {}(f32[16,8]{{1,0}} %v{}, f32[16,8]{{1,0}} %v{}), "
                        "metadata={{op_type=\"Op\" op_name=\"layer{}/op\"}}\n",
                        i, ops[i % 4], i - 1, i - 3, i);
  }
  text += fmt::format("  ROOT %out = f32[16,8]{{1,0}} copy(f32[16,8]{{1,0}} %v{})\n}}\n", i - 1);
  return text;
}

// A chain of `n` instructions (and one more reduce per 1,000), the shape of a deep unrolled model: one parameter, then
// elementwise ops each reading the one before (add, multiply, exponential, negate, subtract,
// maximum in turn), a row reduction broadcast back every 1,000, and a reduction at the end. With
// `fan_out`, binary ops also read the value three steps back, so values have several users.
inline std::string MakeChainModuleText(int n, bool fan_out = false) {
  std::string text = "HloModule chain\n\nadd { a = f32[] parameter(0) b = f32[] parameter(1) "
                     "ROOT s = f32[] add(a, b) }\n\nENTRY %main {\n"
                     "  %v0 = f32[64,32]{1,0} parameter(0)\n  %zero = f32[] constant(0)\n";
  const char* ops[] = {"add", "multiply", "exponential", "negate", "subtract", "maximum"};
  int i = 1;
  for (; i < n - 3; ++i) {
    const char* op = ops[i % 6];
    if (i % 1000 == 500) {
      text += fmt::format("  %r{} = f32[64]{{0}} reduce(f32[64,32]{{1,0}} %v{}, f32[] %zero), "
                          "dimensions={{1}}, to_apply=add\n", i, i - 1);
      text += fmt::format("  %v{} = f32[64,32]{{1,0}} broadcast(f32[64]{{0}} %r{}), "
                          "dimensions={{0}}\n", i, i);
    } else if (i % 6 == 2 || i % 6 == 3) {
      text += fmt::format("  %v{} = f32[64,32]{{1,0}} {}(f32[64,32]{{1,0}} %v{}), "
                          "metadata={{op_type=\"Op\" op_name=\"layer{}/op\"}}\n",
                          i, op, i - 1, i / 100);
    } else {
      const int other = fan_out && i > 3 ? i - 3 : i - 1;
      text += fmt::format("  %v{} = f32[64,32]{{1,0}} {}(f32[64,32]{{1,0}} %v{}, "
                          "f32[64,32]{{1,0}} %v{}), metadata={{op_type=\"Op\" "
                          "op_name=\"layer{}/op\"}}\n",
                          i, op, i - 1, other, i / 100);
    }
  }
  text += fmt::format("  %r = f32[64]{{0}} reduce(f32[64,32]{{1,0}} %v{}, f32[] %zero), "
                      "dimensions={{1}}, to_apply=add\n", i - 1);
  text += "  ROOT %out = f32[64]{0} negate(f32[64]{0} %r)\n}\n";
  return text;
}

}  // namespace xlens::bench
