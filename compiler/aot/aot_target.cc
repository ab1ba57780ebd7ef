#include "compiler/aot/aot_target.h"

#include <mutex>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/SubtargetFeature.h>
#include <llvm/TargetParser/Triple.h>

#include "compiler/codegen/cpu/cpu_jit.h"

namespace xlens::aot {
namespace {

// Every target the LLVM library was built with (Debian's has x86, AArch64, ARM, RISC-V, ...),
// not only the host's as the JIT needs.
void InitializeAllTargetsOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
  });
}

llvm::CodeGenOptLevel CodeGenLevel(int opt_level) {
  return opt_level >= 3 ? llvm::CodeGenOptLevel::Aggressive
         : opt_level <= 0 ? llvm::CodeGenOptLevel::None
                          : llvm::CodeGenOptLevel::Default;
}

}  // namespace

StatusOr<std::unique_ptr<llvm::TargetMachine>> CreateTargetMachine(const TargetChoice& choice) {
  InitializeAllTargetsOnce();
  const std::string host = llvm::sys::getProcessTriple();
  const std::string triple_text =
      choice.triple.empty() ? host : llvm::Triple::normalize(choice.triple);
  const llvm::Triple triple(triple_text);
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple_text, error);
  if (target == nullptr) {
    return Error(fmt::format("--target_triple: LLVM cannot generate code for '{}' ({})",
                             choice.triple, error));
  }
  std::string cpu = choice.cpu.empty() ? "generic" : choice.cpu;
  std::string features = choice.features;
  if (cpu == "native") {
    if (triple.getArch() != llvm::Triple(host).getArch()) {
      return Error(fmt::format("--target_cpu=native names the host's CPU, which cannot run '{}' "
                               "code: name a CPU of that target",
                               triple_text));
    }
    cpu = llvm::sys::getHostCPUName().str();
    llvm::SubtargetFeatures host_features;
    for (const auto& [name, enabled] : llvm::sys::getHostCPUFeatures()) {
      host_features.AddFeature(name, enabled);
    }
    features = host_features.getString() + (features.empty() ? "" : "," + features);
  }
  // LLVM only warns about a CPU the target does not know (on stderr, then code for the generic
  // CPU): refuse it instead, so that a typo does not silently give slower code.
  if (cpu != "generic") {
    std::unique_ptr<llvm::MCSubtargetInfo> subtarget(
        target->createMCSubtargetInfo(triple_text, "", ""));
    if (subtarget == nullptr || !subtarget->isCPUStringValid(cpu)) {
      return Error(fmt::format("--target_cpu: '{}' is not a CPU of {}", cpu, triple_text));
    }
  }
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple_text, cpu, features, options, llvm::Reloc::PIC_, std::nullopt,
      CodeGenLevel(choice.opt_level)));
  if (machine == nullptr) {
    return Error(fmt::format("--target_triple: cannot create a target machine for '{}' (cpu {})",
                             triple_text, cpu));
  }
  return machine;
}

void OptimizeForTarget(llvm::Module& module, llvm::TargetMachine& machine, int opt_level) {
  // No vector math library: the object must link with the target's libm alone.
  const llvm::TargetLibraryInfoImpl library_info(llvm::Triple(module.getTargetTriple()));
  codegen::RunStandardPipeline(module, &machine, opt_level, library_info);
}

StatusOr<std::string> EmitObject(llvm::Module& module, llvm::TargetMachine& machine) {
  llvm::SmallString<0> object;
  llvm::raw_svector_ostream os(object);
  llvm::legacy::PassManager pm;
  if (machine.addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile)) {
    return Error(fmt::format("LLVM's {} target cannot write object files",
                             machine.getTargetTriple().str()));
  }
  pm.run(module);
  return std::string(object.str());
}

bool IsLibcOrLibmFunction(const std::string& name) {
  static const std::set<std::string>* names = [] {
    auto* set = new std::set<std::string>{"memcpy", "memmove", "memset", "memcmp", "abort"};
    // C99's <math.h>, in double, float (f) and long double (l) forms.
    for (const char* fn :
         {"acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "ceil", "copysign",
          "cos", "cosh", "erf", "erfc", "exp", "exp2", "exp10", "expm1", "fabs", "fdim", "floor",
          "fma", "fmax", "fmin", "fmod", "frexp", "hypot", "ldexp", "lgamma", "llrint", "llround",
          "log", "log10", "log1p", "log2", "logb", "lrint", "lround", "modf", "nearbyint",
          "nextafter", "pow", "remainder", "rint", "round", "roundeven", "scalbn", "sin",
          "sincos", "sinh", "sqrt", "tan", "tanh", "tgamma", "trunc"}) {
      for (const char* suffix : {"", "f", "l"}) set->insert(std::string(fn) + suffix);
    }
    return set;
  }();
  return names->count(name) > 0;
}

bool IsCompilerRuntimeFunction(const std::string& name) {
  static const std::set<std::string> names{
      "__extendhfsf2", "__extendhfdf2", "__truncsfhf2", "__truncdfhf2", "__truncsfbf2",
      "__truncdfbf2", "__divti3", "__udivti3", "__modti3", "__umodti3", "__multi3"};
  return names.count(name) > 0;
}

}  // namespace xlens::aot
