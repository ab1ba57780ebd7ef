// What a file in a dump directory that XLA (not xlens) wrote is, from its name alone: the inverse
// of dump_names.h, for the names jaxlib, TensorFlow and PyTorch/XLA write with
// --xla_dump_to (xla/service/dump.cc) and TF_DUMP_GRAPH_PREFIX (tensorflow/core/util/dump_graph.cc):
//
//   [TS.]module_0008.jit_step.before_optimizations.txt          the module as handed to XLA
//   module_0008.jit_step.0042.simplification.after_algsimp.before_dce.txt   one pass (pass_re)
//   module_0008.jit_step.0013.copy-insertion.after_adding_copies.txt        a pass's sub-step
//   module_0008.jit_step.cpu_after_optimizations.txt             the module as compiled
//   module_0008.jit_step.cpu_after_optimizations-buffer-assignment.txt (-memory-usage-report, ...)
//   module_0008.jit_step.multiply_add_fusion_kernel_module.ir-with-opt.ll   one kernel's LLVM IR
//   module_0008.jit_step.obj-file.multiply_add_fusion_kernel_module.o, .ptx, thunk_sequence.txt,
//   debug_options, module_0008.jit_step/ (module.mlir, compile_options.textproto, ...)
//   mark_for_compilation_2.pbtxt, before_increase_dynamism_for_auto_jit_pass.pbtxt (TensorFlow)
//
// Module names contain dots (TensorFlow's "cluster_0__..._.8"), so the name is what remains once
// the suffix is recognised from the right. A name that is none of these says why.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace xlens {

enum class XlaDumpFileKind {
  kUnknown,             // `reason` says why
  kBeforeOptimizations, // HLO (or .dot/.html/.pb of it) before the pipeline
  kAfterOptimizations,  // HLO as compiled ({cpu,gpu,sm_X.Y_gpu}_after_optimizations)
  kPass,                // one per-pass dump: step, pipeline, pass, next_pass
  kModuleReport,        // buffer assignment, memory usage report, live ranges, ...
  kLlvmIr,              // ir-no-opt.ll, ir-with-opt.ll; per kernel when `kernel` is set
  kObjectFile,          // obj-file.KERNEL.o
  kMlir,                // KERNEL-pre-optimization.mlir, ...
  kPtx,                 // .ptx
  kThunkSequence,       // thunk_sequence.txt
  kDebugOptions,        // debug_options
  kModuleDirectory,     // module_NNNN.NAME/ (module.mlir, compile_options.textproto)
  kOtherModuleFile,     // module_NNNN.NAME.SOMETHING XLA writes that has no stage of its own
  kTensorFlowGraph,     // TF_DUMP_GRAPH_PREFIX's NAME[_N].pbtxt / .pb / .dot / .mlir
};

std::string_view XlaDumpFileKindName(XlaDumpFileKind kind);

struct XlaDumpFileName {
  XlaDumpFileKind kind = XlaDumpFileKind::kUnknown;
  int64_t module_id = -1;   // module_NNNN; -1 for TensorFlow graphs
  std::string timestamp;    // the --xla_dump_include_timestamp prefix, or empty
  std::string module_name;  // empty when XLA left it out (names past 255 characters)
  std::string suffix;       // what follows the module name ("cpu_after_optimizations.txt")
  // kPass: the per-module step, the pipeline, the pass that ran and the one that runs next
  // (empty for a sub-step dump such as copy-insertion's "after_adding_copies").
  int64_t step = -1;
  std::string pipeline, pass, next_pass;
  // kLlvmIr/kObjectFile/kMlir: the kernel module's name ("multiply_add_fusion_kernel_module").
  std::string kernel;
  // kTensorFlowGraph: the dump's name without "_N" ("mark_for_compilation") and N (0 when absent).
  std::string graph_stage;
  int64_t graph_index = 0;
  std::string reason;  // kUnknown: why the name is not placed
};

// Classifies one file name (no directory part). Any bytes give an answer; nothing throws.
// `is_directory`: the name is a directory's (only module_NNNN.NAME directories are placed).
XlaDumpFileName ParseXlaDumpFileName(std::string_view file_name, bool is_directory = false);

// The kernel name a kernel module's files are named for: "multiply_add_fusion_kernel_module" ->
// "multiply_add_fusion"; the name itself when it has no such suffix.
std::string KernelOfKernelModule(std::string_view kernel_module);

}  // namespace xlens
