#include "compiler/codegen/gpu/nvptx_backend.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <set>

#include <fmt/format.h>
#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Linker/Linker.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"

namespace xlens::codegen {
namespace {

void InitializeNvptxOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
  });
}

std::string FindLibdevice(const std::string& given) {
  if (!given.empty()) return given;
  std::vector<std::string> roots;
  if (const char* home = std::getenv("CUDA_HOME")) roots.push_back(home);
  roots.push_back("/usr/local/cuda");
  for (const std::string& root : roots) {
    std::string path = root + "/nvvm/libdevice/libdevice.10.bc";
    if (GetPathKind(path) == PathKind::kRegular) return path;
  }
  return "";
}

// The libdevice function computing what a C library function or LLVM intrinsic computes.
std::string LibdeviceName(llvm::StringRef callee, bool is_double) {
  static const std::map<std::string, std::string> kNames = {
      {"exp", "exp"}, {"log", "log"}, {"sin", "sin"}, {"cos", "cos"}, {"pow", "pow"},
      {"expm1", "expm1"}, {"log1p", "log1p"}, {"tanh", "tanh"}, {"cbrt", "cbrt"},
      {"tan", "tan"}, {"atan2", "atan2"}, {"fmod", "fmod"}, {"erf", "erf"},
      {"hypot", "hypot"}, {"sinh", "sinh"}, {"cosh", "cosh"}};
  std::string base = callee.str();
  if (base.rfind("llvm.", 0) == 0) {
    base = base.substr(5);
    base = base.substr(0, base.find('.'));
  } else if (!is_double && !base.empty() && base.back() == 'f') {
    base.pop_back();
  }
  auto it = kNames.find(base);
  if (it == kNames.end()) return "";
  return fmt::format("__nv_{}{}", it->second, is_double ? "" : "f");
}

Status RewriteForLibdevice(llvm::Module& module) {
  std::vector<llvm::Instruction*> rewritten;
  for (llvm::Function& f : module) {
    for (llvm::BasicBlock& block : f) {
      for (llvm::Instruction& inst : block) {
        if (inst.getOpcode() == llvm::Instruction::FRem) {
          rewritten.push_back(&inst);
          continue;
        }
        auto* call = llvm::dyn_cast<llvm::CallInst>(&inst);
        if (call == nullptr || call->getCalledFunction() == nullptr) continue;
        llvm::StringRef name = call->getCalledFunction()->getName();
        if (name.starts_with("xlens_")) {
          return Error(fmt::format("{}: {} has no GPU implementation (complex arithmetic and "
                                   "integer powers run on the CPU backend only)",
                                   f.getName().str(), name.str()));
        }
        if (!call->getType()->isFloatingPointTy()) continue;
        if (!LibdeviceName(name, call->getType()->isDoubleTy()).empty()) rewritten.push_back(call);
      }
    }
  }
  for (llvm::Instruction* inst : rewritten) {
    llvm::IRBuilder<> b(inst);
    llvm::Type* t = inst->getType();
    const bool is_double = t->isDoubleTy();
    std::string name;
    std::vector<llvm::Value*> args;
    if (inst->getOpcode() == llvm::Instruction::FRem) {
      name = is_double ? "__nv_fmod" : "__nv_fmodf";
      args = {inst->getOperand(0), inst->getOperand(1)};
    } else {
      auto* call = llvm::cast<llvm::CallInst>(inst);
      name = LibdeviceName(call->getCalledFunction()->getName(), is_double);
      for (llvm::Value* a : call->args()) args.push_back(a);
    }
    std::vector<llvm::Type*> params(args.size(), t);
    llvm::FunctionCallee fn = module.getOrInsertFunction(name, llvm::FunctionType::get(t, params, false));
    llvm::Value* replacement = b.CreateCall(fn, args);
    inst->replaceAllUsesWith(replacement);
    inst->eraseFromParent();
  }
  return OkStatus();
}

}  // namespace

Status CheckGpuArch(const std::string& arch) {
  // "sm_" and at least two digits (major, then minor), optionally an architecture-specific "a".
  const size_t end = arch.find_first_not_of("0123456789", 3);
  const size_t digits = (end == std::string::npos ? arch.size() : end) - 3;
  const bool suffix_ok = end == std::string::npos || (end + 1 == arch.size() && arch[end] == 'a');
  if (arch.rfind("sm_", 0) != 0 || digits < 2 || digits > 4 || !suffix_ok) {
    return Error(fmt::format("--gpu_arch: expected an NVIDIA architecture such as sm_90, found '{}'",
                             EscapeForTerminal(TruncateUtf8(arch, 100))));
  }
  // Well-formed is not enough: LLVM would warn "not a recognized processor" once per kernel and
  // emit PTX for a generic target. Ask the NVPTX back end which architectures it knows.
  InitializeNvptxOnce();
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget("nvptx64-nvidia-cuda", error);
  if (target == nullptr) return Error("LLVM has no NVPTX target: " + error);
  std::unique_ptr<llvm::MCSubtargetInfo> info(
      target->createMCSubtargetInfo("nvptx64-nvidia-cuda", "", ""));  // no CPU: no warning
  if (info == nullptr || !info->isCPUStringValid(arch)) {
    std::string known;
    if (info != nullptr) {
      for (const llvm::SubtargetSubTypeKV& cpu : info->getAllProcessorDescriptions()) {
        std::string_view name = cpu.Key;
        if (name.rfind("sm_", 0) == 0) known += (known.empty() ? "" : ", ") + std::string(name);
      }
    }
    return Error(fmt::format("--gpu_arch: '{}' is not an architecture LLVM {} can target (known: {})", arch,
                             LLVM_VERSION_MAJOR, known));
  }
  return OkStatus();
}

namespace {

StatusOr<std::unique_ptr<llvm::TargetMachine>> NvptxTargetMachine(const NvptxOptions& options) {
  RETURN_IF_ERROR(CheckGpuArch(options.gpu_arch));
  InitializeNvptxOnce();
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget("nvptx64-nvidia-cuda", error);
  if (target == nullptr) return Error("LLVM has no NVPTX target: " + error);
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      "nvptx64-nvidia-cuda", options.gpu_arch, "+ptx80", llvm::TargetOptions(), std::nullopt,
      std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  if (tm == nullptr) return Error("cannot target " + options.gpu_arch);
  return tm;
}

}  // namespace

Status PrepareForNvptx(llvm::Module& module, const NvptxOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<llvm::TargetMachine> tm, NvptxTargetMachine(options));
  module.setTargetTriple("nvptx64-nvidia-cuda");
  module.setDataLayout(tm->createDataLayout());
  return RewriteForLibdevice(module);
}

StatusOr<std::string> CompileToPtx(llvm::Module& module, const NvptxOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<llvm::TargetMachine> tm, NvptxTargetMachine(options));
  const std::string triple = "nvptx64-nvidia-cuda";
  RETURN_IF_ERROR(PrepareForNvptx(module, options));
  const std::string libdevice_path = FindLibdevice(options.libdevice_path);
  if (libdevice_path.empty()) {
    return Error("libdevice.10.bc not found (set CUDA_HOME to the CUDA toolkit)");
  }
  auto buffer = llvm::MemoryBuffer::getFile(libdevice_path);
  if (!buffer) return Error(fmt::format("{}: cannot read: {}", libdevice_path, buffer.getError().message()));
  auto libdevice = llvm::parseBitcodeFile((*buffer)->getMemBufferRef(), module.getContext());
  if (!libdevice) return Error(fmt::format("{}: {}", libdevice_path, llvm::toString(libdevice.takeError())));
  (*libdevice)->setTargetTriple(triple);
  (*libdevice)->setDataLayout(module.getDataLayout());
  if (llvm::Linker::linkModules(module, std::move(*libdevice), llvm::Linker::Flags::LinkOnlyNeeded)) {
    return Error("linking libdevice failed");
  }
  // Only kernels are entry points; everything else (libdevice included) is inlined or dropped.
  std::set<const llvm::Function*> kernels;
  if (llvm::NamedMDNode* annotations = module.getNamedMetadata("nvvm.annotations")) {
    for (llvm::MDNode* node : annotations->operands()) {
      if (node->getNumOperands() == 0) continue;
      if (auto* v = llvm::dyn_cast_or_null<llvm::ValueAsMetadata>(node->getOperand(0).get())) {
        if (auto* f = llvm::dyn_cast<llvm::Function>(v->getValue())) kernels.insert(f);
      }
    }
  }
  for (llvm::Function& f : module) {
    if (!f.isDeclaration() && !kernels.count(&f)) f.setLinkage(llvm::GlobalValue::InternalLinkage);
  }
  // libdevice asks how to treat denormals; keep them, as CUDA does by default.
  module.addModuleFlag(llvm::Module::Override, "nvvm-reflect-ftz", uint32_t{0});
  std::string verify;
  llvm::raw_string_ostream verify_os(verify);
  if (llvm::verifyModule(module, &verify_os)) {
    return Error("generated GPU IR is invalid (a code generation bug): " + verify);
  }

  {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder pb(tm.get());
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::OptimizationLevel level = options.opt_level <= 1   ? llvm::OptimizationLevel::O1
                                    : options.opt_level == 2 ? llvm::OptimizationLevel::O2
                                                             : llvm::OptimizationLevel::O3;
    pb.buildPerModuleDefaultPipeline(level).run(module, mam);
  }

  std::string ptx;
  llvm::raw_string_ostream os(ptx);
  llvm::buffer_ostream buffered(os);
  llvm::legacy::PassManager pm;
  if (tm->addPassesToEmitFile(pm, buffered, nullptr, llvm::CodeGenFileType::AssemblyFile)) {
    return Error("the NVPTX target cannot emit PTX");
  }
  pm.run(module);
  return std::string(buffered.str());
}

}  // namespace xlens::codegen
