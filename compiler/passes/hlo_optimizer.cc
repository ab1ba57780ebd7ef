#include "compiler/passes/hlo_optimizer.h"

#include <map>
#include <set>

#include <fmt/format.h>

#include "compiler/hlo/stack_frames.h"
#include "compiler/passes/algebraic_simplifier.h"
#include "compiler/passes/batch_norm_expander.h"
#include "compiler/passes/call_inliner.h"
#include "compiler/passes/constant_folding.h"
#include "compiler/passes/conv_canonicalization.h"
#include "compiler/passes/copy_insertion.h"
#include "compiler/passes/cse.h"
#include "compiler/passes/dce.h"
#include "compiler/passes/dot_decomposer.h"
#include "compiler/passes/dump_instrumentation.h"
#include "compiler/passes/horizontal_fusion.h"
#include "compiler/passes/instruction_fusion.h"
#include "compiler/passes/instrumentation.h"
#include "compiler/passes/layout_assignment.h"
#include "compiler/passes/multi_output_fusion.h"
#include "compiler/passes/reduce_precision_insertion.h"
#include "compiler/passes/reshape_mover.h"
#include "compiler/passes/bitcast_dtypes_expander.h"
#include "compiler/passes/rng_bit_generator_expander.h"
#include "compiler/passes/topk_decomposer.h"
#include "compiler/passes/tuple_simplifier.h"
#include "compiler/passes/sharding_propagation.h"
#include "compiler/passes/spmd_partitioner.h"
#include "dump/dump_names.h"
#include "profiler/host_tracer.h"

namespace xlens {

std::string AfterOptimizationsName(Backend backend, int gpu_major, int gpu_minor) {
  return backend == Backend::kCpu ? CpuAfterOptimizationsName()
                                  : GpuAfterOptimizationsName(gpu_major, gpu_minor);
}

StatusOr<std::unique_ptr<HloPass>> MakePassByName(std::string_view name, Backend backend) {
  FusionBackend fusion = backend == Backend::kCpu ? FusionBackend::kCpu : FusionBackend::kGpu;
  LayoutBackend layout = backend == Backend::kCpu ? LayoutBackend::kCpu : LayoutBackend::kGpu;
  if (name == "algebraic-simplifier") return std::unique_ptr<HloPass>(new AlgebraicSimplifier());
  if (name == "batchnorm-expander") return std::unique_ptr<HloPass>(new BatchNormExpander());
  if (name == "call-inliner") return std::unique_ptr<HloPass>(new CallInliner());
  if (name == "constant-folding") return std::unique_ptr<HloPass>(new HloConstantFolding());
  if (name == "conv-canonicalization") return std::unique_ptr<HloPass>(new ConvCanonicalization());
  if (name == "copy-insertion") return std::unique_ptr<HloPass>(new CopyInsertion());
  if (name == "cse") return std::unique_ptr<HloPass>(new HloCse());
  if (name == "dce") return std::unique_ptr<HloPass>(new HloDce());
  if (name == "dot-decomposer") return std::unique_ptr<HloPass>(new DotDecomposer());
  if (name == "fusion") return std::unique_ptr<HloPass>(new InstructionFusion(fusion));
  if (name == "horizontal-loop-fusion") return std::unique_ptr<HloPass>(new HorizontalLoopFusion());
  if (name == "layout-assignment") return std::unique_ptr<HloPass>(new LayoutAssignment(layout));
  if (name == "multi-output-fusion") return std::unique_ptr<HloPass>(new MultiOutputFusion());
  if (name == "reduce-precision-insertion") {
    return std::unique_ptr<HloPass>(new ReducePrecisionInsertion());
  }
  if (name == "reshape-mover") return std::unique_ptr<HloPass>(new ReshapeMover());
  if (name == "topk-decomposer") return std::unique_ptr<HloPass>(new TopkDecomposer());
  if (name == "bitcast-dtypes-expander") {
    return std::unique_ptr<HloPass>(new BitcastDtypesExpander());
  }
  if (name == "rng-bit-generator-expander") {
    return std::unique_ptr<HloPass>(new RngBitGeneratorExpander());
  }
  if (name == "sharding-propagation") return std::unique_ptr<HloPass>(new ShardingPropagation());
  if (name == "spmd-partitioning") return std::unique_ptr<HloPass>(new SpmdPartitioner());
  if (name == "tuple-simplifier") return std::unique_ptr<HloPass>(new TupleSimplifier());
  RETURN_IF_ERROR(CheckPassNames({std::string(name)}, "--passes"));
  return Error(fmt::format("--passes: pass '{}' cannot run on its own", name));
}

using profiler::NowNs;  // the pipeline's times and the trace's spans share one clock

namespace {

// Which pass made (or last grew) each fusion, from the passes' decisions.
std::map<std::string, std::string> FusionCreators(const std::vector<const HloPass*>& passes) {
  std::map<std::string, std::string> creators;
  for (const HloPass* pass : passes) {
    for (const FusionDecision& d : FusionDecisionsOf({pass})) {
      if (d.fused && !d.fusion.empty()) creators[d.fusion] = std::string(pass->name());
    }
  }
  return creators;
}

void RecordKernels(const HloModule& module, const std::map<std::string, std::string>& creators,
                   DumpContext& dump) {
  for (const HloInstruction* instr : module.entry_computation()->MakeInstructionPostOrder()) {
    if (!CountsAsKernel(*instr)) continue;
    ManifestKernel kernel;
    kernel.name = instr->name();
    kernel.hlo_instruction = instr->name();
    std::set<std::string> seen;
    auto add_op_name = [&](const HloInstruction& i) {
      if (!i.metadata.op_name.empty() && seen.insert(i.metadata.op_name).second) {
        kernel.op_names.push_back(i.metadata.op_name);
      }
    };
    if (instr->opcode() == HloOpcode::kFusion && instr->fused_computation() != nullptr) {
      kernel.fusion_kind = std::string(FusionKindString(instr->fusion_kind.value_or(FusionKind::kLoop)));
      kernel.fusion_computation = instr->fused_computation()->name();
      for (const HloInstruction* fused : instr->fused_computation()->MakeInstructionPostOrder()) {
        if (fused->opcode() != HloOpcode::kParameter) add_op_name(*fused);
      }
      auto it = creators.find(instr->name());
      if (it != creators.end()) kernel.created_by_pass = it->second;
    } else {
      add_op_name(*instr);
    }
    // Where the kernel came from in the user's program, and the callers above that line.
    std::vector<SourceFrame> stack = KernelStack(*instr);
    for (size_t i = 0; i < stack.size(); ++i) {
      ManifestSourceFrame frame{stack[i].file, stack[i].line, stack[i].column, stack[i].function};
      if (i == 0) {
        kernel.source = std::move(frame);
      } else {
        kernel.stack.push_back(std::move(frame));
      }
    }
    dump.RecordKernel(module, std::move(kernel));
  }
}

}  // namespace

StatusOr<OptimizeResult> OptimizeHloModule(HloModule& module, const OptimizeOptions& options) {
  OptimizeResult result;
  int64_t start = NowNs();
  result.kernels_before = CountKernels(module);

  std::vector<const HloPass*> fusion_passes;
  std::unique_ptr<HloPassPipeline> pipeline;
  if (options.only_passes.empty()) {
    pipeline = MakeHloPipeline(options.backend, &fusion_passes, options.reduce_precision);
  } else {
    pipeline = std::make_unique<HloPassPipeline>("passes");
    for (const std::string& name : options.only_passes) {
      ASSIGN_OR_RETURN(std::unique_ptr<HloPass> pass, MakePassByName(name, options.backend));
      if (dynamic_cast<InstructionFusion*>(pass.get()) ||
          dynamic_cast<MultiOutputFusion*>(pass.get()) ||
          dynamic_cast<HorizontalLoopFusion*>(pass.get())) {
        fusion_passes.push_back(pass.get());
      }
      pipeline->AddPass(std::move(pass));
    }
  }
  if (options.fusion_fuel >= 0) {
    for (const HloPass* pass : fusion_passes) {
      // The pipeline owns its passes; the list only points at them, hence the cast.
      if (auto* fusion = dynamic_cast<InstructionFusion*>(const_cast<HloPass*>(pass))) {
        fusion->set_fuel(options.fusion_fuel);
      }
    }
  }
  if (!options.planted.miscompile_after_pass.empty()) {
    RETURN_IF_ERROR(PlantMiscompileAfter(*pipeline, options.planted.miscompile_after_pass));
  }

  PassRecorder recorder;
  VerifierInstrumentation verifier;
  ChangeCheckInstrumentation change_check;
  std::optional<DumpInstrumentation> dumper;
  PipelineContext context;
  context.filter = options.filter;
  context.instrumentation.push_back(&recorder);
  if (options.check_changes) context.instrumentation.push_back(&change_check);
  if (options.verify_each_pass) context.instrumentation.push_back(&verifier);
  for (PassInstrumentation* extra : options.extra_instrumentation) {
    context.instrumentation.push_back(extra);
  }
  if (options.dump != nullptr) {
    options.dump->BeginModule(module);
    options.dump->DumpModule(module, kBeforeOptimizations);
    dumper.emplace(*options.dump);
    context.instrumentation.push_back(&*dumper);
  }

  // The stage pipelines run one after another, as XLA's compilers run theirs; a --passes list is
  // one pipeline of its own.
  if (options.only_passes.empty()) {
    for (const auto& stage : pipeline->passes()) {
      auto* stage_pipeline = static_cast<HloPassPipeline*>(stage.get());
      RETURN_IF_ERROR(stage_pipeline->Run(module, context).status());
    }
  } else {
    RETURN_IF_ERROR(pipeline->Run(module, context).status());
  }

  result.events = recorder.events();
  result.warnings = context.warnings;
  result.fusion_decisions = FusionDecisionsOf(fusion_passes);
  result.kernels_after = CountKernels(module);
  BufferAssignmentOptions buffer_options;
  buffer_options.in_place_row_fusions = options.backend == Backend::kCpu;
  ASSIGN_OR_RETURN(BufferAssignment buffers, AssignBuffers(module, buffer_options));
  if (options.dump != nullptr) {
    std::string report = buffers.ToString();
    options.dump->DumpModule(module,
                             AfterOptimizationsName(options.backend, options.gpu_major, options.gpu_minor),
                             report);
    RecordKernels(module, FusionCreators(fusion_passes), *options.dump);
    if (options.end_dump_module) options.dump->EndModule(module);
    for (const std::string& w : options.dump->warnings()) result.warnings.push_back(w);
  }
  result.buffers = std::move(buffers);
  result.wall_ns = NowNs() - start;
  return result;
}

}  // namespace xlens
