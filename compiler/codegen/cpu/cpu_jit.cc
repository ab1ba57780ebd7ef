#include "compiler/codegen/cpu/cpu_jit.h"

#include <dlfcn.h>

#include <deque>
#include <optional>
#include <mutex>

#include <fmt/format.h>
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/Bitcode/BitcodeWriter.h>
#include <llvm/Linker/Linker.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>

#include "compiler/codegen/cpu/module_partition.h"
#include "compiler/codegen/cpu/object_cache.h"
#include "compiler/codegen/cpu/perf_map.h"
#include "compiler/codegen/cpu/runtime_symbols.h"
#include "compiler/codegen/cpu/x86_range_min_max.h"
#include "compiler/support/thread_pool.h"

namespace xlens::codegen {
namespace {

// libmvec.so.1 made visible to the JIT's symbol search (RTLD_GLOBAL); false where it is absent.
bool VectorMathLibraryLoaded() {
  static const bool loaded = dlopen("libmvec.so.1", RTLD_NOW | RTLD_GLOBAL) != nullptr;
  return loaded;
}

// libmvec's AVX-512 variants ("e" ISA): the C library name and the LLVM intrinsic of each
// function, per lane count.
const std::vector<llvm::VecDesc>& Avx512VectorMath() {
  static const std::vector<llvm::VecDesc>* descs = [] {
    auto* v = new std::vector<llvm::VecDesc>();
    struct Fn { const char* name; const char* intrinsic; int args; };
    static const Fn kFns[] = {{"exp", "llvm.exp", 1},   {"log", "llvm.log", 1},
                              {"sin", "llvm.sin", 1},   {"cos", "llvm.cos", 1},
                              {"tanh", nullptr, 1},     {"expm1", nullptr, 1},
                              {"log1p", nullptr, 1},    {"cbrt", nullptr, 1},
                              {"tan", nullptr, 1},      {"pow", "llvm.pow", 2},
                              {"atan2", nullptr, 2}};
    static std::deque<std::string> names;  // VecDesc keeps StringRefs: elements never move
    for (const Fn& fn : kFns) {
      for (bool is_float : {true, false}) {
        const int lanes = is_float ? 16 : 8;
        const std::string params(fn.args, 'v');
        const std::string scalar = std::string(fn.name) + (is_float ? "f" : "");
        names.push_back(fmt::format("_ZGVeN{}{}_{}", lanes, params, scalar));
        const llvm::StringRef vector = names.back();
        names.push_back(fmt::format("_ZGV_LLVM_N{}{}", lanes, params));
        const llvm::StringRef prefix = names.back();
        names.push_back(scalar);
        v->push_back(llvm::VecDesc(names.back(), vector, llvm::ElementCount::getFixed(lanes), false, prefix));
        if (fn.intrinsic != nullptr) {
          names.push_back(fmt::format("{}.{}", fn.intrinsic, is_float ? "f32" : "f64"));
          v->push_back(llvm::VecDesc(names.back(), vector, llvm::ElementCount::getFixed(lanes), false, prefix));
        }
      }
    }
    return v;
  }();
  return *descs;
}

// The loop vectorizer reads a loop's accesses at a stride of up to 16 elements as whole vectors
// and shuffles (interleaved groups) rather than as gathers: a row kernel over rows narrower than
// a vector runs across rows (kAcrossRowsWidth in cpu_row_loops.h), each step reading 16 rows of
// 10 logits column by column. LLVM's default allows strides up to 8 only, and a gather of 16
// lanes is 16 loads; the MNIST step's log-softmax gradient over f32[10000,10] on both cores,
// best of 20000 runs: gathers 0.058-0.060 ms a run, whole vectors 0.040-0.042 (along the rows,
// as before: 0.071). A process-wide LLVM option, set once before the first pipeline (the JIT's
// and the ahead-of-time compiler's); of the benchmark's 24 workloads only the three training
// steps' kernels change with it.
void AllowWideInterleavedGroupsOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::StringMap<llvm::cl::Option*>& options = llvm::cl::getRegisteredOptions();
    if (auto it = options.find("max-interleave-group-factor"); it != options.end()) {
      it->second->addOccurrence(0, "max-interleave-group-factor", "16");
    }
  });
}

void InitializeLlvmOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

std::string ErrorText(llvm::Error error) { return llvm::toString(std::move(error)); }

std::string PrintModule(const llvm::Module& module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os, nullptr);
  return text;
}

// Every function defined in `module` compiled for `cpu` with `features`, as the JIT compiles it.
// LLVM vectorizes for 256-bit registers on AVX-512 CPUs whose tuning prefers them (Intel's, as
// LLVM names them: skylake-avx512 through sapphirerapids, and rocketlake) unless told otherwise;
// the inline transcendentals are compute-bound and run up to 1.6x faster at full width (softmax,
// sigmoid, erf GELU), while memory-bound loops are unchanged (tests/bench/codegen_vs_xla.py).
// AMD's Zen 4 prefers 512 bits already, so without this the same kernel's IR differed by machine.
void SetHostFunctionAttributes(llvm::Module& module, llvm::StringRef cpu, llvm::StringRef features) {
  const bool has_avx512 = features.contains("+avx512f");
  for (llvm::Function& f : module) {
    if (f.isDeclaration()) continue;
    f.addFnAttr("target-cpu", cpu);
    f.addFnAttr("target-features", features);
    if (has_avx512) f.addFnAttr("prefer-vector-width", "512");
  }
}

Status RunPipeline(llvm::Module& module, llvm::TargetMachine* tm, int opt_level) {
  // glibc's vector math library: the loop vectorizer widens exp, log, tanh, sin, ... into its
  // 4- and 8-lane functions instead of leaving a scalar libm call in the loop.
  llvm::TargetLibraryInfoImpl library_info(llvm::Triple(module.getTargetTriple()));
  if (VectorMathLibraryLoaded()) {
    library_info.addVectorizableFunctionsFromVecLib(llvm::TargetLibraryInfoImpl::LIBMVEC_X86,
                                                    llvm::Triple(module.getTargetTriple()));
    // LLVM knows libmvec's 4- and 8-lane functions; where the CPU has AVX-512, its 16-lane
    // (float) and 8-lane (double) ones are there too.
    if (tm != nullptr && tm->getTargetFeatureString().contains("+avx512f")) {
      library_info.addVectorizableFunctions(Avx512VectorMath());
    }
  }
  RunStandardPipeline(module, tm, opt_level, library_info);
  // After the vectorizers: the vectors of maximum and minimum they made, as x86's range
  // instruction (x86_range_min_max.h).
  if (opt_level > 0) cpu::LowerVectorMinMaxToRange(module);
  return OkStatus();
}

llvm::CodeGenOptLevel CodeGenLevel(int opt_level) {
  return opt_level >= 3 ? llvm::CodeGenOptLevel::Aggressive
         : opt_level == 0 ? llvm::CodeGenOptLevel::None
                          : llvm::CodeGenOptLevel::Default;
}

// One partition, optimized and compiled to an object file in a context of its own (so that
// partitions compile on several threads at once).
struct CompiledPartition {
  llvm::SmallVector<char, 0> object;
  std::string optimized_bitcode;  // when the IR is kept
  std::string error;
};

CompiledPartition CompilePartition(const ModulePartition& partition, bool keep_ir) {
  CompiledPartition out;
  llvm::LLVMContext context;
  auto module = llvm::parseBitcodeFile(llvm::MemoryBufferRef(partition.bitcode, "partition"),
                                       context);
  if (!module) {
    out.error = "cannot read a partition back: " + ErrorText(module.takeError());
    return out;
  }
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) {
    out.error = ErrorText(jtmb.takeError());
    return out;
  }
  jtmb->setCodeGenOptLevel(CodeGenLevel(partition.opt_level));
  auto tm = jtmb->createTargetMachine();
  if (!tm) {
    out.error = ErrorText(tm.takeError());
    return out;
  }
  if (Status status = RunPipeline(**module, tm->get(), partition.opt_level); !status.ok()) {
    out.error = status.message();
    return out;
  }
  if (keep_ir) {
    llvm::raw_string_ostream os(out.optimized_bitcode);
    llvm::WriteBitcodeToFile(**module, os);
  }
  llvm::raw_svector_ostream os(out.object);
  llvm::legacy::PassManager pm;
  if ((*tm)->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile)) {
    out.error = "the host target cannot emit object files";
    return out;
  }
  pm.run(**module);
  return out;
}

// The optimized partitions linked back into one module, printed (what --xla_dump_to writes as
// ir-with-opt.ll and `xlens compile --emit=obj` reads).
StatusOr<std::string> LinkOptimizedPartitions(const std::vector<CompiledPartition>& compiled) {
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> linked;
  for (const CompiledPartition& c : compiled) {
    auto module = llvm::parseBitcodeFile(llvm::MemoryBufferRef(c.optimized_bitcode, "partition"),
                                         context);
    if (!module) return Error("cannot read an optimized partition: " + ErrorText(module.takeError()));
    if (linked == nullptr) {
      linked = std::move(*module);
    } else if (llvm::Linker::linkModules(*linked, std::move(*module))) {
      return Error("cannot link the optimized partitions back together");
    }
  }
  return linked == nullptr ? std::string() : PrintModule(*linked);
}

}  // namespace

StatusOr<std::unique_ptr<CpuJit>> CpuJit::Create(const CpuJitOptions& options) {
  InitializeLlvmOnce();
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) return Error("cannot target the host CPU: " + ErrorText(jtmb.takeError()));
  jtmb->setCodeGenOptLevel(options.opt_level >= 3 ? llvm::CodeGenOptLevel::Aggressive
                           : options.opt_level == 0 ? llvm::CodeGenOptLevel::None
                                                    : llvm::CodeGenOptLevel::Default);
  VectorMathLibraryLoaded();
  std::unique_ptr<CpuJit> cpu_jit(new CpuJit());
  cpu_jit->options_ = options;
  cpu_jit->cpu_ = jtmb->getCPU();
  cpu_jit->features_ = jtmb->getFeatures().getString();
  cpu_jit->triple_ = jtmb->getTargetTriple().str();
  cpu_jit->target_description_ = fmt::format("{}, cpu {}", cpu_jit->triple_, cpu_jit->cpu_);
  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(*jtmb)).create();
  if (!jit) return Error("cannot create the CPU JIT: " + ErrorText(jit.takeError()));
  cpu_jit->jit_ = std::move(*jit);
  const std::string perf_map =
      options.perf_map_path.empty() ? PerfMapPathFromEnvironment() : options.perf_map_path;
  if (!perf_map.empty() && !WritePerfMap(*cpu_jit->jit_, perf_map)) {
    return Error("cannot list the JIT's functions for perf: the JIT does not link with JITLink");
  }
  llvm::orc::JITDylib& dylib = cpu_jit->jit_->getMainJITDylib();
  auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      cpu_jit->jit_->getDataLayout().getGlobalPrefix());
  if (!process) return Error("cannot search the process's symbols: " + ErrorText(process.takeError()));
  dylib.addGenerator(std::move(*process));
  llvm::orc::SymbolMap symbols;
  for (const auto& [name, address] : CpuRuntimeSymbols()) {
    symbols[cpu_jit->jit_->mangleAndIntern(name)] = {llvm::orc::ExecutorAddr::fromPtr(address),
                                                    llvm::JITSymbolFlags::Exported};
  }
  if (auto error = dylib.define(llvm::orc::absoluteSymbols(std::move(symbols)))) {
    return Error("cannot define the runtime symbols: " + ErrorText(std::move(error)));
  }
  return cpu_jit;
}

CpuJit::~CpuJit() = default;

StatusOr<CompiledIr> CpuJit::AddModule(std::unique_ptr<llvm::Module> module,
                                       std::unique_ptr<llvm::LLVMContext> context, bool keep_ir,
                                       const std::function<int(const llvm::Function&)>& level_of) {
  module->setDataLayout(jit_->getDataLayout());
  module->setTargetTriple(triple_);
  SetHostFunctionAttributes(*module, cpu_, features_);
  std::string verify_errors;
  llvm::raw_string_ostream verify_os(verify_errors);
  if (llvm::verifyModule(*module, &verify_os)) {
    return Error("generated LLVM IR is invalid (a code generation bug): " + verify_errors);
  }
  CompiledIr ir;
  if (keep_ir) ir.ir_no_opt = PrintModule(*module);
  ThreadPool& pool = ThreadPool::Default();
  ASSIGN_OR_RETURN(
      std::vector<ModulePartition> partitions,
      PartitionModule(*module,
                      [&](const llvm::Function& f) {
                        return level_of ? level_of(f) : options_.opt_level;
                      },
                      pool.parallelism()));
  module.reset();
  context.reset();
  // Partitions compiled before (same IR, level and target) come from the object cache, unless
  // the optimized IR is wanted: that needs the optimizer to run.
  ObjectCache& cache = ObjectCache::Global();
  const std::string target_cpu = cpu_ + (VectorMathLibraryLoaded() ? " libmvec" : "");
  std::vector<std::string> keys;
  std::vector<std::optional<std::string>> cached(partitions.size());
  for (size_t i = 0; i < partitions.size(); ++i) {
    keys.push_back(ObjectCache::Key(partitions[i].bitcode, partitions[i].opt_level, triple_,
                                    target_cpu, features_));
    if (keep_ir) continue;
    std::string warning;
    cached[i] = cache.Lookup(keys[i], options_.persistent_cache_dir, &warning);
    if (!warning.empty()) ir.warnings.push_back(std::move(warning));
  }
  std::vector<CompiledPartition> compiled(partitions.size());
  pool.ParallelFor(static_cast<int64_t>(partitions.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (!cached[i]) compiled[i] = CompilePartition(partitions[i], keep_ir);
    }
  });
  ir.partitions = static_cast<int>(partitions.size());
  for (size_t i = 0; i < compiled.size(); ++i) {
    if (!compiled[i].error.empty()) return Error("compiling the kernels: " + compiled[i].error);
    std::string object;
    if (cached[i]) {
      object = std::move(*cached[i]);
      ++ir.cached_partitions;
    } else {
      object.assign(compiled[i].object.data(), compiled[i].object.size());
      std::string warning;
      cache.Insert(keys[i], object, options_.persistent_cache_dir, &warning);
      if (!warning.empty()) ir.warnings.push_back(std::move(warning));
    }
    auto buffer = llvm::MemoryBuffer::getMemBufferCopy(object, fmt::format("partition{}", i));
    if (auto error = jit_->addObjectFile(std::move(buffer))) {
      return Error("cannot add the kernels to the JIT: " + ErrorText(std::move(error)));
    }
  }
  if (keep_ir) {
    ASSIGN_OR_RETURN(ir.ir_with_opt, LinkOptimizedPartitions(compiled));
  }
  return ir;
}

Status CpuJit::DefineSymbols(const std::vector<std::pair<std::string, void*>>& symbols) {
  llvm::orc::SymbolMap map;
  for (const auto& [name, address] : symbols) {
    map[jit_->mangleAndIntern(name)] = {llvm::orc::ExecutorAddr::fromPtr(address),
                                        llvm::JITSymbolFlags::Exported};
  }
  if (auto error = jit_->getMainJITDylib().define(llvm::orc::absoluteSymbols(std::move(map)))) {
    return Error("cannot define the symbols: " + ErrorText(std::move(error)));
  }
  return OkStatus();
}

StatusOr<void*> CpuJit::Lookup(const std::string& name) {
  auto symbol = jit_->lookup(name);
  if (!symbol) return Error(fmt::format("cannot compile {}: {}", name, ErrorText(symbol.takeError())));
  return symbol->toPtr<void*>();
}

StatusOr<std::string> CompileIrToHostObject(const std::string& ir_text) {
  InitializeLlvmOnce();
  llvm::LLVMContext context;
  llvm::SMDiagnostic diagnostic;
  std::unique_ptr<llvm::Module> module =
      llvm::parseIR(llvm::MemoryBufferRef(ir_text, "kernels"), diagnostic, context);
  if (module == nullptr) return Error("cannot read the generated IR: " + diagnostic.getMessage().str());
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) return Error(ErrorText(jtmb.takeError()));
  auto tm = jtmb->createTargetMachine();
  if (!tm) return Error(ErrorText(tm.takeError()));
  module->setDataLayout((*tm)->createDataLayout());
  llvm::SmallString<0> object;
  llvm::raw_svector_ostream os(object);
  llvm::legacy::PassManager pm;
  if ((*tm)->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile)) {
    return Error("the host target cannot emit object files");
  }
  pm.run(*module);
  return std::string(object.str());
}

void RunStandardPipeline(llvm::Module& module, llvm::TargetMachine* tm, int opt_level,
                         const llvm::TargetLibraryInfoImpl& library_info) {
  AllowWideInterleavedGroupsOnce();
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = opt_level >= 2;
  tuning.SLPVectorization = opt_level >= 2;
  llvm::PassBuilder pb(tm, tuning);
  fam.registerPass([&] { return llvm::TargetLibraryAnalysis(library_info); });
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  const llvm::OptimizationLevel level = opt_level <= 0   ? llvm::OptimizationLevel::O0
                                        : opt_level == 1 ? llvm::OptimizationLevel::O1
                                        : opt_level == 2 ? llvm::OptimizationLevel::O2
                                                         : llvm::OptimizationLevel::O3;
  llvm::ModulePassManager mpm = level == llvm::OptimizationLevel::O0
                                    ? pb.buildO0DefaultPipeline(level)
                                    : pb.buildPerModuleDefaultPipeline(level);
  mpm.run(module, mam);
}

Status OptimizeModuleForHost(llvm::Module& module, int opt_level) {
  InitializeLlvmOnce();
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) return Error(ErrorText(jtmb.takeError()));
  auto tm = jtmb->createTargetMachine();
  if (!tm) return Error(ErrorText(tm.takeError()));
  SetHostFunctionAttributes(module, jtmb->getCPU(), jtmb->getFeatures().getString());
  return RunPipeline(module, tm->get(), opt_level);
}

}  // namespace xlens::codegen
