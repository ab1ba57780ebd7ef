#include "compiler/cli/commands.h"

#include <cstdio>
#include <filesystem>
#include <random>

#include <fmt/format.h>

#include "compiler/hlo/dot_printer.h"
#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/npy.h"
#include "compiler/hlo/parser.h"
#include "compiler/hlo/printer.h"
#include "compiler/hlo/random_literal.h"
#include "compiler/hlo/verifier.h"
#include "compiler/support/file_io.h"

namespace xlens::cli {

namespace {

int Fail(const Status& status) {
  std::fprintf(stderr, "xlens: %s\n", status.message().c_str());
  return 1;
}

StatusOr<std::unique_ptr<HloModule>> LoadModule(const std::string& path, bool verify) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseHloModule(text, ParseOptions{.verify = verify, .filename = path});
}

// Every leaf of a (possibly tuple) literal, in order.
void CollectLeaves(const Literal& literal, std::vector<const Literal*>& leaves) {
  if (literal.shape().IsTuple()) {
    for (const Literal& e : literal.tuple_elements()) CollectLeaves(e, leaves);
    return;
  }
  leaves.push_back(&literal);
}

// A literal for a terminal: whole when small, the first and last elements otherwise.
std::string Summarize(const Literal& literal) {
  constexpr int64_t kShown = 8;
  int64_t n = literal.element_count();
  if (n <= 2 * kShown || literal.shape().rank() == 0) return literal.ToStringWithoutShape();
  std::vector<std::string> head, tail;
  for (int64_t i = 0; i < kShown; ++i) head.push_back(literal.ElementToString(i));
  for (int64_t i = n - kShown; i < n; ++i) tail.push_back(literal.ElementToString(i));
  return fmt::format("{{{}, ... {} more ..., {}}} (flattened)", fmt::join(head, ", "),
                     n - 2 * kShown, fmt::join(tail, ", "));
}

StatusOr<std::vector<Literal>> LoadInputs(const HloComputation& entry, const std::string& dir,
                                          uint64_t seed) {
  std::vector<Literal> args;
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < entry.num_parameters(); ++i) {
    const HloInstruction* param = entry.parameter_instruction(i);
    if (dir.empty()) {
      ASSIGN_OR_RETURN(Literal lit, MakeRandomLiteral(param->shape(), rng));
      args.push_back(std::move(lit));
      continue;
    }
    std::string path = fmt::format("{}/arg{}.npy", dir, i);
    if (!std::filesystem::exists(path)) {
      return Error(fmt::format("{}: missing: parameter {} (%{}: {}) needs it", path, i,
                               param->name(), param->shape().ToString(false)));
    }
    ASSIGN_OR_RETURN(Literal lit, ReadNpy(path));
    if (!shape_util::Compatible(lit.shape(), param->shape())) {
      return Error(fmt::format("{}: holds {} but parameter {} (%{}) expects {}", path,
                               lit.shape().ToString(false), i, param->name(),
                               param->shape().ToString(false)));
    }
    if (param->shape().has_layout()) lit.set_layout(param->shape().layout());
    args.push_back(std::move(lit));
  }
  return args;
}

}  // namespace

int RunPrint(const PrintArgs& args) {
  auto module = LoadModule(args.file, args.verify);
  if (!module.ok()) return Fail(module.status());
  std::fputs(PrintModule(**module, PrintOptions{.short_form = args.short_form}).c_str(), stdout);
  return 0;
}

int RunVerify(const VerifyArgs& args) {
  auto module = LoadModule(args.file, /*verify=*/true);
  if (!module.ok()) return Fail(module.status());
  std::printf("%s: OK: module %s, %lld computations, %lld instructions\n", args.file.c_str(),
              (*module)->name().c_str(), static_cast<long long>((*module)->computation_count()),
              static_cast<long long>((*module)->instruction_count()));
  return 0;
}

int RunDot(const DotArgs& args) {
  auto module = LoadModule(args.file, /*verify=*/false);
  if (!module.ok()) return Fail(module.status());
  DotOptions options;
  options.center = args.node;
  options.radius = args.radius;
  options.max_nodes = args.max_nodes;
  auto dot = ModuleToDot(**module, options);
  if (!dot.ok()) return Fail(dot.status());
  if (args.output.empty()) {
    std::fputs(dot->c_str(), stdout);
    return 0;
  }
  Status written = WriteFileAtomic(args.output, *dot);
  if (!written.ok()) return Fail(written);
  return 0;
}

int RunEval(const EvalArgs& args) {
  auto module = LoadModule(args.file, /*verify=*/true);
  if (!module.ok()) return Fail(module.status());
  auto inputs = LoadInputs(*(*module)->entry_computation(), args.inputs, args.seed);
  if (!inputs.ok()) return Fail(inputs.status());
  auto result = EvaluateModule(**module, *inputs);
  if (!result.ok()) return Fail(result.status().WithContext(args.file));
  std::vector<const Literal*> leaves;
  CollectLeaves(*result, leaves);
  if (!args.outputs.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(args.outputs, ec);
    if (ec) return Fail(Error(fmt::format("{}: cannot create: {}", args.outputs, ec.message())));
    for (size_t i = 0; i < leaves.size(); ++i) {
      std::string path = fmt::format("{}/out{}.npy", args.outputs, i);
      Status written = WriteNpy(path, *leaves[i]);
      if (!written.ok()) return Fail(written);
      std::printf("wrote %s (%s)\n", path.c_str(), leaves[i]->shape().ToString(false).c_str());
    }
    return 0;
  }
  for (size_t i = 0; i < leaves.size(); ++i) {
    std::printf("out%zu: %s %s\n", i, leaves[i]->shape().ToString(false).c_str(),
                Summarize(*leaves[i]).c_str());
  }
  return 0;
}

}  // namespace xlens::cli
