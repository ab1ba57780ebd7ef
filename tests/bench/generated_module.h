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

}  // namespace xlens::bench
