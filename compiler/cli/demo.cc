// `xlens demo`: the main job a new user runs first. A built-in module, reduce_sum(x + y*z), goes
// through the HLO core: parsed, verified, evaluated on random inputs (checked against a direct
// double-precision computation), printed and drawn, then optimized by the CPU pipeline with every
// pass dumped as XLA dumps it, compiled to CPU code that runs and is checked against the
// evaluator, and compiled to PTX for an NVIDIA GPU.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

#include <fmt/format.h>

#include "compiler/cli/commands.h"
#include "compiler/hlo/dot_printer.h"
#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/npy.h"
#include "compiler/hlo/parser.h"
#include "compiler/hlo/printer.h"
#include "compiler/hlo/random_literal.h"
#include "compiler/hlo/verifier.h"
#include "compiler/passes/hlo_optimizer.h"
#include "compiler/runtime/cpu_compiler.h"
#include "compiler/runtime/cuda_driver.h"
#include "compiler/runtime/gpu_compiler.h"
#include "compiler/runtime/gpu_executable.h"
#include "dump/graphviz.h"
#include "dump/manifest.h"
#include "compiler/support/file_io.h"

namespace xlens::cli {

namespace {

constexpr const char* kDemoModule = R"(HloModule reduce_sum_xyz

%add_f32 (lhs: f32[], rhs: f32[]) -> f32[] {
  %lhs = f32[] parameter(0)
  %rhs = f32[] parameter(1)
  ROOT %add = f32[] add(f32[] %lhs, f32[] %rhs)
}

ENTRY %main (x: f32[1024], y: f32[1024], z: f32[1024]) -> f32[] {
  %x = f32[1024]{0} parameter(0), metadata={op_type="Placeholder" op_name="x"}
  %y = f32[1024]{0} parameter(1), metadata={op_type="Placeholder" op_name="y"}
  %z = f32[1024]{0} parameter(2), metadata={op_type="Placeholder" op_name="z"}
  %multiply = f32[1024]{0} multiply(f32[1024]{0} %y, f32[1024]{0} %z), metadata={op_type="Mul" op_name="mul"}
  %add.1 = f32[1024]{0} add(f32[1024]{0} %x, f32[1024]{0} %multiply), metadata={op_type="AddV2" op_name="add"}
  %zero = f32[] constant(0)
  ROOT %reduce = f32[] reduce(f32[1024]{0} %add.1, f32[] %zero), dimensions={0}, to_apply=%add_f32, metadata={op_type="Sum" op_name="reduce_sum"}
}
)";

int Fail(const Status& status) {
  std::fprintf(stderr, "xlens demo: %s\n", status.message().c_str());
  return 1;
}

}  // namespace

int RunDemo(const DemoArgs& args) {
  namespace fs = std::filesystem;
  std::printf("xlens demo: reduce_sum(x + y*z) through the HLO core\n\n");

  auto parsed = ParseHloModule(kDemoModule, ParseOptions{.verify = false, .filename = "<demo>"});
  if (!parsed.ok()) return Fail(parsed.status());
  HloModule& module = **parsed;
  std::printf("  parse     module %s: %lld computations, %lld instructions\n",
              module.name().c_str(), static_cast<long long>(module.computation_count()),
              static_cast<long long>(module.instruction_count()));
  Status verified = VerifyModule(module);
  if (!verified.ok()) return Fail(verified);
  std::printf("  verify    ok: every shape agrees with shape inference\n");

  std::mt19937_64 rng(args.seed);
  std::vector<Literal> inputs;
  for (const HloInstruction* param : module.entry_computation()->parameter_instructions()) {
    auto lit = MakeRandomLiteral(param->shape(), rng);
    if (!lit.ok()) return Fail(lit.status());
    inputs.push_back(std::move(*lit));
  }
  std::printf("  inputs    x, y, z: f32[1024], uniform in [-1, 1), seed %llu\n",
              static_cast<unsigned long long>(args.seed));

  auto result = EvaluateModule(module, inputs);
  if (!result.ok()) return Fail(result.status());
  double evaluated = result->GetAsDouble(0);
  double expected = 0;
  for (int64_t i = 0; i < 1024; ++i) {
    expected += inputs[0].GetAsDouble(i) + inputs[1].GetAsDouble(i) * inputs[2].GetAsDouble(i);
  }
  double error = std::fabs(evaluated - expected);
  std::printf("  evaluate  reduce_sum = %.6f (direct sum in f64: %.6f, |difference| %.1e)\n",
              evaluated, expected, error);
  if (error > 1e-3) {
    return Fail(Error(fmt::format("the evaluator disagrees with the direct sum by {}", error)));
  }

  if (Status made = CreateDirectories(args.out_dir); !made.ok()) return Fail(made);
  std::string base = fmt::format("{}/{}", args.out_dir, module.name());
  Status status = WriteFileAtomic(base + ".txt", PrintModule(module));
  if (!status.ok()) return Fail(status);
  auto dot = ModuleToDot(module, DotOptions{});
  if (!dot.ok()) return Fail(dot.status());
  status = WriteFileAtomic(base + ".dot", *dot);
  if (!status.ok()) return Fail(status);
  for (size_t i = 0; i < inputs.size(); ++i) {
    status = WriteNpy(fmt::format("{}/arg{}.npy", args.out_dir, i), inputs[i]);
    if (!status.ok()) return Fail(status);
  }
  status = WriteNpy(fmt::format("{}/out0.npy", args.out_dir), *result);
  if (!status.ok()) return Fail(status);
  std::printf("  print     %s.txt (HLO text, XLA's long form)\n", base.c_str());
  std::printf("  draw      %s.dot", base.c_str());
  // Graphviz is optional: without it the demo just has no picture.
  if (auto svg = RenderDotToSvg(*dot); svg.ok() && WriteFile(base + ".svg", *svg).ok()) {
    std::printf(", %s.svg", base.c_str());
  }
  std::printf("\n  tensors   %s/arg0.npy arg1.npy arg2.npy (inputs), out0.npy (result)\n",
              args.out_dir.c_str());

  // The CPU pipeline with every pass dumped, as XLA_FLAGS="--xla_dump_to=DIR
  // --xla_dump_hlo_pass_re=.* --xla_dump_hlo_as_text --xla_dump_hlo_as_dot" would.
  std::string dump_dir = args.out_dir + "/dump";
  std::error_code ignored;
  fs::remove_all(dump_dir, ignored);
  DebugOptions flags;
  flags.xla_dump_to = dump_dir;
  flags.xla_dump_hlo_as_text = true;
  flags.xla_dump_hlo_as_dot = true;
  flags.xla_dump_hlo_pass_re = ".*";
  // The CPU compiler runs the pipeline with every pass dumped, then generates and JIT-compiles
  // the kernels.
  std::unique_ptr<runtime::Executable> executable;
  {
    DumpContext dump(flags);
    auto fresh = ParseHloModule(kDemoModule, ParseOptions{.verify = true, .filename = "<demo>"});
    if (!fresh.ok()) return Fail(fresh.status());
    runtime::CompileOptions options;
    options.optimize.dump = &dump;
    auto compiled = runtime::CompileForCpu(std::move(*fresh), options);
    if (!compiled.ok()) return Fail(compiled.status());
    executable = std::move(*compiled);
  }
  const OptimizeResult& optimized = executable->optimize_result();
  int64_t changed = 0;
  for (const PassEvent& e : optimized.events) changed += e.changed;
  std::printf("  optimize  cpu pipeline: %zu passes, %lld changed the module; %lld kernels -> %lld\n",
              optimized.events.size(), static_cast<long long>(changed),
              static_cast<long long>(optimized.kernels_before),
              static_cast<long long>(optimized.kernels_after));
  for (const FusionDecision& d : optimized.fusion_decisions) {
    std::printf("              %s\n", d.ToString().c_str());
  }
  auto fused = EvaluateModule(executable->module(), inputs);
  if (!fused.ok()) return Fail(fused.status());
  double fused_sum = fused->GetAsDouble(0);
  std::printf("  check     the optimized module evaluates to %.6f (|difference| %.1e)\n", fused_sum,
              std::fabs(fused_sum - evaluated));
  if (std::fabs(fused_sum - evaluated) > 1e-3) {
    return Fail(Error("the optimized module computes something else"));
  }

  // The compiled kernels, run on this machine's CPU and checked against the evaluator.
  std::vector<std::string> kernel_names;
  for (const runtime::KernelInfo& k : executable->kernels()) kernel_names.push_back(k.hlo_instruction);
  std::printf("  compile   cpu: %zu kernel%s (%s), LLVM -O3 through the ORC JIT, %.1f ms\n",
              executable->kernels().size(), executable->kernels().size() == 1 ? "" : "s",
              fmt::format("{}", fmt::join(kernel_names, ", ")).c_str(), executable->compile_ns() / 1e6);
  if (Status s = executable->SetArguments(inputs); !s.ok()) return Fail(s);
  constexpr int kRuns = 100;
  (void)executable->Run();
  std::vector<int64_t> thunk_ns;
  std::vector<double> run_us;
  for (int i = 0; i < kRuns; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (Status s = executable->Run(&thunk_ns); !s.ok()) return Fail(s);
    run_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(run_us.begin(), run_us.end());
  auto compiled_result = executable->Results();
  if (!compiled_result.ok()) return Fail(compiled_result.status());
  const double compiled_sum = compiled_result->GetAsDouble(0);
  std::printf("  run       reduce_sum = %.6f on the CPU (|difference| from the evaluator %.1e); "
              "median %.2f us over %d runs\n",
              compiled_sum, std::fabs(compiled_sum - evaluated), run_us[kRuns / 2], kRuns);
  if (std::fabs(compiled_sum - evaluated) > 1e-3) {
    return Fail(Error("the compiled module computes something else than the evaluator"));
  }
  for (size_t i = 0; i < executable->thunks().size(); ++i) {
    std::string line = executable->thunks()[i]->ToString(0);
    if (!line.empty() && line.back() == '\n') line.pop_back();
    std::printf("              %7.2f us  %s\n", thunk_ns[i] / 1e3 / kRuns, line.c_str());
  }
  // PTX needs no GPU; running it does.
  {
    auto fresh = ParseHloModule(kDemoModule, ParseOptions{.verify = true, .filename = "<demo>"});
    if (!fresh.ok()) return Fail(fresh.status());
    auto ptx = runtime::CompileForGpuToPtx(std::move(*fresh), {});
    if (ptx.ok()) {
      Status written = WriteFileAtomic(base + ".ptx", ptx->ptx);
      if (!written.ok()) return Fail(written);
      std::printf("  ptx       sm_90: %zu kernel%s (", ptx->kernels.size(), ptx->kernels.size() == 1 ? "" : "s");
      for (size_t i = 0; i < ptx->kernels.size(); ++i) {
        std::printf("%s%s: grid %lld, block %lld", i ? "; " : "", ptx->kernels[i].name.c_str(),
                    static_cast<long long>(ptx->kernels[i].blocks),
                    static_cast<long long>(ptx->kernels[i].threads_per_block));
      }
      std::printf(") -> %s.ptx\n", base.c_str());
    } else {
      std::printf("  ptx       not written: %s\n", ptx.status().message().c_str());
    }
  }
  if (auto device = runtime::OpenCudaDevice(); !device.ok()) {
    std::printf("  gpu       not run here: %s\n", device.status().message().c_str());
  } else {
    auto fresh = ParseHloModule(kDemoModule, ParseOptions{.verify = true, .filename = "<demo>"});
    if (!fresh.ok()) return Fail(fresh.status());
    auto gpu = runtime::GpuExecutable::Create(std::move(*fresh), {}, **device);
    auto gpu_result = gpu.ok() ? (*gpu)->Execute(inputs) : StatusOr<Literal>(gpu.status());
    if (!gpu_result.ok()) return Fail(gpu_result.status().WithContext("gpu"));
    const double gpu_sum = gpu_result->GetAsDouble(0);
    std::printf("  gpu       reduce_sum = %.6f on %s (|difference| from the evaluator %.1e)\n", gpu_sum,
                (*device)->arch().c_str(), std::fabs(gpu_sum - evaluated));
    if (std::fabs(gpu_sum - evaluated) > 1e-3) {
      return Fail(Error("the GPU computes something else than the evaluator"));
    }
  }

  auto manifest = ReadManifest(dump_dir + "/manifest.json");
  if (!manifest.ok()) return Fail(manifest.status());
  std::printf("  dump      %s/ (XLA's file names; manifest.json lists every file):\n", dump_dir.c_str());
  const ManifestModule& dumped = manifest->modules.at(0);
  for (const std::string& file : dumped.files) {
    if (file.ends_with(".txt") || file.ends_with(".ll")) std::printf("              %s\n", file.c_str());
  }
  for (const ManifestStage& stage : dumped.stages) {
    if (stage.pass == "fusion" && !stage.files.empty()) {
      std::printf("            the fusion appears in %s\n", stage.files.front().c_str());
    }
  }
  std::printf("\nTry: xlens eval %s.txt --inputs %s\n", base.c_str(), args.out_dir.c_str());
  std::printf("     xlens opt %s.txt --explain-fusion\n", base.c_str());
  std::printf("     xlens run %s.txt --inputs %s --reference --iterations 20\n", base.c_str(),
              args.out_dir.c_str());
  return 0;
}

}  // namespace xlens::cli
