// Runs the `xlens` binary as a user would and checks what it prints, writes and returns.
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <set>

#include "compiler/hlo/npy.h"
#include "cli_test_util.h"
#include "test_util.h"

namespace xlens {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kAxpy = R"(HloModule axpy
ENTRY main {
  a = f32[] parameter(0)
  x = f32[4] parameter(1)
  y = f32[4] parameter(2)
  b = f32[4] broadcast(a), dimensions={}
  m = f32[4] multiply(b, x)
  ROOT r = f32[4] add(m, y)
}
)";

TEST_F(CliTest, HelpForEverySubcommand) {
  RunResult top = RunXlens("--help");
  EXPECT_EQ(top.exit_code, 0);
  for (const char* sub : {"print", "verify", "dot", "eval", "opt", "flags", "demo"}) {
    EXPECT_THAT(top.output, HasSubstr(sub));
    RunResult help = RunXlens(std::string(sub) + " --help");
    EXPECT_EQ(help.exit_code, 0) << sub;
    EXPECT_THAT(help.output, HasSubstr("Usage")) << sub;
  }
}

TEST_F(CliTest, BadUsageIsOneLineAndExitOne) {
  RunResult unknown = RunXlens("frobnicate");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.output, HasSubstr("xlens: "));
  RunResult missing = RunXlens("print");
  EXPECT_EQ(missing.exit_code, 1);
  RunResult no_file = RunXlens("print /nonexistent/x.hlo");
  EXPECT_EQ(no_file.exit_code, 1);
  EXPECT_THAT(no_file.output, HasSubstr("/nonexistent/x.hlo: cannot open"));
}

TEST_F(CliTest, PrintLongAndShortForms) {
  std::string file = Write("axpy.hlo", kAxpy);
  RunResult long_form = RunXlens("print " + file);
  ASSERT_EQ(long_form.exit_code, 0) << long_form.output;
  EXPECT_THAT(long_form.output, HasSubstr("%m = f32[4]{0} multiply(f32[4]{0} %b, f32[4]{0} %x)"));
  RunResult short_form = RunXlens("print --short " + file);
  ASSERT_EQ(short_form.exit_code, 0);
  EXPECT_THAT(short_form.output, HasSubstr("m = f32[4]{0} multiply(b, x)"));
}

TEST_F(CliTest, VerifyReportsLocationOfTheProblem) {
  std::string good = Write("good.hlo", kAxpy);
  RunResult ok = RunXlens("verify " + good);
  EXPECT_EQ(ok.exit_code, 0);
  EXPECT_THAT(ok.output, HasSubstr("OK"));
  std::string bad = Write("bad.hlo", "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT n = f32[3] negate(p)\n}\n");
  RunResult fail = RunXlens("verify " + bad);
  EXPECT_EQ(fail.exit_code, 1);
  EXPECT_THAT(fail.output, HasSubstr(bad + ":4:3:"));
  EXPECT_THAT(fail.output, HasSubstr("ROOT n = f32[3] negate(p)"));
}

TEST_F(CliTest, EvalReadsAndWritesNpy) {
  std::string file = Write("axpy.hlo", kAxpy);
  std::filesystem::create_directories(dir_ / "in");
  ASSERT_TRUE(WriteNpy((dir_ / "in/arg0.npy").string(), Literal::CreateR0<float>(PrimitiveType::F32, 2.0f)).ok());
  ASSERT_TRUE(WriteNpy((dir_ / "in/arg1.npy").string(),
                       Literal::CreateR1<float>(PrimitiveType::F32, {1, 2, 3, 4})).ok());
  ASSERT_TRUE(WriteNpy((dir_ / "in/arg2.npy").string(),
                       Literal::CreateR1<float>(PrimitiveType::F32, {10, 20, 30, 40})).ok());
  RunResult run = RunXlens("eval " + file + " --inputs " + (dir_ / "in").string() + " --outputs " +
                           (dir_ / "out").string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto out = ReadNpy((dir_ / "out/out0.npy").string());
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, Literal::CreateR1<float>(PrimitiveType::F32, {12, 24, 36, 48}));

  RunResult printed = RunXlens("eval " + file + " --inputs " + (dir_ / "in").string());
  ASSERT_EQ(printed.exit_code, 0);
  EXPECT_THAT(printed.output, HasSubstr("out0: f32[4] {12, 24, 36, 48}"));
}

TEST_F(CliTest, EvalRefusesInputsOfTheWrongShape) {
  std::string file = Write("axpy.hlo", kAxpy);
  std::filesystem::create_directories(dir_ / "in");
  ASSERT_TRUE(WriteNpy((dir_ / "in/arg0.npy").string(), Literal::CreateR0<float>(PrimitiveType::F32, 2.0f)).ok());
  ASSERT_TRUE(WriteNpy((dir_ / "in/arg1.npy").string(),
                       Literal::CreateR1<float>(PrimitiveType::F32, {1, 2, 3})).ok());
  RunResult run = RunXlens("eval " + file + " --inputs " + (dir_ / "in").string());
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.output, HasSubstr("arg1.npy: holds f32[3] but parameter 1 (%x) expects f32[4]"));
  std::filesystem::remove(dir_ / "in/arg1.npy");
  RunResult missing = RunXlens("eval " + file + " --inputs " + (dir_ / "in").string());
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.output, HasSubstr("arg1.npy: missing"));
}

TEST_F(CliTest, EvalRandomInputsAreReproducible) {
  std::string file = Write("axpy.hlo", kAxpy);
  RunResult a = RunXlens("eval " + file + " --seed 7");
  RunResult b = RunXlens("eval " + file + " --seed 7");
  RunResult c = RunXlens("eval " + file + " --seed 8");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(a.output, b.output);
  EXPECT_NE(a.output, c.output);
}

TEST_F(CliTest, EvalNamesAnUnsupportedOpcode) {
  std::string file = Write("rng.hlo", R"(HloModule m
ENTRY e {
  a = f32[] constant(0)
  b = f32[] constant(1)
  ROOT r = f32[4] rng(a, b), distribution=rng_uniform
})");
  RunResult run = RunXlens("eval " + file);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.output, HasSubstr("unsupported opcode rng"));
}

TEST_F(CliTest, EvalOfArraysLargerThanMemoryIsAUserError) {
  std::string file = Write("huge.hlo", "HloModule m\nENTRY e {\n  p = f32[1000000,1000000,1000] "
                                       "parameter(0)\n  ROOT n = f32[1000000,1000000,1000] negate(p)\n}\n");
  RunResult run = RunXlens("eval " + file);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.output, HasSubstr("would not fit in memory"));
  std::string broadcast = Write("broadcast.hlo", "HloModule m\nENTRY e {\n  c = f32[] constant(1)\n"
                                                 "  ROOT b = f32[100000,100000,100000] broadcast(c), dimensions={}\n}\n");
  RunResult out_of_memory = RunXlens("eval " + broadcast);
  EXPECT_EQ(out_of_memory.exit_code, 1) << out_of_memory.output;
  EXPECT_THAT(out_of_memory.output, HasSubstr("xlens: "));
}

TEST_F(CliTest, DotRendersWithGraphviz) {
  if (std::system("command -v dot >/dev/null 2>&1") != 0) GTEST_SKIP() << "graphviz is not installed";
  std::string file = Write("axpy.hlo", kAxpy);
  std::string dot = (dir_ / "axpy.dot").string();
  RunResult run = RunXlens("dot " + file + " -o " + dot);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::string svg = (dir_ / "axpy.svg").string();
  EXPECT_EQ(std::system(("dot -Tsvg " + dot + " -o " + svg + " 2>/dev/null").c_str()), 0);
  EXPECT_GT(std::filesystem::file_size(svg), 100u);
  RunResult bad_node = RunXlens("dot " + file + " --node nosuch --radius 1");
  EXPECT_EQ(bad_node.exit_code, 1);
  EXPECT_THAT(bad_node.output, HasSubstr("nosuch"));
}

TEST_F(CliTest, DemoWalksTheExampleThroughTheCore) {
  RunResult run = RunXlens("demo --out " + (dir_ / "demo").string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (const char* step : {"parse", "verify", "evaluate", "reduce_sum =", "draw", "optimize",
                           "3 kernels -> 1", "the fusion appears in module_0001.reduce_sum_xyz.",
                           "compile   cpu: 1 kernel (fusion)", "on the CPU (|difference| from the evaluator",
                           "kernel fusion", "module_0001.reduce_sum_xyz.ir-with-opt.ll"}) {
    EXPECT_THAT(run.output, HasSubstr(step));
  }
  if (std::filesystem::exists("/usr/local/cuda/nvvm/libdevice/libdevice.10.bc")) {
    EXPECT_TRUE(std::filesystem::exists(dir_ / "demo/reduce_sum_xyz.ptx")) << run.output;
  }
  EXPECT_TRUE(std::filesystem::exists(dir_ / "demo/reduce_sum_xyz.dot"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "demo/out0.npy"));
  // The printed module is valid input for the other subcommands.
  RunResult eval = RunXlens("eval " + (dir_ / "demo/reduce_sum_xyz.txt").string() + " --inputs " +
                            (dir_ / "demo").string());
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  EXPECT_THAT(eval.output, HasSubstr("out0: f32[]"));
}

constexpr const char* kReduceSum = R"(HloModule reduce_sum
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
ENTRY main {
  x = f32[1024] parameter(0)
  y = f32[1024] parameter(1)
  z = f32[1024] parameter(2)
  m = f32[1024] multiply(y, z), metadata={op_name="mul"}
  s = f32[1024] add(x, m), metadata={op_name="add"}
  zero = f32[] constant(0)
  ROOT r = f32[] reduce(s, zero), dimensions={0}, to_apply=add, metadata={op_name="sum"}
}
)";

TEST_F(CliTest, OptPrintsTheOptimizedModuleAndExplainsFusion) {
  std::string file = Write("reduce_sum.hlo", kReduceSum);
  RunResult opt = RunXlens("opt " + file);
  ASSERT_EQ(opt.exit_code, 0) << opt.output;
  EXPECT_THAT(opt.output, HasSubstr("fusion(f32[1024]{0} %"));
  EXPECT_THAT(opt.output, HasSubstr("kind=kInput, calls=%fused_computation"));
  EXPECT_THAT(opt.output, HasSubstr("op_name=\"mul;add;sum\""));
  EXPECT_THAT(opt.output, HasSubstr("kernels 3 -> 1"));
  RunResult explain = RunXlens("opt " + file + " --explain-fusion --backend=gpu");
  ASSERT_EQ(explain.exit_code, 0) << explain.output;
  EXPECT_THAT(explain.output, HasSubstr("fused s into r (kInput)"));
  RunResult list = RunXlens("opt --list-passes");
  ASSERT_EQ(list.exit_code, 0);
  EXPECT_THAT(list.output, HasSubstr("horizontal-loop-fusion"));
  EXPECT_THAT(list.output, HasSubstr("layout-assignment"));
}

TEST_F(CliTest, OptFlagsFromTheCommandLineAndTheEnvironment) {
  std::string file = Write("reduce_sum.hlo", kReduceSum);
  RunResult disabled = RunXlens("opt " + file + " --xla_disable_hlo_passes=fusion,multi-output-fusion");
  ASSERT_EQ(disabled.exit_code, 0) << disabled.output;
  EXPECT_THAT(disabled.output, HasSubstr("kernels 3 -> 3"));
  RunResult unknown_pass = RunXlens("opt " + file + " --xla_disable_hlo_passes=fusoin");
  EXPECT_EQ(unknown_pass.exit_code, 1);
  EXPECT_THAT(unknown_pass.output, HasSubstr("unknown pass 'fusoin'; did you mean 'fusion'?"));
  RunResult unknown_flag = RunXlens("opt " + file + " --xla_dump_too=/tmp/x");
  EXPECT_EQ(unknown_flag.exit_code, 1);
  EXPECT_THAT(unknown_flag.output, HasSubstr("did you mean --xla_dump_to?"));
  std::string dump = (dir_ / "dump").string();
  ::setenv("XLA_FLAGS", ("--xla_dump_to=" + dump + " --xla_dump_hlo_pass_re=.*").c_str(), 1);
  RunResult from_env = RunXlens("opt " + file);
  ::unsetenv("XLA_FLAGS");
  ASSERT_EQ(from_env.exit_code, 0) << from_env.output;
  EXPECT_TRUE(std::filesystem::exists(dir_ / "dump/manifest.json"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "dump/module_0001.reduce_sum.cpu_after_optimizations.txt"));
  EXPECT_TRUE(std::filesystem::exists(
      dir_ / "dump/module_0001.reduce_sum.cpu_after_optimizations-buffer-assignment.txt"));
  RunResult flags = RunXlens("flags");
  ASSERT_EQ(flags.exit_code, 0);
  EXPECT_THAT(flags.output, HasSubstr("xla_dump_hlo_pass_re"));
}

// Four compilations dumping into one directory at once, as a build running tests in parallel
// does: each gets its own module number and the manifest lists all four.
TEST_F(CliTest, ConcurrentCompilesShareOneDumpDirectory) {
  std::string file = Write("reduce_sum.hlo", kReduceSum);
  std::string dump = (dir_ / "dump").string();
  std::string xlens = std::string(XLENS_BINARY_DIR) + "/compiler/cli/xlens";
  std::string command = "for i in 1 2 3 4; do XLA_FLAGS='--xla_dump_to=" + dump +
                        " --xla_dump_hlo_pass_re=.*' " + xlens + " opt " + file +
                        " >/dev/null 2>&1 & done; wait";
  ASSERT_EQ(std::system(command.c_str()), 0);
  std::set<std::string> numbers;
  for (const auto& entry : std::filesystem::directory_iterator(dump)) {
    std::string name = entry.path().filename().string();
    if (name.ends_with(".before_optimizations.txt")) numbers.insert(name.substr(0, name.find('.')));
  }
  EXPECT_EQ(numbers.size(), 4u);
  std::ifstream in(dump + "/manifest.json");
  nlohmann::json manifest = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(manifest.is_object());
  EXPECT_EQ(manifest["modules"].size(), 4u);
}

TEST_F(CliTest, OptSaysWhatItDumped) {
  std::string file = Write("reduce_sum.hlo", kReduceSum);
  std::string dump = (dir_ / "dump").string();
  RunResult ok = RunXlens("opt " + file + " --xla_dump_to=" + dump);
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_THAT(ok.output, ::testing::ContainsRegex("dumped [0-9]+ files to "));
  EXPECT_THAT(ok.output, HasSubstr(dump + " (manifest.json lists every file)"));
  RunResult none = RunXlens("opt " + file + " --xla_dump_to=" + dump + " --xla_dump_hlo_module_re=nothing");
  ASSERT_EQ(none.exit_code, 0) << none.output;
  EXPECT_THAT(none.output, HasSubstr("nothing dumped to " + dump));
  // A FIFO where the manifest goes: the dump goes on without one, and says so.
  std::string fifo_dump = (dir_ / "fifo").string();
  std::filesystem::create_directories(fifo_dump);
  ASSERT_EQ(::mkfifo((fifo_dump + "/manifest.json").c_str(), 0644), 0);
  RunResult fifo = RunXlens("opt " + file + " --xla_dump_to=" + fifo_dump);
  ASSERT_EQ(fifo.exit_code, 0) << fifo.output;
  EXPECT_THAT(fifo.output, HasSubstr("manifest.json was not written"));
  EXPECT_THAT(fifo.output, HasSubstr("is a FIFO"));
}

TEST_F(CliTest, HtmlDumpWithoutTmpdir) {
  std::string file = Write("reduce_sum.hlo", kReduceSum);
  std::string dump = (dir_ / "dump").string();
  const char* old = std::getenv("TMPDIR");
  std::string saved = old ? old : "";
  ::setenv("TMPDIR", (dir_ / "no-such-tmp").c_str(), 1);
  RunResult html = RunXlens("opt " + file + " --xla_dump_to=" + dump + " --xla_dump_hlo_as_html");
  if (old) {
    ::setenv("TMPDIR", saved.c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
  ASSERT_EQ(html.exit_code, 0) << html.output;
  EXPECT_THAT(html.output, Not(HasSubstr("filesystem error")));
  EXPECT_TRUE(std::filesystem::exists(dump + "/module_0001.reduce_sum.before_optimizations.html"));
}

// XLA_FLAGS may name a file of flags, as in XLA: its errors say where, and a path that is no
// file of flags is one line and exit 1, never silently no flags.
TEST_F(CliTest, AFlagsFileNamedByXlaFlags) {
  std::string file = Write("reduce_sum.hlo", kReduceSum);
  std::string flags = Write("flags.txt", "--xla_dump_to=" + (dir_ / "dump").string() +
                                             "\n--xla_dump_hlo_pass_re=.*\n--xla_dump_hlo_as_txt\n");
  ::setenv("XLA_FLAGS", flags.c_str(), 1);
  RunResult bad_line = RunXlens("opt " + file);
  ::setenv("XLA_FLAGS", dir_.c_str(), 1);
  RunResult directory = RunXlens("opt " + file);
  ::setenv("XLA_FLAGS", "--xla_dump_to=d --xla_dump_hlo_module_re=(", 1);
  RunResult bad_regex = RunXlens("opt " + file);
  ::unsetenv("XLA_FLAGS");
  EXPECT_EQ(bad_line.exit_code, 1);
  EXPECT_EQ(bad_line.output, "xlens: " + flags +
                                 ":3: unknown flag --xla_dump_hlo_as_txt; did you mean "
                                 "--xla_dump_hlo_as_text?\n");
  EXPECT_EQ(directory.exit_code, 1);
  EXPECT_THAT(directory.output, HasSubstr("is a directory"));
  EXPECT_EQ(bad_regex.exit_code, 1);
  EXPECT_EQ(bad_regex.output,
            "xlens: XLA_FLAGS: --xla_dump_hlo_module_re=(: expected a regular expression (RE2 "
            "syntax): missing )\n");
}

TEST_F(CliTest, OptToStdoutWritesXlaBeginEndMarkers) {
  std::string file = Write("reduce_sum.hlo", kReduceSum);
  RunResult run = RunXlens("opt " + file + " --xla_dump_to=-");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("*** Begin module_0001.reduce_sum.before_optimizations.txt ***"));
  EXPECT_THAT(run.output, HasSubstr("*** End module_0001.reduce_sum.before_optimizations.txt ***"));
}

}  // namespace
}  // namespace xlens
