#include "compiler/runtime/gpu_compiler.h"

#include <set>

#include <fmt/format.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/raw_ostream.h>

#include "compiler/codegen/gpu/gpu_sort_emitter.h"
#include "compiler/codegen/kernel_emitter.h"
#include "compiler/codegen/planted_kernel_fault.h"
#include "compiler/hlo/annotation_custom_calls.h"
#include "compiler/hlo/bounded_dynamic_shapes.h"
#include "compiler/hlo/collective_attributes.h"

namespace xlens::runtime {
namespace {

std::string PrintIr(const llvm::Module& module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os, nullptr);
  return text;
}

// Every computation whose instructions run as device kernels: the entry and, through control
// flow, the computations it calls (fused and scalar computations are part of their kernels).
void CollectDeviceComputations(const HloComputation* computation,
                               std::vector<const HloComputation*>& out,
                               std::set<const HloComputation*>& seen) {
  if (!seen.insert(computation).second) return;
  out.push_back(computation);
  for (const HloInstruction* hlo : computation->MakeInstructionPostOrder()) {
    const HloOpcode op = hlo->opcode();
    if (op == HloOpcode::kWhile || op == HloOpcode::kConditional || op == HloOpcode::kCall) {
      for (const HloComputation* callee : hlo->called_computations()) {
        CollectDeviceComputations(callee, out, seen);
      }
    }
  }
}

}  // namespace

StatusOr<GpuCompilation> CompileForGpuToPtx(std::unique_ptr<HloModule> module,
                                            const GpuCompileOptions& options) {
  RETURN_IF_ERROR(codegen::CheckGpuArch(options.nvptx.gpu_arch));
  if (HasDynamicShapes(*module)) {
    return Error("the module has dynamic shapes, which the GPU backend cannot compile: its "
                 "buffers have static sizes (xlens run runs bounded dynamic dimensions at their "
                 "bounds)");
  }
  // One device runs the global view: sharding and host-placement annotations are identities
  // (annotation_custom_calls.h), as on the CPU.
  RETURN_IF_ERROR(RemoveAnnotationCustomCalls(*module).status());
  OptimizeOptions optimize = options.optimize;
  optimize.backend = Backend::kGpu;
  optimize.end_dump_module = false;
  // "sm_80" -> 8.0, "sm_90a" -> 9.0: the digits are the major version and then the minor.
  const std::string digits = options.nvptx.gpu_arch.substr(3, options.nvptx.gpu_arch.find_first_not_of("0123456789", 3) - 3);
  optimize.gpu_major = std::stoi(digits.substr(0, digits.size() - 1));
  optimize.gpu_minor = digits.back() - '0';
  ASSIGN_OR_RETURN(OptimizeResult optimized, OptimizeHloModule(*module, optimize));

  llvm::LLVMContext context;
  llvm::Module llvm_module(module->name(), context);
  // Known from the start, so that scalar code generation emits what a GPU can run (complex
  // arithmetic and integer powers inline rather than as calls of the CPU runtime's functions).
  llvm_module.setTargetTriple("nvptx64-nvidia-cuda");
  GpuCompilation result;
  std::vector<const HloComputation*> computations;
  std::set<const HloComputation*> seen;
  CollectDeviceComputations(module->entry_computation(), computations, seen);
  std::set<std::string> symbols;
  for (const HloComputation* computation : computations) {
    for (const HloInstruction* hlo : computation->MakeInstructionPostOrder()) {
      if (hlo->opcode() == HloOpcode::kCustomCall) {
        return Error(fmt::format("{}: custom-call \"{}\" cannot run on the GPU backend",
                                 hlo->name(), hlo->custom_call_target.value_or("")));
      }
      if (hlo->opcode() == HloOpcode::kFft || hlo->opcode() == HloOpcode::kCholesky ||
          hlo->opcode() == HloOpcode::kTriangularSolve) {
        // XLA's GPU backend calls cuFFT, cuSOLVER and cuBLAS for these; xlens has none of them.
        const char* library = hlo->opcode() == HloOpcode::kFft        ? "cuFFT"
                              : hlo->opcode() == HloOpcode::kCholesky ? "cuSOLVER"
                                                                      : "cuBLAS";
        return Error(fmt::format("{}: {} has no GPU implementation in xlens (XLA's GPU backend "
                                 "calls {}); it runs with --backend=cpu",
                                 hlo->name(), HloOpcodeString(hlo->opcode()), library));
      }
      // Collectives run between the devices (gpu_collectives.h), not as kernels.
      if (IsCollectiveOpcode(hlo->opcode())) continue;
      const bool is_sort = hlo->opcode() == HloOpcode::kSort;
      if (!is_sort && !codegen::IsKernelInstruction(*hlo)) continue;
      const std::string name = codegen::UniqueKernelName(hlo->name(), symbols);
      codegen::KernelOptions kernel_options;
      kernel_options.gpu_naive_emitters = options.optimize.gpu_naive_emitters;
      kernel_options.gpu_split_launches = options.optimize.gpu_split_launches;
      auto spec = is_sort ? codegen::EmitGpuSort(*hlo, name, llvm_module)
                          : codegen::EmitKernel(*hlo, name, llvm_module, codegen::KernelTarget::kGpu,
                                                kernel_options);
      if (!spec.ok()) return spec.status().WithContext(hlo->name());
      if (codegen::IsPlantedKernel(options.optimize.planted.miscompile_kernel, *hlo, *spec)) {
        codegen::PlantKernelFault(*hlo, *spec, llvm_module);
      }
      for (const codegen::KernelPhase& phase : spec->phases) {
        result.kernels.push_back({phase.function_name, hlo->name(), phase.blocks,
                                  phase.threads_per_block});
      }
      result.specs[hlo] = std::move(*spec);
    }
  }
  DumpContext* dump = options.optimize.dump;
  const bool dumping = dump != nullptr && dump->IsDumped(*module);
  result.ir_no_opt = PrintIr(llvm_module);
  if (options.keep_nvvm_ir) {
    RETURN_IF_ERROR(codegen::PrepareForNvptx(llvm_module, options.nvptx));
    result.nvvm_ir = PrintIr(llvm_module);
  }
  if (options.emit_ptx) {
    ASSIGN_OR_RETURN(result.ptx, codegen::CompileToPtx(llvm_module, options.nvptx));
    result.ir_with_opt = PrintIr(llvm_module);
  }
  if (dumping) {
    std::vector<std::string> files;
    for (auto [suffix, text] : {std::pair{"ir-no-opt.ll", &result.ir_no_opt},
                                std::pair{"ir-with-opt.ll", &result.ir_with_opt},
                                std::pair{"ptx", &result.ptx}}) {
      if (text->empty()) continue;
      std::string file = dump->DumpText(*module, suffix, *text);
      if (!file.empty()) files.push_back(file);
    }
    for (const GpuKernelInfo& k : result.kernels) {
      ManifestKernel kernel;
      kernel.name = k.name;
      kernel.hlo_instruction = k.hlo_instruction;
      kernel.launch = fmt::format("grid {} block {}", k.blocks, k.threads_per_block);
      kernel.files = files;
      dump->RecordKernel(*module, std::move(kernel));
    }
  }
  if (dump != nullptr) dump->EndModule(*module);
  result.module = std::move(module);
  if (optimized.buffers) result.buffers = std::make_unique<BufferAssignment>(std::move(*optimized.buffers));
  return result;
}

}  // namespace xlens::runtime
