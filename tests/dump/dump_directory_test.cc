#include "dump/dump_directory.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "compiler/support/temporary_directory.h"
#include "dump/xla_dump_kernels.h"

namespace xlens {
namespace {

void Touch(const std::string& path, const std::string& text = "x") { std::ofstream(path) << text; }

const UnplacedDumpFile* FindUnplaced(const DumpDirectory& dump, const std::string& file) {
  for (const UnplacedDumpFile& unplaced : dump.unplaced) {
    if (unplaced.file == file) return &unplaced;
  }
  return nullptr;
}

constexpr const char* kOptimized = R"(HloModule jit_f, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

FileNames
1 "/src/train.py"

FunctionNames
1 "loss"

FileLocations
1 {file_name_id=1 function_name_id=1 line=15 end_line=15 column=11 end_column=53}

StackFrames
1 {file_location_id=1 parent_frame_id=1}


%fused_computation (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%p), metadata={op_name="jit(f)/neg" stack_frame_id=1}
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %negate_fusion = f32[4]{0} fusion(%x), kind=kLoop, calls=%fused_computation
}
)";

TEST(DumpDirectoryTest, RebuildsModulesStagesAndKernelsFromXlaNames) {
  auto dir = TemporaryDirectory::Create("dump_directory_test");
  ASSERT_TRUE(dir.ok());
  const std::string d = dir->path();
  Touch(d + "/module_0004.jit_f.before_optimizations.txt");
  // Steps out of name order: 10 sorts after 9 by number.
  Touch(d + "/module_0004.jit_f.0010.simp.after_dce.before_cse.txt");
  Touch(d + "/module_0004.jit_f.0009.simp.after_algsimp.before_dce.txt");
  Touch(d + "/module_0004.jit_f.0009.simp.after_algsimp.before_dce.dot");
  Touch(d + "/module_0004.jit_f.cpu_after_optimizations.txt", kOptimized);
  Touch(d + "/module_0004.jit_f.cpu_after_optimizations-buffer-assignment.txt");
  Touch(d + "/module_0004.jit_f.negate_fusion_kernel_module.ir-with-opt.ll");
  Touch(d + "/module_0004.jit_f.debug_options");
  std::filesystem::create_directory(d + "/module_0004.jit_f");
  Touch(d + "/module_0004.jit_f/module.mlir");
  Touch(d + "/mark_for_compilation.pbtxt");
  Touch(d + "/mark_for_compilation.dot");
  Touch(d + "/before_mark_for_compilation.pbtxt");
  Touch(d + "/notes.txt");
  Touch(d + "/module_12.f.before_optimizations.txt");
  std::filesystem::create_symlink("module_0004.jit_f.debug_options", d + "/module_0005.g.debug_options");
  ASSERT_EQ(mkfifo((d + "/module_0006.h.before_optimizations.txt").c_str(), 0600), 0);

  DumpDirectoryOptions options;
  options.derive_kernels = DeriveKernelsFromHlo;
  DumpDirectory dump = ReadDumpDirectory(d, options);
  EXPECT_EQ(dump.source, DumpDirectory::Source::kXlaFileNames);
  EXPECT_TRUE(dump.problems.empty()) << dump.problems.front();
  ASSERT_EQ(dump.manifest.modules.size(), 1u);
  const ManifestModule& module = dump.manifest.modules[0];
  EXPECT_EQ(module.id, 4);
  EXPECT_EQ(module.name, "jit_f");
  ASSERT_EQ(module.stages.size(), 2u);
  EXPECT_EQ(module.stages[0].step, 9);
  EXPECT_EQ(module.stages[0].pass, "algsimp");
  EXPECT_EQ(module.stages[0].files.size(), 2u);
  EXPECT_EQ(module.stages[1].pass, "dce");
  EXPECT_EQ(module.files.size(), 6u);  // before, after, report, IR, debug_options, module.mlir
  ASSERT_EQ(module.kernels.size(), 1u);
  EXPECT_EQ(module.kernels[0].name, "negate_fusion");
  EXPECT_EQ(module.kernels[0].fusion_kind, "kLoop");
  ASSERT_EQ(module.kernels[0].op_names.size(), 1u);
  EXPECT_EQ(module.kernels[0].op_names[0], "jit(f)/neg");
  ASSERT_EQ(module.kernels[0].files.size(), 1u);
  const DumpSourceLocation* source = dump.KernelSource(4, "negate_fusion");
  ASSERT_NE(source, nullptr);
  EXPECT_EQ(source->file, "/src/train.py");
  EXPECT_EQ(source->line, 15);
  EXPECT_EQ(source->function, "loss");

  ASSERT_EQ(dump.manifest.graphs.size(), 1u);
  ASSERT_EQ(dump.manifest.graphs[0].stages.size(), 2u);
  EXPECT_EQ(dump.manifest.graphs[0].stages[0].name, "before_mark_for_compilation");
  EXPECT_EQ(dump.manifest.graphs[0].stages[1].files.size(), 2u);

  EXPECT_EQ(dump.placed_files, 12);
  ASSERT_EQ(dump.unplaced.size(), 4u);
  EXPECT_NE(FindUnplaced(dump, "notes.txt"), nullptr);
  EXPECT_NE(FindUnplaced(dump, "module_12.f.before_optimizations.txt"), nullptr);
  ASSERT_NE(FindUnplaced(dump, "module_0005.g.debug_options"), nullptr);
  EXPECT_NE(FindUnplaced(dump, "module_0005.g.debug_options")->reason.find("symbolic link"), std::string::npos);
  ASSERT_NE(FindUnplaced(dump, "module_0006.h.before_optimizations.txt"), nullptr);
  EXPECT_NE(dump.UnplacedSummary().find("4 files not placed"), std::string::npos);
}

TEST(DumpDirectoryTest, ManifestWinsAndKernelSourcesComeThroughTheInstruction) {
  auto dir = TemporaryDirectory::Create("dump_directory_test");
  ASSERT_TRUE(dir.ok());
  const std::string d = dir->path();
  Touch(d + "/module_0001.jit_f.cpu_after_optimizations.txt", kOptimized);
  Touch(d + "/manifest.json", R"({"format": 1, "modules": [{"id": 1, "name": "jit_f",
      "files": ["module_0001.jit_f.cpu_after_optimizations.txt"],
      "kernels": [{"name": "negate_fusion_kernel", "hlo_instruction": "negate_fusion"}]}]})");
  DumpDirectoryOptions options;
  options.derive_kernels = DeriveKernelsFromHlo;
  DumpDirectory dump = ReadDumpDirectory(d, options);
  EXPECT_EQ(dump.source, DumpDirectory::Source::kManifest);
  ASSERT_EQ(dump.manifest.modules.size(), 1u);
  ASSERT_EQ(dump.manifest.modules[0].kernels.size(), 1u);
  const DumpSourceLocation* source = dump.KernelSource(1, "negate_fusion_kernel");
  ASSERT_NE(source, nullptr);
  EXPECT_EQ(source->line, 15);
}

TEST(DumpDirectoryTest, EmptyMissingAndUnparsableSayWhat) {
  auto dir = TemporaryDirectory::Create("dump_directory_test");
  ASSERT_TRUE(dir.ok());
  DumpDirectory empty = ReadDumpDirectory(dir->path());
  ASSERT_EQ(empty.problems.size(), 1u);
  EXPECT_NE(empty.problems[0].find("no manifest.json"), std::string::npos);
  DumpDirectory missing = ReadDumpDirectory(dir->path() + "/gone");
  EXPECT_EQ(missing.source, DumpDirectory::Source::kNone);
  ASSERT_EQ(missing.problems.size(), 1u);

  Touch(dir->path() + "/module_0001.m.cpu_after_optimizations.txt", "HloModule m\nENTRY {");
  DumpDirectoryOptions options;
  options.derive_kernels = DeriveKernelsFromHlo;
  DumpDirectory broken = ReadDumpDirectory(dir->path(), options);
  ASSERT_EQ(broken.manifest.modules.size(), 1u);
  EXPECT_TRUE(broken.manifest.modules[0].kernels.empty());
  ASSERT_EQ(broken.problems.size(), 1u);
  EXPECT_NE(broken.problems[0].find("kernels not derived"), std::string::npos);
}

TEST(DumpDirectoryTest, OneIdUnderTwoNamesKeepsBoth) {
  auto dir = TemporaryDirectory::Create("dump_directory_test");
  ASSERT_TRUE(dir.ok());
  Touch(dir->path() + "/module_0000.a.before_optimizations.txt");
  Touch(dir->path() + "/module_0000.b.before_optimizations.txt");
  DumpDirectory dump = ReadDumpDirectory(dir->path());
  ASSERT_EQ(dump.manifest.modules.size(), 2u);
  EXPECT_NE(dump.manifest.modules[0].id, dump.manifest.modules[1].id);
  EXPECT_EQ(dump.problems.size(), 1u);
}

TEST(DumpDirectoryTest, TimestampsTellRunsApart) {
  auto dir = TemporaryDirectory::Create("dump_directory_test");
  ASSERT_TRUE(dir.ok());
  const std::string d = dir->path();
  Touch(d + "/1700000000000001.module_0000.jit_f.before_optimizations.txt");
  Touch(d + "/1700000000000001.module_0000.jit_f.0001.p.after_a.before_b.txt");
  Touch(d + "/1700000000000002.module_0000.jit_f.before_optimizations.txt");
  Touch(d + "/module_0000.jit_f.debug_options");  // no timestamp: the latest run's
  DumpDirectory dump = ReadDumpDirectory(d);
  ASSERT_EQ(dump.manifest.modules.size(), 2u);
  EXPECT_EQ(dump.manifest.modules[0].stages.size(), 1u);
  EXPECT_EQ(dump.manifest.modules[0].files.size(), 1u);
  EXPECT_EQ(dump.manifest.modules[1].files.size(), 2u);
  EXPECT_NE(dump.manifest.modules[0].id, dump.manifest.modules[1].id);
  ASSERT_EQ(dump.problems.size(), 1u);
  EXPECT_NE(dump.problems[0].find("dumped more than once"), std::string::npos);
  EXPECT_TRUE(dump.unplaced.empty());
}

}  // namespace
}  // namespace xlens
