#include "dump/dump_context.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <sstream>
#include <thread>

#include "compiler/hlo/parser.h"
#include "compiler/hlo/printer.h"
#include "compiler/support/file_io.h"
#include "dump/dump_names.h"
#include "dump/manifest.h"
#include "processes_at_once.h"

namespace xlens {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

constexpr std::string_view kModuleText =
    R"(HloModule cluster_0, entry_computation_layout={(f32[4]{0}, f32[4]{0})->f32[]}

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %sum = f32[] add(f32[] %a, f32[] %b)
}

ENTRY %main (x: f32[4], y: f32[4]) -> f32[] {
  %x = f32[4]{0} parameter(0)
  %y = f32[4]{0} parameter(1)
  %mul = f32[4]{0} multiply(f32[4]{0} %x, f32[4]{0} %y), metadata={op_type="Mul" op_name="model/mul{1}"}
  %zero = f32[] constant(0)
  ROOT %r = f32[] reduce(f32[4]{0} %mul, f32[] %zero), dimensions={0}, to_apply=%add, metadata={op_type="Sum" op_name="model/sum"}
}
)";

std::unique_ptr<HloModule> ParseOrDie(std::string_view name = "cluster_0") {
  auto module = ParseHloModule(kModuleText);
  EXPECT_TRUE(module.ok()) << module.status().message();
  if (!module.ok()) return nullptr;
  (*module)->set_name(std::string(name));
  return std::move(module).value();
}

DumpContextOptions WithDot(std::string program) {
  DumpContextOptions options;
  options.dot_program = std::move(program);
  return options;
}
DumpContextOptions WithTimestamp(int64_t micros) {
  DumpContextOptions options;
  options.fixed_timestamp_us = micros;
  return options;
}
DumpContextOptions WithStdout(std::ostream& out) {
  DumpContextOptions options;
  options.stdout_stream = &out;
  return options;
}

class DumpContextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "xlens_dump_test_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    dir_ = root_ + "/dump";
    module_ = ParseOrDie();
    ASSERT_NE(module_, nullptr);
  }
  void TearDown() override { fs::remove_all(root_); }

  DebugOptions DumpTo(std::string dir) {
    DebugOptions options;
    options.xla_dump_to = std::move(dir);
    return options;
  }
  std::set<std::string> Files() const {
    std::set<std::string> files;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir_, ec)) {
      files.insert(entry.path().filename().string());
    }
    return files;
  }
  std::string Read(const std::string& name) const {
    StatusOr<std::string> text = ReadFile(dir_ + "/" + name);
    EXPECT_TRUE(text.ok()) << text.status().message();
    return text.ok() ? *text : "";
  }

  std::string root_;
  std::string dir_;
  std::unique_ptr<HloModule> module_;
};

TEST_F(DumpContextTest, NothingIsDumpedWithoutFlags) {
  DumpContext context(DebugOptions{});
  EXPECT_FALSE(context.enabled());
  EXPECT_THAT(context.DumpModule(*module_, kBeforeOptimizations), IsEmpty());
  EXPECT_EQ(context.DumpText(*module_, "ptx", "x"), "");
  EXPECT_FALSE(context.IsDumped(*module_));
  EXPECT_THAT(context.warnings(), IsEmpty());
}

TEST_F(DumpContextTest, TextIsTheDefaultFormat) {
  {
    DumpContext context(DumpTo(dir_));
    EXPECT_TRUE(context.dump_as_text());
    EXPECT_EQ(context.BeginModule(*module_), 1);
    EXPECT_THAT(context.DumpModule(*module_, kBeforeOptimizations),
                ElementsAre("module_0001.cluster_0.before_optimizations.txt"));
    EXPECT_THAT(context.DumpModule(*module_, CpuAfterOptimizationsName(), "buffers: 3"),
                ElementsAre("module_0001.cluster_0.cpu_after_optimizations.txt",
                            "module_0001.cluster_0.cpu_after_optimizations-buffer-assignment.txt"));
    context.EndModule(*module_);
    EXPECT_THAT(context.warnings(), IsEmpty());
  }
  // Written whole, through a temporary name that is gone.
  EXPECT_THAT(Files(), UnorderedElementsAre(
                           "module_0001.cluster_0.before_optimizations.txt",
                           "module_0001.cluster_0.cpu_after_optimizations.txt",
                           "module_0001.cluster_0.cpu_after_optimizations-buffer-assignment.txt",
                           "manifest.json"));
  EXPECT_EQ(Read("module_0001.cluster_0.before_optimizations.txt"), PrintModule(*module_));
  EXPECT_EQ(Read("module_0001.cluster_0.cpu_after_optimizations-buffer-assignment.txt"),
            "buffers: 3");
  StatusOr<Manifest> manifest = ReadManifest(dir_ + "/manifest.json");
  ASSERT_TRUE(manifest.ok()) << manifest.status().message();
  ASSERT_EQ(manifest->modules.size(), 1u);
  EXPECT_EQ(manifest->modules[0].id, 1);
  EXPECT_EQ(manifest->modules[0].name, "cluster_0");
  EXPECT_EQ(manifest->modules[0].files.size(), 3u);
}

TEST_F(DumpContextTest, DotAndHtmlFormats) {
  DebugOptions options = DumpTo(dir_);
  options.xla_dump_hlo_as_dot = true;
  options.xla_dump_hlo_as_html = true;
  DumpContext context(options);
  EXPECT_FALSE(context.dump_as_text()) << "a format was chosen, so text is not implied";
  std::vector<std::string> files = context.DumpModule(*module_, kBeforeOptimizations);
  EXPECT_THAT(files, ElementsAre("module_0001.cluster_0.before_optimizations.dot",
                                 "module_0001.cluster_0.before_optimizations.html"));
  EXPECT_THAT(Read(files[0]), HasSubstr("digraph"));
  std::string html = Read(files[1]);
  EXPECT_THAT(html, HasSubstr("<!DOCTYPE html>"));
  EXPECT_THAT(html, HasSubstr("%mul = f32[4]{0} multiply"));
  if (std::system("dot -V >/dev/null 2>&1") == 0) {
    EXPECT_THAT(html, HasSubstr("<svg"));
    EXPECT_THAT(html, Not(HasSubstr("<?xml")));
    EXPECT_THAT(context.warnings(), IsEmpty());
  } else {
    EXPECT_THAT(html, HasSubstr("could not be drawn"));
  }
}

TEST_F(DumpContextTest, HtmlWithoutGraphvizShowsTheDotSourceAndWarnsOnce) {
  DebugOptions options = DumpTo(dir_);
  options.xla_dump_hlo_as_html = true;
  DumpContext context(options, WithDot("/nonexistent/bin/dot"));
  context.DumpModule(*module_, kBeforeOptimizations);
  context.DumpModule(*module_, CpuAfterOptimizationsName());
  std::string html = Read("module_0001.cluster_0.before_optimizations.html");
  EXPECT_THAT(html, HasSubstr("could not be drawn"));
  EXPECT_THAT(html, HasSubstr("digraph"));
  EXPECT_THAT(html, Not(HasSubstr("<svg")));
  ASSERT_EQ(context.warnings().size(), 1u);
  EXPECT_THAT(context.warnings()[0], HasSubstr("/nonexistent/bin/dot"));
}

TEST_F(DumpContextTest, PassBoundariesFollowThePassRegex) {
  DebugOptions options = DumpTo(dir_);
  {
    DumpContext context(options);
    EXPECT_FALSE(context.dumps_passes());
    EXPECT_THAT(context.DumpPassBoundary(*module_, 0, "opt", kPipelineStart, "dce"), IsEmpty());
  }
  options.xla_dump_hlo_pass_re = "simplif";
  DumpContext context(options);
  EXPECT_TRUE(context.ShouldDumpPass("algebraic-simplifier", "dce"));
  EXPECT_TRUE(context.ShouldDumpPass(kPipelineStart, "algebraic-simplifier"));
  EXPECT_FALSE(context.ShouldDumpPass("cse", "dce"));
  EXPECT_THAT(context.DumpPassBoundary(*module_, 3, "opt", "cse", "dce"), IsEmpty());
  EXPECT_THAT(
      context.DumpPassBoundary(*module_, 4, "opt", "algebraic-simplifier", "dce"),
      ElementsAre("module_0001.cluster_0.0004.opt.after_algebraic-simplifier.before_dce.txt"));
  // Without a step of its own the context counts its dumps, as XLA does.
  EXPECT_THAT(
      context.DumpPassBoundary(*module_, -1, "opt", kPipelineStart, "simplify"),
      ElementsAre("module_0001.cluster_0.0000.opt.after_pipeline-start.before_simplify.txt"));
  EXPECT_THAT(context.DumpPassBoundary(*module_, -1, "opt", "simplify", kPipelineEnd),
              ElementsAre("module_0001.cluster_0.0001.opt.after_simplify.before_pipeline-end.txt"));
}

TEST_F(DumpContextTest, ModuleRegexSelectsModules) {
  DebugOptions options = DumpTo(dir_);
  options.xla_dump_hlo_module_re = "^cluster";
  DumpContext context(options);
  auto main_module = ParseOrDie("main");
  EXPECT_FALSE(context.IsDumped(*main_module));
  EXPECT_TRUE(context.IsDumped(*module_));
  EXPECT_THAT(context.DumpModule(*main_module, kBeforeOptimizations), IsEmpty());
  EXPECT_THAT(context.DumpModule(*module_, kBeforeOptimizations),
              ElementsAre("module_0002.cluster_0.before_optimizations.txt"));
}

// XLA matches with RE2: linear in the name, so neither a 50,000-character module name (std::regex
// recursed per character and overflowed the stack) nor a pattern that backtracks exponentially
// holds up a compilation.
TEST_F(DumpContextTest, RegexesMatchLongNamesInLinearTime) {
  DebugOptions options = DumpTo(dir_);
  options.xla_dump_hlo_module_re = "m+$";
  options.xla_dump_hlo_pass_re = "(.*.*)*x";
  DumpContext context(options);
  auto long_module = ParseOrDie(std::string(50000, 'm'));
  EXPECT_TRUE(context.IsDumped(*long_module));
  EXPECT_FALSE(context.IsDumped(*module_));
  EXPECT_FALSE(context.ShouldDumpPass(std::string(50000, 'a'), "dce"));
  EXPECT_TRUE(context.ShouldDumpPass("simplify", "fusion-x"));
  EXPECT_THAT(context.warnings(), IsEmpty());
}

// The flag parser refuses a bad pattern; one set in DebugOptions directly cannot fail the
// compilation, so it is one warning and matches nothing.
TEST_F(DumpContextTest, ABadRegexSetDirectlyWarnsAndMatchesNothing) {
  DebugOptions options = DumpTo(dir_);
  options.xla_dump_hlo_module_re = "(\x1b";
  DumpContext context(options);
  EXPECT_FALSE(context.IsDumped(*module_));
  EXPECT_THAT(context.warnings(),
              ElementsAre("--xla_dump_hlo_module_re=(\\x1b is not a regular expression (missing "
                          ")); it matches nothing"));
}

TEST_F(DumpContextTest, IdsContinueAfterWhatIsInTheDirectory) {
  fs::create_directories(dir_);
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/module_0007.old.before_optimizations.txt", "x").ok());
  DumpContext context(DumpTo(dir_));
  EXPECT_EQ(context.BeginModule(*module_), 8);
  EXPECT_EQ(context.BeginModule(*module_), 8);
  // A second context in the same process gets the next id even before anything is on disk.
  DumpContext other(DumpTo(dir_));
  auto second = ParseOrDie("second");
  EXPECT_EQ(other.BeginModule(*second), 9);
}

TEST_F(DumpContextTest, MaxModulesCountsTheDirectory) {
  DebugOptions options = DumpTo(dir_);
  options.xla_dump_max_hlo_modules = 2;
  auto a = ParseOrDie("a");
  auto b = ParseOrDie("b");
  auto c = ParseOrDie("c");
  {
    DumpContext context(options);
    EXPECT_THAT(context.DumpModule(*a, kBeforeOptimizations),
                ElementsAre(HasSubstr("module_0001")));
    context.EndModule(*a);
  }
  // A later process sees module 1 on disk: one more fits.
  DumpContext context(options);
  EXPECT_THAT(context.DumpModule(*b, kBeforeOptimizations), ElementsAre(HasSubstr("module_0002")));
  EXPECT_THAT(context.DumpModule(*c, kBeforeOptimizations), IsEmpty());
  EXPECT_THAT(context.DumpText(*c, kPtxSuffix, "ptx"), IsEmpty());
  ASSERT_EQ(context.warnings().size(), 1u);
  EXPECT_THAT(context.warnings()[0], HasSubstr("--xla_dump_max_hlo_modules=2"));
  options.xla_dump_max_hlo_modules = 0;
  DumpContext none(options);
  EXPECT_FALSE(none.IsDumped(*c));
}

TEST_F(DumpContextTest, TimestampPrefixesModuleDumpsOnly) {
  DebugOptions options = DumpTo(dir_);
  options.xla_dump_include_timestamp = true;
  DumpContext context(options, WithTimestamp(1700000000123456));
  EXPECT_THAT(context.DumpModule(*module_, kBeforeOptimizations),
              ElementsAre("1700000000123456.module_0001.cluster_0.before_optimizations.txt"));
  // As XLA: LLVM IR, PTX and thunk dumps carry no timestamp.
  EXPECT_EQ(context.DumpText(*module_, LlvmIrSuffix(false), "; ir"),
            "module_0001.cluster_0.ir-no-opt.ll");
}

TEST_F(DumpContextTest, CodegenTextDumps) {
  DumpContext context(DumpTo(dir_));
  EXPECT_EQ(context.DumpText(*module_, LlvmIrSuffix(false), "; before"),
            "module_0001.cluster_0.ir-no-opt.ll");
  EXPECT_EQ(context.DumpText(*module_, LlvmIrSuffix(true), "; after"),
            "module_0001.cluster_0.ir-with-opt.ll");
  EXPECT_EQ(context.DumpText(*module_, kPtxSuffix, ".version 8.0"), "module_0001.cluster_0.ptx");
  EXPECT_EQ(context.DumpText(*module_, kThunkSequenceSuffix, "kernel fusion"),
            "module_0001.cluster_0.thunk_sequence.txt");
  EXPECT_EQ(Read("module_0001.cluster_0.ptx"), ".version 8.0");
  context.FlushManifest();
  StatusOr<Manifest> manifest = ReadManifest(dir_ + "/manifest.json");
  ASSERT_TRUE(manifest.ok()) << manifest.status().message();
  EXPECT_THAT(
      manifest->modules[0].files,
      ElementsAre("module_0001.cluster_0.ir-no-opt.ll", "module_0001.cluster_0.ir-with-opt.ll",
                  "module_0001.cluster_0.ptx", "module_0001.cluster_0.thunk_sequence.txt"));
}

TEST_F(DumpContextTest, StagesAndKernelsGoIntoTheManifest) {
  DebugOptions options = DumpTo(dir_);
  options.xla_dump_hlo_pass_re = ".*";
  auto second = ParseOrDie("cluster_1");
  {
    DumpContext context(options);
    std::vector<std::string> files =
        context.DumpPassBoundary(*module_, 0, "opt", "dce", kPipelineEnd);
    context.RecordStage(*module_, ManifestStage{0, "opt", "dce", true, 42, files, {}});
    context.RecordKernel(*module_, ManifestKernel{"fusion",
                                                  "kLoop",
                                                  "fusion",
                                                  "fused_computation",
                                                  {"model/mul", "model/sum"},
                                                  "instruction-fusion",
                                                  {}});
    context.EndModule(*module_);
  }
  {
    DumpContext context(options);
    context.DumpModule(*second, kBeforeOptimizations);
    context.EndModule(*second);
  }
  StatusOr<Manifest> manifest = ReadManifest(dir_ + "/manifest.json");
  ASSERT_TRUE(manifest.ok()) << manifest.status().message();
  ASSERT_EQ(manifest->modules.size(), 2u);
  const ManifestModule& first = manifest->modules[0];
  EXPECT_EQ(first.name, "cluster_0");
  ASSERT_EQ(first.stages.size(), 1u);
  EXPECT_EQ(first.stages[0].wall_ns, 42);
  EXPECT_THAT(first.stages[0].files,
              ElementsAre("module_0001.cluster_0.0000.opt.after_dce.before_pipeline-end.txt"));
  ASSERT_EQ(first.kernels.size(), 1u);
  EXPECT_THAT(first.kernels[0].op_names, ElementsAre("model/mul", "model/sum"));
  EXPECT_EQ(manifest->modules[1].id, 2);
  EXPECT_EQ(manifest->modules[1].name, "cluster_1");
}

TEST_F(DumpContextTest, DirectoryThatCannotBeCreatedWarnsOnce) {
  ASSERT_TRUE(WriteFileAtomic(root_ + "/a_file", "x").ok());
  DumpContext context(DumpTo(root_ + "/a_file/dump"));
  EXPECT_THAT(context.DumpModule(*module_, kBeforeOptimizations), IsEmpty());
  EXPECT_THAT(context.DumpModule(*module_, CpuAfterOptimizationsName()), IsEmpty());
  EXPECT_EQ(context.DumpText(*module_, kPtxSuffix, "ptx"), "");
  context.EndModule(*module_);
  std::vector<std::string> warnings = context.warnings();
  ASSERT_EQ(warnings.size(), 1u) << ::testing::PrintToString(warnings);
  EXPECT_THAT(warnings[0], HasSubstr("cannot create the dump directory"));
  EXPECT_THAT(warnings[0], HasSubstr("a_file/dump"));
}

TEST_F(DumpContextTest, FilesThatCannotBeWrittenAreCountedInOneWarning) {
  DumpContext context(DumpTo(dir_));
  ASSERT_EQ(context.BeginModule(*module_), 1);
  // A directory where each file should go makes every rename fail.
  fs::create_directories(dir_ + "/module_0001.cluster_0.before_optimizations.txt");
  fs::create_directories(dir_ + "/module_0001.cluster_0.ptx");
  EXPECT_THAT(context.DumpModule(*module_, kBeforeOptimizations), IsEmpty());
  EXPECT_EQ(context.DumpText(*module_, kPtxSuffix, "ptx"), "");
  std::vector<std::string> warnings = context.warnings();
  ASSERT_EQ(warnings.size(), 1u) << ::testing::PrintToString(warnings);
  EXPECT_THAT(warnings[0], HasSubstr("could not write 2 dump files"));
  for (const std::string& file : Files()) {
    EXPECT_THAT(file, Not(HasSubstr(".tmp."))) << "temporary file left behind";
  }
}

TEST_F(DumpContextTest, StdoutModePrintsXlasMarkers) {
  std::ostringstream out;
  DumpContext context(DumpTo("-"), WithStdout(out));
  EXPECT_TRUE(context.dumping_to_stdout());
  // Ids in stdout mode are numbered across the whole process, as XLA's unique ids are.
  const int64_t id = context.BeginModule(*module_);
  const std::string text_name = DumpFileName(id, "cluster_0", "", "before_optimizations.txt");
  const std::string ptx_name = DumpFileName(id, "cluster_0", "", "ptx");
  EXPECT_THAT(context.DumpModule(*module_, kBeforeOptimizations), IsEmpty());
  context.DumpText(*module_, kPtxSuffix, ".version 8.0");
  context.EndModule(*module_);
  EXPECT_EQ(out.str(), "*** Begin " + text_name + " ***\n" + PrintModule(*module_) + "\n*** End " +
                           text_name + " ***\n*** Begin " + ptx_name +
                           " ***\n.version 8.0\n*** End " + ptx_name + " ***\n");
  EXPECT_FALSE(fs::exists("-")) << "stdout mode wrote a directory named -";
}

TEST_F(DumpContextTest, AFormatWithoutADirectoryDumpsToStdoutAndRefusesGraphs) {
  DebugOptions options;
  options.xla_dump_hlo_as_text = true;
  options.xla_dump_hlo_as_dot = true;
  std::ostringstream out;
  DumpContext context(options, WithStdout(out));
  EXPECT_TRUE(context.dumping_to_stdout());
  context.DumpModule(*module_, kBeforeOptimizations);
  EXPECT_THAT(out.str(), HasSubstr(".cluster_0.before_optimizations.txt ***"));
  EXPECT_THAT(out.str(), Not(HasSubstr("digraph")));
  ASSERT_EQ(context.warnings().size(), 1u);
  EXPECT_THAT(context.warnings()[0], HasSubstr("refusing to print .dot and .html"));
}

TEST_F(DumpContextTest, DisableMetadataStripsIt) {
  DebugOptions options = DumpTo(dir_);
  options.xla_dump_disable_metadata = true;
  DumpContext context(options);
  context.DumpModule(*module_, kBeforeOptimizations);
  std::string text = Read("module_0001.cluster_0.before_optimizations.txt");
  EXPECT_THAT(text, Not(HasSubstr("metadata")));
  EXPECT_THAT(text, HasSubstr("to_apply=%add\n"));
  EXPECT_THAT(text, HasSubstr("multiply(f32[4]{0} %x, f32[4]{0} %y)\n"));
  // What remains parses to the same module, less its metadata.
  auto parsed = ParseHloModule(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ((*parsed)->instruction_count(), module_->instruction_count());
}

TEST_F(DumpContextTest, ThreadsDumpingAtOnceGetDistinctIdsAndOneManifest) {
  constexpr int kThreads = 8;
  std::vector<std::unique_ptr<HloModule>> modules;
  for (int i = 0; i < kThreads; ++i) modules.push_back(ParseOrDie("m" + std::to_string(i)));
  {
    DumpContext context(DumpTo(dir_));
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        context.DumpModule(*modules[i], kBeforeOptimizations);
        context.DumpText(*modules[i], kPtxSuffix, "ptx");
        context.EndModule(*modules[i]);
      });
    }
    for (std::thread& thread : threads) thread.join();
    EXPECT_THAT(context.warnings(), IsEmpty());
  }
  EXPECT_EQ(Files().size(), 2u * kThreads + 1);
  StatusOr<Manifest> manifest = ReadManifest(dir_ + "/manifest.json");
  ASSERT_TRUE(manifest.ok()) << manifest.status().message();
  std::set<int64_t> ids;
  for (const ManifestModule& module : manifest->modules) {
    ids.insert(module.id);
    EXPECT_EQ(module.files.size(), 2u) << module.name;
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(kThreads));
}

// Compilations in several processes dumping into one directory at once: each module gets its own
// number (module_0001, module_0002, ...), and the manifest lists every module of every process.
TEST_F(DumpContextTest, ProcessesDumpingAtOnceGetDistinctNumbersAndOneManifest) {
  constexpr int kProcesses = 6;
  testing::RunInProcessesAtOnce(kProcesses, [&](int p) {
    std::unique_ptr<HloModule> module = ParseOrDie("m" + std::to_string(p));
    DumpContext context(DumpTo(dir_));
    bool ok = context.DumpModule(*module, kBeforeOptimizations).size() == 1;
    context.EndModule(*module);
    return ok && context.warnings().empty();
  });
  std::set<int64_t> numbers;
  for (const std::string& file : Files()) {
    if (file != "manifest.json") numbers.insert(ModuleIdFromFileName(file));
  }
  EXPECT_EQ(numbers.size(), static_cast<size_t>(kProcesses)) << ::testing::PrintToString(Files());
  StatusOr<Manifest> manifest = ReadManifest(dir_ + "/manifest.json");
  ASSERT_TRUE(manifest.ok()) << manifest.status().message();
  std::set<int64_t> listed;
  for (const ManifestModule& module : manifest->modules) {
    listed.insert(module.id);
    EXPECT_EQ(module.files.size(), 1u) << module.name;
  }
  EXPECT_EQ(listed, numbers);
}

// Two contexts in one process (two compilations in one program) dumping at once.
TEST_F(DumpContextTest, ContextsInThreadsDumpingAtOnceGetDistinctNumbers) {
  constexpr int kThreads = 6;
  std::vector<std::unique_ptr<HloModule>> modules;
  for (int i = 0; i < kThreads; ++i) modules.push_back(ParseOrDie("m" + std::to_string(i)));
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      DumpContext context(DumpTo(dir_));
      context.DumpModule(*modules[i], kBeforeOptimizations);
      context.EndModule(*modules[i]);
    });
  }
  for (std::thread& thread : threads) thread.join();
  StatusOr<Manifest> manifest = ReadManifest(dir_ + "/manifest.json");
  ASSERT_TRUE(manifest.ok()) << manifest.status().message();
  std::set<int64_t> ids;
  for (const ManifestModule& module : manifest->modules) ids.insert(module.id);
  EXPECT_EQ(ids.size(), static_cast<size_t>(kThreads));
  EXPECT_EQ(Files().size(), static_cast<size_t>(kThreads) + 1);
}

// A compilation killed half way leaves a manifest that lists what it wrote: the manifest is
// updated as each file lands, not only when the module ends.
TEST_F(DumpContextTest, TheManifestListsEachFileAsItIsWritten) {
  DebugOptions options = DumpTo(dir_);
  options.xla_dump_hlo_pass_re = ".*";
  DumpContext context(options);
  context.DumpModule(*module_, kBeforeOptimizations);
  StatusOr<Manifest> manifest = ReadManifest(dir_ + "/manifest.json");
  ASSERT_TRUE(manifest.ok()) << manifest.status().message();
  ASSERT_EQ(manifest->modules.size(), 1u);
  EXPECT_THAT(manifest->modules[0].files,
              ElementsAre("module_0001.cluster_0.before_optimizations.txt"));

  ManifestStage stage;
  stage.step = 0;
  stage.pipeline = "simplification";
  stage.pass = "dce";
  stage.changed = true;
  stage.files = context.DumpPassBoundary(*module_, -1, "simplification", "dce", "cse");
  ASSERT_EQ(stage.files.size(), 1u);
  context.RecordStage(*module_, stage);
  manifest = ReadManifest(dir_ + "/manifest.json");
  ASSERT_TRUE(manifest.ok()) << manifest.status().message();
  ASSERT_EQ(manifest->modules[0].stages.size(), 1u);
  EXPECT_EQ(manifest->modules[0].stages[0].files, stage.files);

  context.DumpText(*module_, kPtxSuffix, "ptx");
  manifest = ReadManifest(dir_ + "/manifest.json");
  ASSERT_TRUE(manifest.ok()) << manifest.status().message();
  EXPECT_EQ(manifest->modules[0].files.size(), 2u);
}

TEST_F(DumpContextTest, StaleTemporariesOfDeadWritersAreRemovedOnStart) {
  fs::create_directories(dir_);
  // No process has pid 999999999 (pid_max is at most 2^22); this process is alive.
  const std::string stale = "module_0001.m.before_optimizations.txt.xlens-tmp.999999999.0";
  const std::string live =
      "module_0001.m.ptx.xlens-tmp." + std::to_string(::getpid()) + ".12345";
  const std::string not_ours = "notes.tmp.999999999.0";
  for (const std::string& name : {stale, live, not_ours}) {
    ASSERT_TRUE(WriteFile(dir_ + "/" + name, "x").ok());
  }
  DumpContext context(DumpTo(dir_));
  context.DumpModule(*module_, kBeforeOptimizations);
  std::set<std::string> files = Files();
  EXPECT_FALSE(files.count(stale)) << "a dead writer's temporary was kept";
  EXPECT_TRUE(files.count(live));
  EXPECT_TRUE(files.count(not_ours));
}

TEST_F(DumpContextTest, ACorruptManifestIsSetAsideWithOneWarningAndTheDumpGoesOn) {
  fs::create_directories(dir_);
  ASSERT_TRUE(WriteFile(dir_ + "/manifest.json",
                        R"({"format": 1, "modules": [{"id": 1e400, "name": "x"}]})")
                  .ok());
  {
    DumpContext context(DumpTo(dir_));
    EXPECT_EQ(context.DumpModule(*module_, kBeforeOptimizations).size(), 1u);
    context.EndModule(*module_);
    std::vector<std::string> warnings = context.warnings();
    ASSERT_EQ(warnings.size(), 1u) << ::testing::PrintToString(warnings);
    EXPECT_THAT(warnings[0], HasSubstr("manifest.json"));
    EXPECT_THAT(warnings[0], HasSubstr("1e400"));
    EXPECT_THAT(warnings[0], HasSubstr("manifest.json.corrupt.1"));
    EXPECT_THAT(context.Summary(), HasSubstr("manifest.json lists every file"));
  }
  EXPECT_TRUE(fs::exists(dir_ + "/manifest.json.corrupt.1"));
  StatusOr<Manifest> manifest = ReadManifest(dir_ + "/manifest.json");
  ASSERT_TRUE(manifest.ok()) << manifest.status().message();
  EXPECT_EQ(manifest->modules.size(), 1u);
}

TEST_F(DumpContextTest, AFifoNamedManifestIsLeftAloneAndTheDumpGoesOn) {
  fs::create_directories(dir_);
  ASSERT_EQ(::mkfifo((dir_ + "/manifest.json").c_str(), 0644), 0);
  DumpContext context(DumpTo(dir_));
  EXPECT_EQ(context.DumpModule(*module_, kBeforeOptimizations).size(), 1u);
  context.EndModule(*module_);
  context.FlushManifest();
  std::vector<std::string> warnings = context.warnings();
  ASSERT_EQ(warnings.size(), 1u) << ::testing::PrintToString(warnings);
  EXPECT_THAT(warnings[0], HasSubstr("a FIFO"));
  EXPECT_THAT(warnings[0], HasSubstr("manifest is not written"));
  EXPECT_THAT(context.Summary(), HasSubstr("dumped 1 file to"));
  EXPECT_THAT(context.Summary(), HasSubstr("manifest.json was not written"));
  struct stat st;
  ASSERT_EQ(::lstat((dir_ + "/manifest.json").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

TEST_F(DumpContextTest, TheSummarySaysWhatWasAndWasNotWritten) {
  {
    DumpContext context(DumpTo(dir_));
    context.DumpModule(*module_, kBeforeOptimizations);
    context.DumpText(*module_, kPtxSuffix, "ptx");
    context.FlushManifest();
    EXPECT_THAT(context.Summary(), HasSubstr("dumped 2 files to"));
    EXPECT_THAT(context.Summary(), HasSubstr("(manifest.json lists every file)"));
  }
  {
    DebugOptions options = DumpTo(root_ + "/other");
    options.xla_dump_hlo_module_re = "no_such_module";
    DumpContext context(options);
    context.DumpModule(*module_, kBeforeOptimizations);
    context.FlushManifest();
    EXPECT_THAT(context.Summary(), HasSubstr("nothing dumped"));
  }
  {
    ASSERT_TRUE(WriteFile(root_ + "/a_file", "x").ok());
    DumpContext context(DumpTo(root_ + "/a_file/dump"));
    context.DumpModule(*module_, kBeforeOptimizations);
    EXPECT_THAT(context.Summary(), HasSubstr("nothing dumped"));
    EXPECT_THAT(context.Summary(), HasSubstr("could not be created"));
  }
  {
    const std::string third = root_ + "/third";
    DumpContext context(DumpTo(third));
    std::unique_ptr<HloModule> module = ParseOrDie("m3");
    ASSERT_EQ(context.BeginModule(*module), 1);
    fs::create_directories(third + "/module_0001.m3.ptx");
    context.DumpModule(*module, kBeforeOptimizations);
    context.DumpText(*module, kPtxSuffix, "ptx");
    context.FlushManifest();
    EXPECT_THAT(context.Summary(), HasSubstr("dumped 1 file to"));
    EXPECT_THAT(context.Summary(), HasSubstr("1 more could not be written"));
    EXPECT_THAT(context.Summary(), Not(HasSubstr("every file")));
  }
}

// An HTML dump renders through pipes: no temporary directory is needed, so a TMPDIR that does
// not exist (std::filesystem::temp_directory_path throws then) changes nothing.
TEST_F(DumpContextTest, HtmlDumpsDoNotNeedTmpdir) {
  const char* old = std::getenv("TMPDIR");
  std::string saved = old ? old : "";
  ::setenv("TMPDIR", (root_ + "/no-such-tmp").c_str(), 1);
  DebugOptions options = DumpTo(dir_);
  options.xla_dump_hlo_as_html = true;
  std::string html;
  {
    DumpContext context(options);
    EXPECT_EQ(context.DumpModule(*module_, kBeforeOptimizations).size(), 1u);
    html = Read("module_0001.cluster_0.before_optimizations.html");
    if (std::system("dot -V >/dev/null 2>&1") == 0) {
      EXPECT_THAT(html, HasSubstr("<svg"));
      EXPECT_THAT(context.warnings(), IsEmpty());
    }
  }
  if (old) {
    ::setenv("TMPDIR", saved.c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
}

TEST(StripHloMetadataTest, BracesInsideQuotesDoNotEndIt) {
  EXPECT_EQ(
      StripHloMetadata(R"(%a = add(%x), metadata={op_name="a}{b" line=3}, backend_config="{}")"),
      R"(%a = add(%x), backend_config="{}")");
  EXPECT_EQ(StripHloMetadata("no metadata here"), "no metadata here");
  // Unbalanced text is left alone rather than cut.
  EXPECT_EQ(StripHloMetadata("x, metadata={op_name=\"a\"\ny"), "x, metadata={op_name=\"a\"\ny");
}

}  // namespace
}  // namespace xlens
