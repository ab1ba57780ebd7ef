// The CPU compiler on every module of the shared corpus: compiled, run and compared with the
// reference evaluator on the same pseudo-random inputs (elided constants filled with seeded
// random values, bounded dynamic dimensions at their bounds, as `xlens run` does).
//
// A module is never skipped quietly. The few this test does not run are listed below with the
// reason, and the test checks that reason: what XLA itself could not run on a CPU either is
// refused with a message saying so; what is too large for the interpreter is checked elsewhere
// against XLA. A module missing from the list that cannot run fails.
#include <string_view>

#include <gtest/gtest.h>

#include "compiler/runtime/cpu_compiler.h"
#include "differential_harness.h"

namespace xlens {
namespace {

// The evaluator is an interpreter (about 1e8 simple operations a second): modules that need more
// than this many multiply-adds would take minutes there.
constexpr double kMaxEvaluatorWork = 4e9;

enum class NotRun {
  kInvalid,     // not valid HLO: refused when parsed with verification
  kUnrunnable,  // refused by LoadCorpusModule (a run-time size xlens has no place for)
  kRefused,     // the CPU compiler refuses it, and XLA:CPU could not run it either
  kTooLarge,    // beyond kMaxEvaluatorWork; compiled and checked against XLA, or benchmarked
};

struct NotRunHere {
  std::string_view module;
  NotRun kind;
  std::string_view message;  // a part of the refusal (kTooLarge: empty)
  std::string_view why;
};

constexpr NotRunHere kNotRunHere[] = {
    {"opcode_zoo_hlo_import", NotRun::kInvalid, "must equal the kernel's size",
     "a convolution whose window (3x3) is not its kernel's size (2x2): XLA's shape inference "
     "refuses it too; jaxlib compiles it only through the StableHLO importer, which takes the "
     "window from the kernel"},
    {"slice_to_dynamic_custom_call", NotRun::kUnrunnable, "sets a dimension's size at run time",
     "SliceToDynamic gives a value whose size is known at run time only; XLA:CPU returns the "
     "padded buffer, whose elements past that size are unspecified"},
    {"all_gather_async_conv_scheduled", NotRun::kRefused, "names replica 1",
     "an all-gather over replica group {0,1}: a program for two devices, refused on one "
     "(multi_device_executable_test runs collectives on several)"},
    {"thunk_coverage_misc_ops", NotRun::kRefused, "cannot run on the CPU backend",
     "one of each of XLA:CPU's thunks: rng-get-and-update-state and __onednn$layernorm among "
     "them, which xlens does not implement; its fft is fft_transpose_c64's"},
    {"gemm_custom_call_sqrt_fusions", NotRun::kRefused, "XLA:CPU cannot run it either",
     "a cuBLAS call written by XLA's GPU compiler"},
    {"jax_triton_ffi_opaque_backend_config", NotRun::kRefused, "XLA:CPU cannot run it either",
     "a Triton GPU kernel"},
    {"send_recv_host_transfer_sharding", NotRun::kRefused, "XLA:CPU cannot run it either",
     "send and recv to the host through TensorFlow's rendezvous"},
    {"conv_backward_input_reverse", NotRun::kTooLarge, "",
     "1.1e10 operations: compiled and checked against XLA by xla_differential_compiled"},
    {"jax_pjit_attention_sharded", NotRun::kTooLarge, "",
     "4.1e10 operations: compiled and checked against XLA by xla_differential_compiled"},
    {"conv_lhs_dilate_strided", NotRun::kTooLarge, "",
     "2.1e11 operations (40 s compiled here, 3 s in XLA: a known gap left to the benchmarks)"},
    {"fp8_gemm_while_loop", NotRun::kTooLarge, "",
     "20 iterations of a 32768x8192x1024 fp8 product (5.5e12 flops, 2 GiB of bf16 buffers)"},
};

const NotRunHere* FindNotRunHere(std::string_view module) {
  for (const NotRunHere& entry : kNotRunHere) {
    if (entry.module == module) return &entry;
  }
  return nullptr;
}

class CpuCompilerCorpusTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CpuCompilerCorpusTest, CompiledResultMatchesTheEvaluator) {
  if (testing::HloCorpusDir().empty()) GTEST_SKIP() << "no corpus under " << XLENS_SHARED_DIR;
  const std::string& name = GetParam();
  const NotRunHere* not_run = FindNotRunHere(name);
  if (not_run != nullptr) RecordProperty("not_run_here", std::string(not_run->why));

  auto module = testing::LoadCorpusModule(name);
  if (not_run != nullptr && (not_run->kind == NotRun::kInvalid || not_run->kind == NotRun::kUnrunnable)) {
    ASSERT_FALSE(module.ok()) << name << " is listed as not runnable, but it loads";
    EXPECT_NE(module.status().message().find(not_run->message), std::string::npos)
        << module.status().message();
    return;
  }
  ASSERT_TRUE(module.ok()) << module.status().message();
  if (not_run != nullptr && not_run->kind == NotRun::kRefused) {
    auto refused = runtime::CompileForCpu(std::move(*module), runtime::CompileOptions{});
    ASSERT_FALSE(refused.ok()) << name << " is listed as refused, but it compiles";
    EXPECT_NE(refused.status().message().find(not_run->message), std::string::npos)
        << refused.status().message();
    return;
  }
  const double work = testing::EvaluatorWork(**module);
  if (not_run != nullptr) {
    // Listed as too large: it must still be, or it belongs in the comparison below.
    EXPECT_GT(work, kMaxEvaluatorWork) << name << " is small enough to compare now";
    return;
  }
  ASSERT_LE(work, kMaxEvaluatorWork) << name << ": too large for the evaluator and not listed";

  auto loaded = testing::LoadCorpusCase(name, kMaxEvaluatorWork);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  auto& [loaded_module, arguments] = *loaded;
  auto expected = EvaluateModule(*loaded_module, arguments);
  ASSERT_TRUE(expected.ok()) << "the evaluator refuses it: " << expected.status().message();
  auto executable = runtime::CompileForCpu(std::move(loaded_module), runtime::CompileOptions{});
  ASSERT_TRUE(executable.ok()) << executable.status().message();
  auto actual = (*executable)->Execute(arguments);
  ASSERT_TRUE(actual.ok()) << actual.status().message();
  Status match = ExpectLiteralNear(*expected, *actual, ErrorSpec{1e-4, 1e-4});
  EXPECT_TRUE(match.ok()) << match.message();
}

INSTANTIATE_TEST_SUITE_P(Corpus, CpuCompilerCorpusTest, ::testing::ValuesIn(testing::HloCorpusModuleNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return testing::TestNameOf(info.param); });

}  // namespace
}  // namespace xlens
