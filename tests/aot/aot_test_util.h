// Ahead-of-time objects in tests: linked with a C driver into a program of their own (by the
// host's cc, or a cross compiler), run (under qemu-user for another machine), results read back.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "compiler/aot/aot_compiler.h"
#include "compiler/hlo/literal.h"
#include "compiler/support/file_io.h"
#include "compiler/support/subprocess.h"

namespace xlens::aot {

// The array leaves of literals, depth-first: the entry function's arguments or results.
inline void AppendLeaves(const Literal& literal, std::vector<const Literal*>& leaves) {
  if (literal.shape().IsTuple()) {
    for (const Literal& element : literal.tuple_elements()) AppendLeaves(element, leaves);
  } else if (literal.shape().IsArray()) {
    leaves.push_back(&literal);
  }
}
inline std::vector<const Literal*> LeavesOf(const std::vector<Literal>& literals) {
  std::vector<const Literal*> leaves;
  for (const Literal& literal : literals) AppendLeaves(literal, leaves);
  return leaves;
}

// Reads the arguments (arg<i>.bin), calls the entry function, writes result<j>.bin: sizes are
// written into it from the AotResult, as the generated header does for a C++ program.
inline std::string DriverSource(const AotResult& compiled, const std::string& entry) {
  std::vector<std::string> arg_sizes, result_sizes;
  for (const AotBuffer& a : compiled.arguments) arg_sizes.push_back(std::to_string(a.byte_size));
  for (const AotBuffer& r : compiled.results) result_sizes.push_back(std::to_string(r.byte_size));
  arg_sizes.push_back("0");  // C has no empty array initializer
  result_sizes.push_back("0");
  return fmt::format(R"(#include <stdio.h>
#include <stdlib.h>
#include <string.h>
extern void {0}(const void* const* args, void* const* results, void* temp);
static const long arg_sizes[] = {{{1}}};
static const long result_sizes[] = {{{2}}};
static void* buffer(long size) {{
  void* p = aligned_alloc(64, (size + 127) / 64 * 64);
  memset(p, 0x7f, (size + 127) / 64 * 64);  /* garbage: nothing may read before it writes */
  return p;
}}
int main(int argc, char** argv) {{
  char path[4096];
  const void* args[{3} + 1];
  void* results[{4} + 1];
  for (int i = 0; i < {3}; ++i) {{
    snprintf(path, sizeof path, "%s/arg%d.bin", argv[1], i);
    FILE* f = fopen(path, "rb");
    void* p = buffer(arg_sizes[i]);
    if (f == NULL || fread(p, 1, arg_sizes[i], f) != (size_t)arg_sizes[i]) return 2;
    fclose(f);
    args[i] = p;
  }}
  for (int j = 0; j < {4}; ++j) results[j] = buffer(result_sizes[j]);
  {0}(args, results, buffer({5}));
  for (int j = 0; j < {4}; ++j) {{
    snprintf(path, sizeof path, "%s/result%d.bin", argv[1], j);
    FILE* f = fopen(path, "wb");
    if (f == NULL || fwrite(results[j], 1, result_sizes[j], f) != (size_t)result_sizes[j]) return 3;
    fclose(f);
  }}
  return 0;
}}
)",
                     entry, fmt::join(arg_sizes, ", "), fmt::join(result_sizes, ", "),
                     compiled.arguments.size(), compiled.results.size(), compiled.temp_bytes);
}

inline bool HaveProgram(const std::string& name) {
  auto outcome = RunCommand({"sh", "-c", "command -v " + ShellQuote(name)}, 30);
  return outcome.ok() && outcome->exit_code == 0 && outcome->signal == 0;
}

struct Toolchain {
  std::vector<std::string> link;        // the C compiler and its flags; then -o, sources, -lm
  std::vector<std::string> run_prefix;  // qemu-aarch64 for a foreign program
};

// The program's results, one literal per result of `compiled`.
inline StatusOr<std::vector<Literal>> LinkAndRun(const AotResult& compiled, const std::string& entry,
                                          const std::vector<const Literal*>& arguments,
                                          const std::vector<Shape>& result_shapes,
                                          const Toolchain& toolchain, const std::string& dir) {
  const std::string object = dir + "/model.o", driver = dir + "/driver.c", program = dir + "/program";
  RETURN_IF_ERROR(WriteFile(object, compiled.object));
  RETURN_IF_ERROR(WriteFile(driver, DriverSource(compiled, entry)));
  for (size_t i = 0; i < arguments.size(); ++i) {
    const Literal& a = *arguments[i];
    RETURN_IF_ERROR(WriteFile(fmt::format("{}/arg{}.bin", dir, i),
                              std::string_view(reinterpret_cast<const char*>(a.untyped_data()),
                                               a.size_bytes())));
  }
  std::vector<std::string> link = toolchain.link;
  for (const std::string& s : {std::string("-o"), program, driver, object, std::string("-lm")}) {
    link.push_back(s);
  }
  ASSIGN_OR_RETURN(CommandOutcome linked, RunCommand(link, 120));
  if (linked.exit_code != 0 || linked.signal != 0) {
    return Error(fmt::format("linking failed ({}): {}", linked.Describe(120), linked.output));
  }
  std::vector<std::string> run = toolchain.run_prefix;
  run.push_back(program);
  run.push_back(dir);
  ASSIGN_OR_RETURN(CommandOutcome ran, RunCommand(run, 120));
  if (ran.exit_code != 0 || ran.signal != 0) {
    return Error(fmt::format("the program failed ({}): {}", ran.Describe(120), ran.output));
  }
  std::vector<Literal> results;
  for (size_t j = 0; j < result_shapes.size(); ++j) {
    ASSIGN_OR_RETURN(std::string bytes, ReadFile(fmt::format("{}/result{}.bin", dir, j)));
    Literal r(result_shapes[j]);
    if (bytes.size() != r.size_bytes()) return Error(fmt::format("result {}: wrong size", j));
    std::memcpy(r.untyped_data(), bytes.data(), bytes.size());
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace xlens::aot
