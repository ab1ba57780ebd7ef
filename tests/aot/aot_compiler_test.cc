// Ahead-of-time objects linked into a C program with nothing but the C compiler and libm, run,
// and compared with the reference evaluator: for the host, and for aarch64 under qemu-user when
// the cross compiler and qemu are there.
#include "compiler/aot/aot_compiler.h"

#include "aot/aot_test_util.h"

#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "compiler/aot/aot_target.h"
#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/literal_comparison.h"
#include "compiler/hlo/parser.h"
#include "compiler/hlo/random_literal.h"
#include "compiler/support/file_io.h"
#include "compiler/support/subprocess.h"
#include "compiler/support/temporary_directory.h"
#include "dump/dump_context.h"

namespace xlens::aot {
namespace {

// Elementwise arithmetic and a row reduction; one result is an argument passed through (copied
// by the entry function), the others computed in place.
constexpr const char* kElementwiseReduce = R"(HloModule elementwise_reduce
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[4,8] parameter(0)
  y = f32[4,8] parameter(1)
  m = f32[4,8] multiply(x, y)
  t = f32[4,8] tanh(m)
  z = f32[] constant(0)
  r = f32[4] reduce(t, z), dimensions={1}, to_apply=add
  ROOT out = (f32[4], f32[4,8], f32[4,8]) tuple(r, t, x)
})";

// Results that are no kernel's: a constant, an argument twice, and one computed value twice.
constexpr const char* kPassThrough = R"(HloModule pass_through
ENTRY e {
  x = f32[5] parameter(0)
  c = f32[3] constant({1.5, -2, 4})
  n = f32[5] negate(x)
  ROOT r = (f32[3], f32[5], f32[5], f32[5], f32[5]) tuple(c, x, n, x, n)
})";

// The MNIST softmax classifier: logits = x W + b, then softmax over the classes.
constexpr const char* kMnistSoftmax = R"(HloModule mnist_softmax
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[8,784] parameter(0)
  w = f32[784,10] parameter(1)
  b = f32[10] parameter(2)
  dot = f32[8,10] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[8,10] broadcast(b), dimensions={1}
  logits = f32[8,10] add(dot, bb)
  ninf = f32[] constant(-inf)
  mx = f32[8] reduce(logits, ninf), dimensions={1}, to_apply=max
  mxb = f32[8,10] broadcast(mx), dimensions={0}
  sh = f32[8,10] subtract(logits, mxb)
  ex = f32[8,10] exponential(sh)
  zero = f32[] constant(0)
  sum = f32[8] reduce(ex, zero), dimensions={1}, to_apply=add
  sumb = f32[8,10] broadcast(sum), dimensions={0}
  ROOT probs = f32[8,10] divide(ex, sumb)
})";

// Products in every canonical form the dot loop nest takes: batched, matrix-vector, f64.
constexpr const char* kDots = R"(HloModule dots
ENTRY e {
  a = f32[2,3,40] parameter(0)
  b = f32[2,40,17] parameter(1)
  c = f32[2,3,17] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}
  m = f64[5,33] parameter(2)
  v = f64[33] parameter(3)
  mv = f64[5] dot(m, v), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT r = (f32[2,3,17], f64[5]) tuple(c, mv)
})";

// A 3x3 convolution with padding, NHWC images and an HWIO kernel, and a ReLU.
constexpr const char* kConvolution = R"(HloModule small_conv
ENTRY e {
  in = f32[2,6,6,3] parameter(0)
  k = f32[3,3,3,4] parameter(1)
  c = f32[2,6,6,4] convolution(in, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  z = f32[] constant(0)
  zb = f32[2,6,6,4] broadcast(z), dimensions={}
  ROOT r = f32[2,6,6,4] maximum(c, zb)
})";

// Strides, padding, base and window dilation, and one spatial dimension.
constexpr const char* kStridedConvolutions = R"(HloModule strided_conv
ENTRY e {
  in = f32[2,9,7,3] parameter(0)
  k = f32[3,2,3,5] parameter(1)
  c = f32[2,9,2,5] convolution(in, k), window={size=3x2 stride=2x3 pad=1_2x0_1 lhs_dilate=2x1 rhs_dilate=1x2}, dim_labels=b01f_01io->b01f
  x = f64[3,20,4] parameter(2)
  w = f64[5,4,2] parameter(3)
  d = f64[3,16,2] convolution(x, w), window={size=5}, dim_labels=b0f_0io->b0f
  ROOT r = (f32[2,9,2,5], f64[3,16,2]) tuple(c, d)
})";

// A layer whose weights are constants (64x32, too many for LLVM to fold into the code): they go
// into the object's read-only data.
std::string ConstantWeightsText() {
  std::string rows;
  for (int i = 0; i < 64; ++i) {
    std::vector<std::string> row;
    for (int j = 0; j < 32; ++j) row.push_back(fmt::format("{}", ((i * 7 + j * 3) % 13 - 6) * 0.125));
    rows += fmt::format("{}{{{}}}", i == 0 ? "" : ", ", fmt::join(row, ", "));
  }
  return fmt::format(R"(HloModule constant_weights
ENTRY e {{
  x = f32[2,64] parameter(0)
  w = f32[64,32] constant({{{}}})
  c = f32[] constant(0.25)
  b = f32[2,32] broadcast(c), dimensions={{}}
  d = f32[2,32] dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  ROOT y = f32[2,32] add(d, b)
}})", rows);
}
const std::string kConstantWeightsText = ConstantWeightsText();
const char* const kConstantWeights = kConstantWeightsText.c_str();

// A loop whose state swaps two arrays and accumulates, around a kernel that reads both.
constexpr const char* kWhileLoop = R"(HloModule while_loop
cond {
  s = (s32[], f32[16], f32[16]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[16], f32[16]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  a = f32[16] get-tuple-element(s), index=1
  b = f32[16] get-tuple-element(s), index=2
  one = s32[] constant(1)
  j = s32[] add(i, one)
  half = f32[] constant(0.5)
  h = f32[16] broadcast(half), dimensions={}
  m = f32[16] multiply(a, h)
  c = f32[16] add(m, b)
  ROOT t = (s32[], f32[16], f32[16]) tuple(j, c, a)
}
ENTRY e {
  a = f32[16] parameter(0)
  b = f32[16] parameter(1)
  z = s32[] constant(0)
  init = (s32[], f32[16], f32[16]) tuple(z, a, b)
  w = (s32[], f32[16], f32[16]) while(init), condition=cond, body=body
  x = f32[16] get-tuple-element(w), index=1
  y = f32[16] get-tuple-element(w), index=2
  ROOT r = (f32[16], f32[16]) tuple(x, y)
})";

// A conditional chosen by an index (one out of range: the last branch runs) and one by a
// predicate computed from the data.
constexpr const char* kConditional = R"(HloModule conditional
double {
  x = f32[8] parameter(0)
  ROOT d = f32[8] add(x, x)
}
negate {
  x = f32[8] parameter(0)
  ROOT n = f32[8] negate(x)
}
exp {
  x = f32[8] parameter(0)
  ROOT e = f32[8] exponential(x)
}
ENTRY e {
  x = f32[8] parameter(0)
  k = s32[] constant(1)
  big = s32[] constant(7)
  a = f32[8] conditional(k, x, x, x), branch_computations={double, negate, exp}
  b = f32[8] conditional(big, x, x, x), branch_computations={double, negate, exp}
  zero = f32[] constant(0)
  first = f32[1] slice(x), slice={[0:1]}
  f = f32[] reshape(first)
  p = pred[] compare(f, zero), direction=GT
  c = f32[8] conditional(p, a, b), true_computation=double, false_computation=negate
  ROOT r = (f32[8], f32[8], f32[8]) tuple(a, b, c)
})";

// Parameters and results in column-major layouts, one read through a bitcast: the interface
// is row-major all the same.
constexpr const char* kColumnMajor = R"(HloModule column_major, entry_computation_layout={(f32[3,5]{0,1}, f32[4,6]{0,1})->(f32[5,3]{0,1}, f32[6,4]{1,0})}
ENTRY e {
  x = f32[3,5]{0,1} parameter(0)
  y = f32[4,6]{0,1} parameter(1)
  t = f32[5,3]{0,1} transpose(x), dimensions={1,0}
  e = f32[5,3]{0,1} exponential(t)
  b = f32[6,4]{1,0} bitcast(y)
  n = f32[6,4]{1,0} negate(b)
  ROOT r = (f32[5,3]{0,1}, f32[6,4]{1,0}) tuple(e, n)
})";

// Sorts as generated code: keys with values along the minor dimension (stable), a sort along
// the major dimension, and a top-k (which becomes a sort).
constexpr const char* kSorts = R"(HloModule sorts
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT lt = pred[] compare(a, b), direction=LT
}
greater {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT gt = pred[] compare(a, b), direction=GT
}
ENTRY e {
  x = f32[3,50] parameter(0)
  iota = s32[3,50] iota(), iota_dimension=1
  kv = (f32[3,50], s32[3,50]) sort(x, iota), dimensions={1}, is_stable=true, to_apply=less
  keys = f32[3,50] get-tuple-element(kv), index=0
  values = s32[3,50] get-tuple-element(kv), index=1
  columns = f32[3,50] sort(x), dimensions={0}, to_apply=greater
  top = (f32[3,5], s32[3,5]) topk(x), k=5, largest=true
  top_values = f32[3,5] get-tuple-element(top), index=0
  top_indices = s32[3,5] get-tuple-element(top), index=1
  ROOT r = (f32[3,50], s32[3,50], f32[3,50], f32[3,5], s32[3,5]) tuple(keys, values, columns, top_values, top_indices)
})";

// What the JIT calls its runtime for: integer powers and complex functions, here inline code
// and libm.
constexpr const char* kRuntimeMath = R"(HloModule runtime_math
ENTRY e {
  a = s32[8] parameter(0)
  k = s32[8] constant({0, 1, 2, 3, -1, 5, 2, 1})
  p = s32[8] power(a, k)
  z = c64[4] parameter(1)
  ez = c64[4] exponential(z)
  w = c64[4] multiply(ez, z)
  ROOT r = (s32[8], c64[4]) tuple(p, w)
})";

// Half and bfloat16 arrays: on a CPU without conversion instructions the code calls the C
// compiler's runtime (libgcc), which every program links.
constexpr const char* kHalfPrecision = R"(HloModule half_precision
ENTRY e {
  a = f16[8] parameter(0)
  b = bf16[8] parameter(1)
  fa = f32[8] convert(a)
  fb = f32[8] convert(b)
  s = f32[8] multiply(fa, fb)
  h = f16[8] convert(s)
  g = bf16[8] convert(s)
  ROOT r = (f16[8], bf16[8]) tuple(h, g)
})";

std::vector<Literal> RandomArguments(const HloModule& module, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Literal> arguments;
  for (const HloInstruction* p : module.entry_computation()->parameter_instructions()) {
    arguments.push_back(MakeRandomLiteral(p->shape(), rng).value());
  }
  return arguments;
}

// Compiles `text` ahead of time for `triple`, links it into a program with `toolchain`, runs
// it, and compares every result with the evaluator's.
void ExpectProgramMatchesEvaluator(const char* text, const std::string& triple,
                                   const Toolchain& toolchain, AotResult* out = nullptr) {
  auto module = ParseHloModule(text);
  ASSERT_TRUE(module.ok()) << module.status().message();
  AotOptions options;
  options.target_triple = triple;
  options.entry_point = "run_" + (*module)->name();
  auto compiled = CompileAheadOfTime(**module, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  EXPECT_GT(compiled->kernel_count, 0);
  std::printf("[ aot      ] %s for %s: object %zu bytes, %d kernels, temp %lld bytes, weights %lld "
              "bytes\n", (*module)->name().c_str(), compiled->target_triple.c_str(),
              compiled->object.size(), compiled->kernel_count,
              static_cast<long long>(compiled->temp_bytes),
              static_cast<long long>(compiled->weights_bytes));
  std::vector<Literal> arguments = RandomArguments(**module, 7);
  auto expected = EvaluateModule(**module, arguments);
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  std::vector<Shape> result_shapes;
  std::vector<const Literal*> expected_leaves;
  const Shape& root = (*module)->entry_computation()->root_instruction()->shape();
  if (root.IsTuple()) {
    for (int64_t j = 0; j < expected->tuple_size(); ++j) {
      result_shapes.push_back(root.tuple_shapes(j));
      expected_leaves.push_back(&expected->tuple_element(j));
    }
  } else {
    result_shapes.push_back(root);
    expected_leaves.push_back(&*expected);
  }
  ASSERT_EQ(compiled->results.size(), result_shapes.size());
  auto dir = TemporaryDirectory::Create("aot-test");
  ASSERT_TRUE(dir.ok()) << dir.status().message();
  auto actual = LinkAndRun(*compiled, options.entry_point, LeavesOf(arguments), result_shapes,
                           toolchain, dir->path());
  ASSERT_TRUE(actual.ok()) << actual.status().message();
  for (size_t j = 0; j < result_shapes.size(); ++j) {
    Status match = ExpectLiteralNear(*expected_leaves[j], (*actual)[j], ErrorSpec{1e-6, 1e-5});
    EXPECT_TRUE(match.ok()) << "result " << j << ": " << match.message();
  }
  if (out != nullptr) *out = std::move(*compiled);
}

const Toolchain kHost{{"cc", "-O1"}, {}};

TEST(AotCompilerTest, ElementwiseAndReduceRunAsAProgramOfTheirOwn) {
  AotResult compiled;
  ExpectProgramMatchesEvaluator(kElementwiseReduce, "", kHost, &compiled);
  ASSERT_EQ(compiled.arguments.size(), 2u);
  EXPECT_EQ(compiled.arguments[0].name, "x");
  EXPECT_EQ(compiled.arguments[0].element_type, "f32");
  EXPECT_EQ(compiled.arguments[0].dimensions, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(compiled.arguments[0].byte_size, 4 * 8 * 4);
  ASSERT_EQ(compiled.results.size(), 3u);
  EXPECT_EQ(compiled.results[0].dimensions, (std::vector<int64_t>{4}));
  EXPECT_EQ(compiled.results[2].byte_size, 4 * 8 * 4);
  EXPECT_EQ(compiled.weights_bytes, 0);
}

TEST(AotCompilerTest, ConstantsArgumentsAndSharedValuesAreCopiedToTheirResults) {
  AotResult compiled;
  ExpectProgramMatchesEvaluator(kPassThrough, "", kHost, &compiled);
  EXPECT_EQ(compiled.results.size(), 5u);
}

TEST(AotCompilerTest, MnistSoftmaxClassifierMatchesTheEvaluator) {
  AotResult compiled;
  ExpectProgramMatchesEvaluator(kMnistSoftmax, "", kHost, &compiled);
  EXPECT_EQ(compiled.results.size(), 1u);
}

// For this machine's own CPU (its vector width and instructions), as --target_cpu=native asks.
TEST(AotCompilerTest, NativeCpuCodeRunsHere) {
  auto module = ParseHloModule(kMnistSoftmax);
  ASSERT_TRUE(module.ok());
  AotOptions options;
  options.target_cpu = "native";
  options.entry_point = "run_native";
  auto compiled = CompileAheadOfTime(**module, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  std::vector<Literal> arguments = RandomArguments(**module, 3);
  auto expected = EvaluateModule(**module, arguments);
  ASSERT_TRUE(expected.ok());
  auto dir = TemporaryDirectory::Create("aot-test");
  ASSERT_TRUE(dir.ok());
  auto actual = LinkAndRun(*compiled, "run_native", LeavesOf(arguments), {expected->shape()},
                           kHost, dir->path());
  ASSERT_TRUE(actual.ok()) << actual.status().message();
  Status match = ExpectLiteralNear(*expected, (*actual)[0], ErrorSpec{1e-6, 1e-5});
  EXPECT_TRUE(match.ok()) << match.message();
}

TEST(AotCompilerTest, DotsInEveryCanonicalFormMatchTheEvaluator) {
  ExpectProgramMatchesEvaluator(kDots, "", kHost);
}

TEST(AotCompilerTest, ConvolutionIsGeneratedCode) {
  ExpectProgramMatchesEvaluator(kConvolution, "", kHost);
}

TEST(AotCompilerTest, StridedAndDilatedConvolutionsMatchTheEvaluator) {
  ExpectProgramMatchesEvaluator(kStridedConvolutions, "", kHost);
}

TEST(AotCompilerTest, WhileLoopsRunInTheEntryFunction) {
  ExpectProgramMatchesEvaluator(kWhileLoop, "", kHost);
}

TEST(AotCompilerTest, ConditionalsRunInTheEntryFunction) {
  ExpectProgramMatchesEvaluator(kConditional, "", kHost);
}

TEST(AotCompilerTest, OtherLayoutsGetARowMajorInterface) {
  ExpectProgramMatchesEvaluator(kColumnMajor, "", kHost);
}

TEST(AotCompilerTest, SortsAreGeneratedCode) {
  ExpectProgramMatchesEvaluator(kSorts, "", kHost);
}

TEST(AotCompilerTest, IntegerPowerAndComplexMathNeedNoRuntime) {
  ExpectProgramMatchesEvaluator(kRuntimeMath, "", kHost);
}

TEST(AotCompilerTest, HalfPrecisionLinksWithTheCompilersRuntime) {
  ExpectProgramMatchesEvaluator(kHalfPrecision, "", kHost);
}

TEST(AotCompilerTest, ConstantWeightsAreInTheObject) {
  AotResult compiled;
  ExpectProgramMatchesEvaluator(kConstantWeights, "", kHost, &compiled);
  EXPECT_GE(compiled.weights_bytes, 64 * 32 * 4);
  ASSERT_EQ(compiled.arguments.size(), 1u);  // the weights are no argument
}

// The object needs nothing but libc and libm (and the C compiler's own runtime, for half
// conversions): no oneDNN, Eigen or xlens runtime symbol.
TEST(AotCompilerTest, UndefinedSymbolsAreOnlyLibcAndLibm) {
  for (const char* text : {kElementwiseReduce, kMnistSoftmax, kConvolution, kConstantWeights,
                           kWhileLoop, kConditional, kRuntimeMath, kHalfPrecision, kSorts}) {
    auto module = ParseHloModule(text);
    ASSERT_TRUE(module.ok());
    auto compiled = CompileAheadOfTime(**module, {});
    ASSERT_TRUE(compiled.ok()) << compiled.status().message();
    auto dir = TemporaryDirectory::Create("aot-test");
    ASSERT_TRUE(dir.ok());
    const std::string object = dir->path() + "/model.o";
    ASSERT_TRUE(WriteFile(object, compiled->object).ok());
    auto nm = RunCommand({"nm", "-u", object}, 60);
    ASSERT_TRUE(nm.ok() && nm->exit_code == 0) << (nm.ok() ? nm->output : nm.status().message());
    std::istringstream lines(nm->output);
    std::string kind, symbol;
    while (lines >> kind >> symbol) {
      EXPECT_TRUE(IsLibcOrLibmFunction(symbol) || IsCompilerRuntimeFunction(symbol) ||
                  symbol == "_GLOBAL_OFFSET_TABLE_")
          << (*module)->name() << " needs " << symbol;
    }
    // Exactly one symbol is defined for the program: the entry function.
    auto defined = RunCommand({"nm", "-g", "--defined-only", object}, 60);
    ASSERT_TRUE(defined.ok());
    std::istringstream exported(defined->output);
    std::string address;
    std::vector<std::string> names;
    while (exported >> address >> kind >> symbol) names.push_back(symbol);
    EXPECT_EQ(names, std::vector<std::string>{"entry"}) << (*module)->name();
  }
}

// --xla_dump_to as for the JIT: the HLO stages, the buffer assignment, the LLVM IR before and
// after optimization, and every kernel in the manifest.
TEST(AotCompilerTest, DumpsAsTheJitDoes) {
  auto module = ParseHloModule(kMnistSoftmax);
  ASSERT_TRUE(module.ok());
  auto dir = TemporaryDirectory::Create("aot-dump");
  ASSERT_TRUE(dir.ok());
  DebugOptions debug;
  debug.xla_dump_to = dir->path();
  DumpContext dump(debug);
  AotOptions options;
  options.optimize.dump = &dump;
  ASSERT_TRUE(CompileAheadOfTime(**module, options).ok());
  for (const char* suffix : {"before_optimizations.txt", "cpu_after_optimizations.txt",
                             "cpu_after_optimizations-buffer-assignment.txt", "ir-no-opt.ll",
                             "ir-with-opt.ll"}) {
    const std::string path = fmt::format("{}/module_0001.mnist_softmax.{}", dir->path(), suffix);
    EXPECT_EQ(GetPathKind(path), PathKind::kRegular) << path;
  }
  auto manifest = ReadFile(dir->path() + "/manifest.json");
  ASSERT_TRUE(manifest.ok()) << manifest.status().message();
  EXPECT_NE(manifest->find("\"hlo_instruction\": \"dot\""), std::string::npos) << *manifest;
}

TEST(AotCompilerTest, TheCallersModuleIsLeftAsItWas) {
  auto module = ParseHloModule(kMnistSoftmax);
  ASSERT_TRUE(module.ok());
  const std::string before = (*module)->ToString();
  ASSERT_TRUE(CompileAheadOfTime(**module, {}).ok());
  EXPECT_EQ((*module)->ToString(), before);
}

StatusOr<AotResult> CompileText(const char* text, const AotOptions& options = {}) {
  auto module = ParseHloModule(text);
  if (!module.ok()) return module.status();
  return CompileAheadOfTime(**module, options);
}

TEST(AotCompilerTest, WhatCannotBeGeneratedIsRefusedByName) {
  auto custom = CompileText(R"(HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT c = f32[4] custom-call(x), custom_call_target="my_library_function"
})");
  ASSERT_FALSE(custom.ok());
  EXPECT_EQ(custom.status().message(),
            "c: custom-call cannot be compiled ahead of time: it calls \"my_library_function\", "
            "code outside the module that the object cannot carry");
  auto infeed = CompileText(R"(HloModule m
ENTRY e {
  t = token[] after-all()
  in = (f32[4], token[]) infeed(t)
  ROOT x = f32[4] get-tuple-element(in), index=0
})");
  ASSERT_FALSE(infeed.ok());
  EXPECT_NE(infeed.status().message().find("in: infeed cannot be compiled ahead of time"),
            std::string::npos) << infeed.status().message();
  auto sort = CompileText(R"(HloModule m
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT
}
ENTRY e {
  x = f32[100000] parameter(0)
  ROOT s = f32[100000] sort(x), dimensions={0}, to_apply=less
})");
  ASSERT_FALSE(sort.ok());
  EXPECT_EQ(sort.status().message(),
            "s: sort cannot be compiled ahead of time: it sorts 100000 elements per slice, and "
            "the generated sort (by insertion, quadratic) takes at most 16384");
}

TEST(AotCompilerTest, BadTargetsAndEntryPointsAreRefused) {
  AotOptions options;
  options.target_triple = "nonsense-unknown-none";
  auto triple = CompileText(kConstantWeights, options);
  ASSERT_FALSE(triple.ok());
  EXPECT_NE(triple.status().message().find("--target_triple"), std::string::npos);
  options = {};
  options.target_cpu = "no-such-cpu";
  auto cpu = CompileText(kConstantWeights, options);
  ASSERT_FALSE(cpu.ok());
  EXPECT_NE(cpu.status().message().find("--target_cpu: 'no-such-cpu'"), std::string::npos);
  options = {};
  options.target_triple = "aarch64-unknown-linux-gnu";
  options.target_cpu = "native";
  auto native = CompileText(kConstantWeights, options);
  ASSERT_FALSE(native.ok());
  EXPECT_NE(native.status().message().find("--target_cpu=native"), std::string::npos);
  options = {};
  options.entry_point = "3run";
  auto entry = CompileText(kConstantWeights, options);
  ASSERT_FALSE(entry.ok());
  EXPECT_NE(entry.status().message().find("--entry_point"), std::string::npos);
}

constexpr const char* kAarch64 = "aarch64-unknown-linux-gnu";

TEST(AotCompilerTest, Aarch64ObjectsAreAarch64Elf) {
  AotOptions options;
  options.target_triple = kAarch64;
  auto compiled = CompileText(kMnistSoftmax, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  EXPECT_EQ(compiled->target_triple, kAarch64);
  const std::string& o = compiled->object;
  ASSERT_GT(o.size(), 20u);
  EXPECT_EQ(o.substr(0, 4), "\x7f" "ELF");
  EXPECT_EQ(o[4], 2);  // ELFCLASS64
  uint16_t machine = 0;
  std::memcpy(&machine, o.data() + 18, 2);  // little-endian, as the host reading it
  EXPECT_EQ(machine, 183);  // EM_AARCH64
  EXPECT_EQ(static_cast<unsigned char>(o[16]), 1);  // ET_REL: a relocatable object
}

// Under qemu-user: the same comparisons as on the host, with a program linked statically by
// the cross compiler (setup.sh --test-peers installs both).
TEST(AotCompilerTest, Aarch64ProgramsUnderQemuMatchTheEvaluator) {
  if (!HaveProgram("aarch64-linux-gnu-gcc") || !HaveProgram("qemu-aarch64")) {
    GTEST_SKIP() << "aarch64-linux-gnu-gcc or qemu-aarch64 is not installed (apt-get install "
                    "g++-aarch64-linux-gnu qemu-user)";
  }
  const Toolchain cross{{"aarch64-linux-gnu-gcc", "-O1", "-static"}, {"qemu-aarch64"}};
  for (const char* text : {kElementwiseReduce, kMnistSoftmax, kConvolution, kConstantWeights,
                           kWhileLoop, kConditional, kRuntimeMath, kHalfPrecision, kSorts,
                           kDots, kStridedConvolutions}) {
    ExpectProgramMatchesEvaluator(text, kAarch64, cross);
  }
}

}  // namespace
}  // namespace xlens::aot
