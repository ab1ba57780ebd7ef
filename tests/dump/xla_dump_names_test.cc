#include "dump/xla_dump_names.h"

#include <gtest/gtest.h>

#include <string>

#include "dump/dump_names.h"

namespace xlens {
namespace {

TEST(XlaDumpNamesTest, WholeModuleDumpsAsJaxlibWritesThem) {
  XlaDumpFileName before = ParseXlaDumpFileName("module_0008.jit_step.before_optimizations.txt");
  EXPECT_EQ(before.kind, XlaDumpFileKind::kBeforeOptimizations);
  EXPECT_EQ(before.module_id, 8);
  EXPECT_EQ(before.module_name, "jit_step");

  XlaDumpFileName after = ParseXlaDumpFileName("module_0008.jit_step.cpu_after_optimizations.txt");
  EXPECT_EQ(after.kind, XlaDumpFileKind::kAfterOptimizations);
  EXPECT_EQ(after.module_name, "jit_step");
  EXPECT_EQ(after.suffix, "cpu_after_optimizations.txt");

  XlaDumpFileName gpu = ParseXlaDumpFileName("module_0003.jit_f.sm_9.0_gpu_after_optimizations.txt");
  EXPECT_EQ(gpu.kind, XlaDumpFileKind::kAfterOptimizations);
  EXPECT_EQ(gpu.module_name, "jit_f");

  for (const char* report : {"buffer-assignment", "memory-usage-report", "live-range", "buffer-assignment-values"}) {
    XlaDumpFileName r = ParseXlaDumpFileName(std::string("module_0008.jit_step.cpu_after_optimizations-") + report + ".txt");
    EXPECT_EQ(r.kind, XlaDumpFileKind::kModuleReport) << report;
    EXPECT_EQ(r.module_name, "jit_step") << report;
  }
  XlaDumpFileName options = ParseXlaDumpFileName("module_0008.jit_step.debug_options");
  EXPECT_EQ(options.kind, XlaDumpFileKind::kDebugOptions);
  EXPECT_EQ(options.module_name, "jit_step");
}

TEST(XlaDumpNamesTest, PassDumpsGiveStepPipelineAndPasses) {
  XlaDumpFileName pass = ParseXlaDumpFileName(
      "module_0008.jit_step.0042.HLO_passes_after_layout_assignment.after_pipeline-start.before_after_layout_assignment.txt");
  ASSERT_EQ(pass.kind, XlaDumpFileKind::kPass);
  EXPECT_EQ(pass.module_name, "jit_step");
  EXPECT_EQ(pass.step, 42);
  EXPECT_EQ(pass.pipeline, "HLO_passes_after_layout_assignment");
  EXPECT_EQ(pass.pass, "pipeline-start");
  EXPECT_EQ(pass.next_pass, "after_layout_assignment");

  // copy-insertion's sub-steps have no "before_".
  XlaDumpFileName sub = ParseXlaDumpFileName("module_0000.jit_f.0013.copy-insertion.after_adding_copies_to_resolve_interference.txt");
  ASSERT_EQ(sub.kind, XlaDumpFileKind::kPass);
  EXPECT_EQ(sub.pipeline, "copy-insertion");
  EXPECT_EQ(sub.pass, "adding_copies_to_resolve_interference");
  EXPECT_EQ(sub.next_pass, "");

  // xlens writes the same names (dump_names.h); the parser reads them back.
  std::string ours = DumpFileName(7, "m", "", PassBoundaryName(4, "simplification", "algsimp", "cse") + ".txt");
  XlaDumpFileName back = ParseXlaDumpFileName(ours);
  ASSERT_EQ(back.kind, XlaDumpFileKind::kPass) << ours;
  EXPECT_EQ(back.module_id, 7);
  EXPECT_EQ(back.step, 4);
  EXPECT_EQ(back.pass, "algsimp");
  EXPECT_EQ(back.next_pass, "cse");
}

TEST(XlaDumpNamesTest, ModuleNamesWithDotsAsTensorFlowWritesThem) {
  const std::string name = "a_inference_f_17__XlaMustCompile_true_config_proto_1_executor_type_2_.2";
  XlaDumpFileName before = ParseXlaDumpFileName("module_0000." + name + ".before_optimizations.txt");
  EXPECT_EQ(before.module_name, name);
  XlaDumpFileName pass = ParseXlaDumpFileName("module_0000." + name + ".0001.simplification.after_algsimp.before_dce.txt");
  ASSERT_EQ(pass.kind, XlaDumpFileKind::kPass);
  EXPECT_EQ(pass.module_name, name);
  EXPECT_EQ(pass.step, 1);
  // A module named like a step is still a name: the rightmost step that fits wins.
  XlaDumpFileName numbered = ParseXlaDumpFileName("module_0001.m.0007.0002.p.after_x.txt");
  ASSERT_EQ(numbered.kind, XlaDumpFileKind::kPass);
  EXPECT_EQ(numbered.module_name, "m.0007");
  EXPECT_EQ(numbered.step, 2);
}

TEST(XlaDumpNamesTest, KernelFilesNameTheirKernel) {
  XlaDumpFileName ir = ParseXlaDumpFileName("module_0008.jit_step.multiply_add_fusion_kernel_module.ir-with-opt.ll");
  ASSERT_EQ(ir.kind, XlaDumpFileKind::kLlvmIr);
  EXPECT_EQ(ir.module_name, "jit_step");
  EXPECT_EQ(ir.kernel, "multiply_add_fusion_kernel_module");
  EXPECT_EQ(KernelOfKernelModule(ir.kernel), "multiply_add_fusion");
  XlaDumpFileName whole = ParseXlaDumpFileName("module_0001.jit_f.ir-no-opt.ll");
  EXPECT_EQ(whole.kind, XlaDumpFileKind::kLlvmIr);
  EXPECT_EQ(whole.module_name, "jit_f");
  EXPECT_EQ(whole.kernel, "");
  XlaDumpFileName ours = ParseXlaDumpFileName(DumpFileName(1, "m", "", LlvmIrSuffix(true, "fusion_1")));
  EXPECT_EQ(ours.kind, XlaDumpFileKind::kLlvmIr);
  EXPECT_EQ(ours.kernel, "fusion_1");
  XlaDumpFileName object = ParseXlaDumpFileName("module_0008.jit_step.obj-file.multiply_add_fusion_kernel_module.o");
  EXPECT_EQ(object.kind, XlaDumpFileKind::kObjectFile);
  EXPECT_EQ(object.kernel, "multiply_add_fusion_kernel_module");
  EXPECT_EQ(object.module_name, "jit_step");
  XlaDumpFileName mlir = ParseXlaDumpFileName("module_0000.f.2.multiply_reduce_fusion_kernel_module-post-lowering.mlir");
  EXPECT_EQ(mlir.kind, XlaDumpFileKind::kMlir);
  EXPECT_EQ(mlir.kernel, "multiply_reduce_fusion_kernel_module");
  EXPECT_EQ(ParseXlaDumpFileName("module_0001.jit_f.ptx").kind, XlaDumpFileKind::kPtx);
  EXPECT_EQ(ParseXlaDumpFileName(DumpFileName(1, "m", "", kThunkSequenceSuffix)).kind, XlaDumpFileKind::kThunkSequence);
}

TEST(XlaDumpNamesTest, TimestampsAndDroppedNames) {
  XlaDumpFileName stamped = ParseXlaDumpFileName(
      DumpFileName(3, "jit_f", TimestampPrefix(1700000000123456), "before_optimizations.txt"));
  EXPECT_EQ(stamped.kind, XlaDumpFileKind::kBeforeOptimizations);
  EXPECT_EQ(stamped.timestamp, "1700000000123456");
  EXPECT_EQ(stamped.module_id, 3);
  EXPECT_EQ(stamped.module_name, "jit_f");
  // A name past 255 characters is left out by the writer.
  std::string dropped = DumpFileName(2, std::string(300, 'n'), "", "cpu_after_optimizations.txt");
  XlaDumpFileName noname = ParseXlaDumpFileName(dropped);
  EXPECT_EQ(noname.kind, XlaDumpFileKind::kAfterOptimizations);
  EXPECT_EQ(noname.module_name, "");
}

TEST(XlaDumpNamesTest, TensorFlowGraphDumps) {
  XlaDumpFileName graph = ParseXlaDumpFileName("mark_for_compilation_2.pbtxt");
  EXPECT_EQ(graph.kind, XlaDumpFileKind::kTensorFlowGraph);
  EXPECT_EQ(graph.graph_stage, "mark_for_compilation");
  EXPECT_EQ(graph.graph_index, 2);
  XlaDumpFileName first = ParseXlaDumpFileName("before_increase_dynamism_for_auto_jit_pass.pbtxt");
  EXPECT_EQ(first.graph_stage, "before_increase_dynamism_for_auto_jit_pass");
  EXPECT_EQ(first.graph_index, 0);
  XlaDumpFileName cluster = ParseXlaDumpFileName("encapsulate_subgraphs_subgraph_cluster_3.pbtxt");
  EXPECT_EQ(cluster.graph_stage, "encapsulate_subgraphs_subgraph_cluster_3");
}

TEST(XlaDumpNamesTest, ProtoHtmlSnapshotsAndFusionPages) {
  XlaDumpFileName proto = ParseXlaDumpFileName("1795880045024346.module_0008.jit_step.before_optimizations.hlo.pb");
  EXPECT_EQ(proto.kind, XlaDumpFileKind::kBeforeOptimizations);
  EXPECT_EQ(proto.module_name, "jit_step");
  XlaDumpFileName page = ParseXlaDumpFileName("module_0008.jit_step.cpu_after_optimizations.top_level.html");
  EXPECT_EQ(page.kind, XlaDumpFileKind::kAfterOptimizations);
  XlaDumpFileName pass = ParseXlaDumpFileName("module_0008.jit_step.0001.p.after_fusion.before_dce.hlo.pb");
  ASSERT_EQ(pass.kind, XlaDumpFileKind::kPass);
  EXPECT_EQ(pass.next_pass, "dce");
  XlaDumpFileName snapshot = ParseXlaDumpFileName("module_0000.jit_f.snapshot.-501283987.pb");
  EXPECT_EQ(snapshot.kind, XlaDumpFileKind::kOtherModuleFile);
  EXPECT_EQ(snapshot.module_name, "jit_f");
  XlaDumpFileName fusion = ParseXlaDumpFileName("main.1.module_0008.jit_step._fusion.html");
  EXPECT_EQ(fusion.kind, XlaDumpFileKind::kOtherModuleFile);
  EXPECT_EQ(fusion.module_id, 8);
  EXPECT_EQ(fusion.module_name, "jit_step");
  EXPECT_EQ(ParseXlaDumpFileName("main.1.module_08.jit_step._fusion.html").kind, XlaDumpFileKind::kUnknown);
}

TEST(XlaDumpNamesTest, NamesThatAlmostMatchSayWhy) {
  for (const char* name : {"module_12.m.before_optimizations.txt",               // too few digits
                           "module_0000000000000000000001.m.before_optimizations.txt",  // past 18
                           "module_0001.m.before_optimizations.exe",             // no such extension
                           "module_0001.m.99999999999999999999.p.after_x.txt",   // step past int64
                           "module_0001.", "module_0001.m.after_optimizationsX.txt",
                           "notes.txt", "x.module_0001.m.before_optimizations.txt", ""}) {
    XlaDumpFileName parsed = ParseXlaDumpFileName(name);
    EXPECT_EQ(parsed.kind, XlaDumpFileKind::kUnknown) << name;
    EXPECT_FALSE(parsed.reason.empty()) << name;
  }
  XlaDumpFileName dir = ParseXlaDumpFileName("module_0008.jit_step", /*is_directory=*/true);
  EXPECT_EQ(dir.kind, XlaDumpFileKind::kModuleDirectory);
  EXPECT_EQ(dir.module_name, "jit_step");
  EXPECT_EQ(ParseXlaDumpFileName("plugins", true).kind, XlaDumpFileKind::kUnknown);
}

}  // namespace
}  // namespace xlens
