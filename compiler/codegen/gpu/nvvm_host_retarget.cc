#include "compiler/codegen/gpu/nvvm_host_retarget.h"

#include <map>
#include <set>

#include <fmt/format.h>
#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/ReplaceConstant.h>
#include <llvm/Support/raw_ostream.h>

namespace xlens::codegen {
namespace {

using llvm::Function;
using llvm::Value;

// The functions nvvm.annotations marks as kernels, in the order it lists them.
std::vector<Function*> Kernels(llvm::Module& module) {
  std::vector<Function*> kernels;
  llvm::NamedMDNode* annotations = module.getNamedMetadata("nvvm.annotations");
  if (annotations == nullptr) return kernels;
  for (llvm::MDNode* node : annotations->operands()) {
    if (node->getNumOperands() < 2) continue;
    auto* kind = llvm::dyn_cast_or_null<llvm::MDString>(node->getOperand(1).get());
    auto* value = llvm::dyn_cast_or_null<llvm::ValueAsMetadata>(node->getOperand(0).get());
    if (kind == nullptr || kind->getString() != "kernel" || value == nullptr) continue;
    if (auto* f = llvm::dyn_cast<Function>(value->getValue())) {
      if (!f->isDeclaration()) kernels.push_back(f);
    }
  }
  return kernels;
}

// Gives every defined function the context as its first parameter and passes it at every call.
Status AddContextParameters(llvm::Module& module, std::vector<Function*>& kernels) {
  llvm::LLVMContext& c = module.getContext();
  std::vector<Function*> defined;
  for (Function& f : module) {
    if (!f.isDeclaration()) defined.push_back(&f);
  }
  std::map<Function*, Function*> replaced;
  for (Function* f : defined) {
    if (f->isVarArg()) {
      return Error(fmt::format("{} takes variable arguments, which the GPU simulator does not model",
                               f->getName().str()));
    }
    std::vector<llvm::Type*> params = {llvm::PointerType::get(c, 0)};
    for (llvm::Type* t : f->getFunctionType()->params()) params.push_back(t);
    auto* type = llvm::FunctionType::get(f->getReturnType(), params, false);
    Function* nf = Function::Create(type, f->getLinkage(), f->getAddressSpace(), "", &module);
    nf->takeName(f);
    const llvm::AttributeList attributes = f->getAttributes();
    nf->setAttributes(llvm::AttributeList::get(c, attributes.getFnAttrs(), attributes.getRetAttrs(), {}));
    nf->splice(nf->begin(), f);
    for (unsigned i = 0; i < f->arg_size(); ++i) {
      nf->getArg(i + 1)->takeName(f->getArg(i));
      f->getArg(i)->replaceAllUsesWith(nf->getArg(i + 1));
    }
    nf->getArg(0)->setName("sim.context");
    replaced[f] = nf;
  }
  for (auto [f, nf] : replaced) {
    std::vector<llvm::User*> users(f->user_begin(), f->user_end());
    for (llvm::User* user : users) {
      auto* call = llvm::dyn_cast<llvm::CallInst>(user);
      if (call == nullptr || call->getCalledOperand() != f) {
        return Error(fmt::format("{} is used other than by a direct call (a function pointer), which "
                                 "the GPU simulator does not model", nf->getName().str()));
      }
      std::vector<Value*> args = {call->getFunction()->getArg(0)};
      for (Value* a : call->args()) args.push_back(a);
      auto* replacement = llvm::CallInst::Create(nf, args, "", call->getIterator());
      replacement->takeName(call);
      call->replaceAllUsesWith(replacement);
      call->eraseFromParent();
    }
    for (Function*& k : kernels) {
      if (k == f) k = nf;
    }
    f->eraseFromParent();
  }
  return OkStatus();
}

// The context pointer of the function `inst` is in.
Value* ContextOf(llvm::Instruction* inst) { return inst->getFunction()->getArg(0); }

Value* ContextField(llvm::IRBuilder<>& b, Value* context, int64_t offset, llvm::Type* type) {
  Value* field = b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), context, offset);
  return b.CreateLoad(type, field);
}

struct SharedLayout {
  std::map<llvm::GlobalVariable*, int64_t> offsets;
  std::map<llvm::GlobalVariable*, int64_t> ends;
  std::set<llvm::GlobalVariable*> dynamic;
  int64_t static_bytes = 0;
  // Functions that use each shared variable (directly).
  std::map<Function*, std::set<llvm::GlobalVariable*>> used_by;
};

// Shared variables become offsets into the block's buffer, read from the context.
StatusOr<SharedLayout> LowerSharedMemory(llvm::Module& module) {
  SharedLayout layout;
  const llvm::DataLayout& dl = module.getDataLayout();
  std::vector<llvm::GlobalVariable*> shared;
  for (llvm::GlobalVariable& g : module.globals()) {
    if (g.getAddressSpace() == 3) shared.push_back(&g);
  }
  int64_t offset = 0;
  for (llvm::GlobalVariable* g : shared) {
    const int64_t size = static_cast<int64_t>(dl.getTypeAllocSize(g->getValueType()));
    if (g->isDeclaration() || size == 0) {
      layout.dynamic.insert(g);
      continue;
    }
    const int64_t align = std::max<int64_t>(16, g->getAlign().valueOrOne().value());
    offset = (offset + align - 1) / align * align;
    layout.offsets[g] = offset;
    offset += size;
    layout.ends[g] = offset;
  }
  layout.static_bytes = (offset + 15) / 16 * 16;
  for (llvm::GlobalVariable* g : layout.dynamic) {
    layout.offsets[g] = layout.static_bytes;
    layout.ends[g] = layout.static_bytes;
  }
  std::vector<llvm::Constant*> constants(shared.begin(), shared.end());
  llvm::convertUsersOfConstantsToInstructions(constants);
  std::map<Function*, Value*> bases;
  for (llvm::GlobalVariable* g : shared) {
    std::vector<llvm::Use*> uses;
    for (llvm::Use& use : g->uses()) uses.push_back(&use);
    for (llvm::Use* use : uses) {
      auto* inst = llvm::dyn_cast<llvm::Instruction>(use->getUser());
      if (inst == nullptr) {
        return Error(fmt::format("shared variable {} is used outside a function, which the GPU "
                                 "simulator does not model", g->getName().str()));
      }
      Function* f = inst->getFunction();
      layout.used_by[f].insert(g);
      Value*& base = bases[f];
      llvm::IRBuilder<> b(&*f->getEntryBlock().getFirstInsertionPt());
      if (base == nullptr) {
        base = ContextField(b, f->getArg(0), offsetof(SimThreadContext, shared), b.getPtrTy());
        b.SetInsertPoint(llvm::cast<llvm::Instruction>(base)->getNextNode());
      } else {
        b.SetInsertPoint(llvm::cast<llvm::Instruction>(base)->getNextNode());
      }
      Value* address = b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), base, layout.offsets[g]);
      use->set(b.CreateAddrSpaceCast(address, g->getType(), g->getName()));
    }
  }
  for (llvm::GlobalVariable* g : shared) g->eraseFromParent();
  return layout;
}

// The host function computing what libdevice's `name` computes; empty when there is none.
std::string HostMathName(llvm::StringRef name) {
  static const std::set<std::string> kFunctions = {
      "exp", "exp2", "exp10", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
      "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "pow",
      "sqrt", "cbrt", "fabs", "floor", "ceil", "trunc", "round", "rint", "nearbyint", "fmod",
      "remainder", "fmin", "fmax", "fma", "erf", "erfc", "hypot", "copysign", "lgamma",
      "tgamma", "logb", "fdim", "ldexp", "scalbn"};
  std::string base = name.drop_front(5).str();  // "__nv_"
  // libdevice's fast approximations compute what the precise functions compute, less exactly.
  if (base.rfind("fast_", 0) == 0) base = base.substr(5);
  std::string plain = base;
  if (!plain.empty() && plain.back() == 'f') plain.pop_back();
  if (kFunctions.count(base) || kFunctions.count(plain)) return base;
  return "";
}

class CallRewriter {
 public:
  explicit CallRewriter(llvm::Module& module) : module_(module) {}

  // Rewrites every call of a defined function; what cannot be rewritten is collected.
  Status Run() {
    std::vector<llvm::CallInst*> calls;
    for (Function& f : module_) {
      for (llvm::BasicBlock& block : f) {
        for (llvm::Instruction& inst : block) {
          auto* call = llvm::dyn_cast<llvm::CallInst>(&inst);
          if (call == nullptr || call->isInlineAsm()) {
            if (call != nullptr) unmodelled_.insert("inline assembly");
            continue;
          }
          Function* callee = call->getCalledFunction();
          if (callee == nullptr) {
            unmodelled_.insert("an indirect call");
            continue;
          }
          if (callee->isDeclaration()) calls.push_back(call);
        }
      }
    }
    for (llvm::CallInst* call : calls) Rewrite(call);
    if (!unmodelled_.empty()) {
      std::string names;
      for (const std::string& n : unmodelled_) names += (names.empty() ? "" : ", ") + n;
      return Error(fmt::format("the GPU simulator does not model {}", names));
    }
    return OkStatus();
  }

 private:
  llvm::FunctionCallee Callback(const char* name, llvm::Type* result, std::vector<llvm::Type*> params) {
    params.insert(params.begin(), llvm::PointerType::get(module_.getContext(), 0));
    return module_.getOrInsertFunction(name, llvm::FunctionType::get(result, params, false));
  }

  void Replace(llvm::CallInst* call, Value* value) {
    if (value != nullptr) {
      // The call's name stays on its replacement, so that instructions print as written.
      if (llvm::isa<llvm::Instruction>(value) && !value->hasName()) value->takeName(call);
      call->replaceAllUsesWith(value);
    }
    call->eraseFromParent();
  }

  void Rewrite(llvm::CallInst* call) {
    const std::string name = call->getCalledFunction()->getName().str();
    llvm::IRBuilder<> b(call);
    Value* context = ContextOf(call);
    llvm::Type* i32 = b.getInt32Ty();
    auto arg = [&](unsigned i) { return call->getArgOperand(i); };
    if (name.rfind("llvm.nvvm.", 0) == 0) {
      if (Value* v = RewriteNvvm(call, name.substr(10), b, context); v != nullptr || handled_) {
        handled_ = false;
        Replace(call, v);
        return;
      }
      unmodelled_.insert(name);
      return;
    }
    if (name == "llvm.trap" || name == "llvm.ubsantrap") {
      b.CreateCall(Callback("__xlsim_trap", b.getVoidTy(), {}), {context});
      Replace(call, nullptr);
      return;
    }
    if (name.rfind("llvm.", 0) == 0 || name.rfind("__xlsim_", 0) == 0) return;
    if (name.rfind("__nv_", 0) == 0) {
      llvm::Type* t = call->getType();
      if ((name == "__nv_rsqrtf" || name == "__nv_rsqrt") && t->isFloatingPointTy()) {
        Value* root = b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, arg(0));
        Replace(call, b.CreateFDiv(llvm::ConstantFP::get(t, 1.0), root));
        return;
      }
      const bool is_float = t->isFloatTy() || (call->arg_size() > 0 && call->getArgOperand(0)->getType()->isFloatTy());
      const std::string suffix = is_float ? "f" : "";
      auto operand = [&]() { return call->getArgOperand(0); };
      if (name == "__nv_isnan" + suffix || name == "__nv_isinf" + suffix || name == "__nv_finite" + suffix ||
          name == "__nv_isfinited") {
        Value* x = operand();
        Value* test = name.find("isnan") != std::string::npos
                          ? b.CreateFCmpUNO(x, x)
                          : name.find("isinf") != std::string::npos
                                ? b.CreateFCmpOEQ(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x),
                                                  llvm::ConstantFP::getInfinity(x->getType()))
                                : b.CreateFCmpONE(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x),
                                                  llvm::ConstantFP::getInfinity(x->getType()));
        Replace(call, b.CreateZExt(test, t));
        return;
      }
      if ((name == "__nv_powif" || name == "__nv_powi") && call->arg_size() == 2) {
        Replace(call, b.CreateIntrinsic(llvm::Intrinsic::powi, {t, call->getArgOperand(1)->getType()},
                                        {operand(), call->getArgOperand(1)}));
        return;
      }
      if (name == "__nv_saturatef") {
        Value* low = b.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, operand(), llvm::ConstantFP::get(t, 0.0));
        Replace(call, b.CreateBinaryIntrinsic(llvm::Intrinsic::minnum, low, llvm::ConstantFP::get(t, 1.0)));
        return;
      }
      const std::string host = HostMathName(name);
      if (host.empty()) {
        unmodelled_.insert(name);
        return;
      }
      llvm::FunctionCallee fn = module_.getOrInsertFunction(host, call->getFunctionType());
      std::vector<Value*> args(call->arg_begin(), call->arg_end());
      Replace(call, b.CreateCall(fn, args));
      return;
    }
    (void)i32;
    unmodelled_.insert(fmt::format("a call of {} (not a libdevice function)", name));
  }

  // One NVVM intrinsic (`n` without "llvm.nvvm."); nullptr with handled_ for void results,
  // nullptr alone when the simulator does not model it.
  Value* RewriteNvvm(llvm::CallInst* call, const std::string& n, llvm::IRBuilder<>& b, Value* context) {
    llvm::Type* i32 = b.getInt32Ty();
    llvm::Type* t = call->getType();
    auto arg = [&](unsigned i) { return call->getArgOperand(i); };
    auto starts = [&](const char* prefix) { return n.rfind(prefix, 0) == 0; };
    if (starts("read.ptx.sreg.")) {
      static const std::map<std::string, int64_t> kFields = {
          {"tid.x", 0}, {"tid.y", 4}, {"tid.z", 8}, {"ntid.x", 12}, {"ntid.y", 16}, {"ntid.z", 20},
          {"ctaid.x", 24}, {"ctaid.y", 28}, {"ctaid.z", 32}, {"nctaid.x", 36}, {"nctaid.y", 40},
          {"nctaid.z", 44}, {"laneid", 48}, {"warpid", 52}, {"nwarpid", 56}};
      const std::string reg = n.substr(14);
      if (auto it = kFields.find(reg); it != kFields.end()) return ContextField(b, context, it->second, i32);
      if (reg == "warpsize") return b.getInt32(32);
      if (starts("read.ptx.sreg.lanemask.")) {
        Value* lane = ContextField(b, context, 48, i32);
        Value* eq = b.CreateShl(b.getInt32(1), lane);
        Value* lt = b.CreateSub(eq, b.getInt32(1));
        Value* le = b.CreateOr(lt, eq);
        const std::string which = reg.substr(9);
        if (which == "eq") return eq;
        if (which == "lt") return lt;
        if (which == "le") return le;
        if (which == "gt") return b.CreateNot(le);
        if (which == "ge") return b.CreateNot(lt);
      }
      return nullptr;
    }
    auto barrier = [&](Value* expected) {
      b.CreateCall(Callback("__xlsim_barrier", b.getVoidTy(), {i32}), {context, expected});
      handled_ = true;
      return nullptr;
    };
    auto barrier_id_zero = [&](Value* id) {
      auto* constant = llvm::dyn_cast<llvm::ConstantInt>(id);
      return constant != nullptr && constant->isZero();
    };
    if (n == "barrier0") return barrier(b.getInt32(-1));
    if ((n == "barrier.sync" || n == "bar.sync") && barrier_id_zero(arg(0))) return barrier(b.getInt32(-1));
    if ((n == "barrier.sync.cnt" || n == "barrier") && barrier_id_zero(arg(0))) return barrier(arg(1));
    if (n == "barrier0.and" || n == "barrier0.or" || n == "barrier0.popc") {
      const int op = n == "barrier0.and" ? 0 : n == "barrier0.or" ? 1 : 2;
      return b.CreateCall(Callback("__xlsim_barrier_reduce", i32, {i32, i32}),
                          {context, b.getInt32(op), arg(0)});
    }
    if (n == "bar.warp.sync") {
      b.CreateCall(Callback("__xlsim_warp_sync", b.getVoidTy(), {i32}), {context, arg(0)});
      handled_ = true;
      return nullptr;
    }
    if (n == "activemask") return b.CreateCall(Callback("__xlsim_active_mask", i32, {}), {context});
    if (starts("shfl.")) {
      // shfl.sync.MODE.TYPE(mask, a, b, c) and the older shfl.MODE.TYPE(a, b, c).
      std::string rest = n.substr(5);
      const bool sync = rest.rfind("sync.", 0) == 0;
      if (sync) rest = rest.substr(5);
      const std::string mode = rest.substr(0, rest.find('.'));
      const std::string type = rest.substr(rest.find('.') + 1);
      static const std::map<std::string, int> kModes = {{"idx", 0}, {"up", 1}, {"down", 2}, {"bfly", 3}};
      auto it = kModes.find(mode);
      if (it == kModes.end() || (type != "i32" && type != "f32" && type != "i32p" && type != "f32p")) return nullptr;
      const unsigned first = sync ? 1 : 0;
      Value* mask = sync ? arg(0) : b.getInt32(-1);
      Value* value = arg(first);
      const bool is_float = type[0] == 'f';
      if (is_float) value = b.CreateBitCast(value, i32);
      Value* packed = b.CreateCall(Callback("__xlsim_shuffle", b.getInt64Ty(), {i32, i32, i32, i32, i32}),
                                   {context, b.getInt32(it->second), mask, value, arg(first + 1), arg(first + 2)});
      Value* result = b.CreateTrunc(packed, i32);
      if (is_float) result = b.CreateBitCast(result, b.getFloatTy());
      if (type.back() != 'p') return result;
      Value* in_range = b.CreateTrunc(b.CreateLShr(packed, 32), b.getInt1Ty());
      Value* pair = b.CreateInsertValue(llvm::PoisonValue::get(t), result, {0});
      return b.CreateInsertValue(pair, in_range, {1});
    }
    if (starts("vote.")) {
      std::string rest = n.substr(5);
      const bool sync = rest.size() > 5 && rest.substr(rest.size() - 5) == ".sync";
      if (sync) rest = rest.substr(0, rest.size() - 5);
      static const std::map<std::string, int> kModes = {{"all", 0}, {"any", 1}, {"uni", 2}, {"ballot", 3}};
      auto it = kModes.find(rest);
      if (it == kModes.end()) return nullptr;
      Value* mask = sync ? arg(0) : b.getInt32(-1);
      Value* predicate = b.CreateZExt(arg(sync ? 1 : 0), i32);
      Value* r = b.CreateCall(Callback("__xlsim_vote", i32, {i32, i32, i32}),
                              {context, b.getInt32(it->second), mask, predicate});
      return t->isIntegerTy(1) ? b.CreateTrunc(r, t) : r;
    }
    if (starts("redux.sync.")) {
      static const std::map<std::string, int> kOps = {{"add", 0}, {"min", 1}, {"max", 2}, {"umin", 3},
                                                      {"umax", 4}, {"and", 5}, {"or", 6}, {"xor", 7}};
      auto it = kOps.find(n.substr(11));
      if (it == kOps.end() || !t->isIntegerTy(32)) return nullptr;
      return b.CreateCall(Callback("__xlsim_warp_reduce", i32, {i32, i32, i32}),
                          {context, b.getInt32(it->second), arg(1), arg(0)});
    }
    if (starts("membar.") || starts("fence.")) {
      b.CreateFence(llvm::AtomicOrdering::SequentiallyConsistent);
      handled_ = true;
      return nullptr;
    }
    if (starts("ldg.global.") || starts("ldu.global.")) {
      uint64_t align = 1;
      if (auto* a = llvm::dyn_cast<llvm::ConstantInt>(arg(1))) align = std::max<uint64_t>(1, a->getZExtValue());
      return b.CreateAlignedLoad(t, arg(0), llvm::Align(align));
    }
    if (n == "fma.rn.f" || n == "fma.rn.d") {
      return b.CreateIntrinsic(llvm::Intrinsic::fma, {t}, {arg(0), arg(1), arg(2)});
    }
    if (n == "fmin.f" || n == "fmin.d") return b.CreateBinaryIntrinsic(llvm::Intrinsic::minnum, arg(0), arg(1));
    if (n == "fmax.f" || n == "fmax.d") return b.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, arg(0), arg(1));
    if (n == "sqrt.rn.f" || n == "sqrt.rn.d" || n == "sqrt.f") return b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, arg(0));
    if (n == "fabs.f" || n == "fabs.d") return b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, arg(0));
    if (n == "ex2.approx.f" || n == "ex2.approx.ftz.f") return b.CreateUnaryIntrinsic(llvm::Intrinsic::exp2, arg(0));
    if (n == "lg2.approx.f" || n == "lg2.approx.ftz.f") return b.CreateUnaryIntrinsic(llvm::Intrinsic::log2, arg(0));
    if (n == "rsqrt.approx.f" || n == "rsqrt.approx.d" || n == "rsqrt.approx.ftz.f") {
      return b.CreateFDiv(llvm::ConstantFP::get(t, 1.0), b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, arg(0)));
    }
    if (n == "rcp.rn.f" || n == "rcp.rn.d") return b.CreateFDiv(llvm::ConstantFP::get(t, 1.0), arg(0));
    if (n == "div.rn.f" || n == "div.rn.d") return b.CreateFDiv(arg(0), arg(1));
    return nullptr;
  }

  llvm::Module& module_;
  std::set<std::string> unmodelled_;
  bool handled_ = false;
};

bool IsSynchronizing(llvm::StringRef callee) {
  return callee == "__xlsim_barrier" || callee == "__xlsim_barrier_reduce" || callee == "__xlsim_shuffle" ||
         callee == "__xlsim_vote" || callee == "__xlsim_warp_reduce" || callee == "__xlsim_warp_sync";
}

// Calls __xlsim_observe before every global and shared access; returns the sites.
std::vector<SimAccessSite> InstrumentMemory(llvm::Module& module, const std::vector<Function*>& kernels) {
  std::vector<SimAccessSite> sites;
  const llvm::DataLayout& dl = module.getDataLayout();
  llvm::LLVMContext& c = module.getContext();
  llvm::Type* i32 = llvm::Type::getInt32Ty(c);
  llvm::Type* ptr = llvm::PointerType::get(c, 0);
  llvm::FunctionCallee observe = module.getOrInsertFunction(
      "__xlsim_observe", llvm::FunctionType::get(llvm::Type::getVoidTy(c), {ptr, i32, ptr, i32, i32}, false));
  for (Function& f : module) {
    if (f.isDeclaration()) continue;
    std::vector<llvm::Instruction*> accesses;
    for (llvm::BasicBlock& block : f) {
      for (llvm::Instruction& inst : block) {
        if (llvm::isa<llvm::LoadInst, llvm::StoreInst, llvm::AtomicRMWInst, llvm::AtomicCmpXchgInst>(inst)) {
          accesses.push_back(&inst);
        }
      }
    }
    for (llvm::Instruction* inst : accesses) {
      Value* address = llvm::getLoadStorePointerOperand(inst);
      llvm::Type* type = nullptr;
      bool store = false, atomic = false;
      if (auto* load = llvm::dyn_cast<llvm::LoadInst>(inst)) {
        type = load->getType();
      } else if (auto* s = llvm::dyn_cast<llvm::StoreInst>(inst)) {
        type = s->getValueOperand()->getType();
        store = true;
      } else if (auto* rmw = llvm::dyn_cast<llvm::AtomicRMWInst>(inst)) {
        address = rmw->getPointerOperand();
        type = rmw->getValOperand()->getType();
        store = atomic = true;
      } else if (auto* cas = llvm::dyn_cast<llvm::AtomicCmpXchgInst>(inst)) {
        address = cas->getPointerOperand();
        type = cas->getNewValOperand()->getType();
        store = atomic = true;
      }
      const unsigned space = address->getType()->getPointerAddressSpace();
      if (space != 0 && space != 1 && space != 3) continue;
      // Generic pointers to the thread's own allocas are local memory, not global.
      if (space == 0 && llvm::isa<llvm::AllocaInst>(llvm::getUnderlyingObject(address, 0))) continue;
      // The context's own fields (the shared base) are not the kernel's traffic.
      if (llvm::getUnderlyingObject(address, 0) == f.getArg(0)) continue;
      SimAccessSite site;
      site.kernel = f.getName().str();
      llvm::raw_string_ostream os(site.instruction);
      inst->print(os);
      size_t start = site.instruction.find_first_not_of(' ');
      site.instruction = site.instruction.substr(start == std::string::npos ? 0 : start);
      site.address_space = static_cast<int32_t>(space);
      site.bytes = static_cast<int32_t>(dl.getTypeStoreSize(type));
      site.store = store;
      site.atomic = atomic;
      llvm::IRBuilder<> b(inst);
      Value* generic = space == 0 ? address : b.CreateAddrSpaceCast(address, ptr);
      const int32_t flags = (store ? kSimAccessStore : 0) | (atomic ? kSimAccessAtomic : 0) |
                            static_cast<int32_t>(space << 8);
      b.CreateCall(observe, {f.getArg(0), b.getInt32(static_cast<int32_t>(sites.size())), generic,
                             b.getInt32(site.bytes), b.getInt32(flags)});
      sites.push_back(std::move(site));
    }
  }
  (void)kernels;
  return sites;
}

// The defined functions `f` reaches through direct calls, itself included.
std::set<Function*> Reachable(Function* f) {
  std::set<Function*> seen = {f};
  std::vector<Function*> work = {f};
  while (!work.empty()) {
    Function* g = work.back();
    work.pop_back();
    for (llvm::BasicBlock& block : *g) {
      for (llvm::Instruction& inst : block) {
        auto* call = llvm::dyn_cast<llvm::CallInst>(&inst);
        Function* callee = call ? call->getCalledFunction() : nullptr;
        if (callee != nullptr && !callee->isDeclaration() && seen.insert(callee).second) work.push_back(callee);
      }
    }
  }
  return seen;
}

}  // namespace

StatusOr<HostRetargetResult> RetargetNvvmForHost(llvm::Module& module, const HostRetargetOptions& options) {
  std::vector<Function*> kernels = Kernels(module);
  if (kernels.empty()) return Error("the GPU module has no kernel (nothing in nvvm.annotations)");
  std::vector<std::string> names;
  for (Function* k : kernels) names.push_back(k->getName().str());
  RETURN_IF_ERROR(AddContextParameters(module, kernels));
  if (llvm::NamedMDNode* annotations = module.getNamedMetadata("nvvm.annotations")) {
    annotations->eraseFromParent();
  }
  // Uses of the shared variables are recorded before they are lowered (per function).
  ASSIGN_OR_RETURN(SharedLayout shared, LowerSharedMemory(module));
  CallRewriter rewriter(module);
  RETURN_IF_ERROR(rewriter.Run());

  HostRetargetResult result;
  if (options.observe_memory) result.sites = InstrumentMemory(module, kernels);

  // Which functions synchronise: directly, then through the call graph.
  std::set<Function*> direct;
  for (Function& f : module) {
    for (llvm::BasicBlock& block : f) {
      for (llvm::Instruction& inst : block) {
        auto* call = llvm::dyn_cast<llvm::CallInst>(&inst);
        if (call && call->getCalledFunction() && IsSynchronizing(call->getCalledFunction()->getName())) {
          direct.insert(&f);
        }
      }
    }
  }
  llvm::LLVMContext& c = module.getContext();
  llvm::Type* ptr = llvm::PointerType::get(c, 0);
  for (size_t i = 0; i < kernels.size(); ++i) {
    Function* kernel = kernels[i];
    SimKernel info;
    info.name = names[i];
    info.entry_symbol = options.symbol_prefix + names[i];
    info.parameters = static_cast<int64_t>(kernel->arg_size()) - 1;
    for (Function* f : Reachable(kernel)) {
      if (direct.count(f)) info.synchronizes = true;
      auto used = shared.used_by.find(f);
      if (used == shared.used_by.end()) continue;
      for (llvm::GlobalVariable* g : used->second) {
        info.static_shared_bytes = std::max(info.static_shared_bytes, shared.ends[g]);
      }
    }
    info.static_shared_bytes = (info.static_shared_bytes + 15) / 16 * 16;
    // The entry point: arguments from an array of 64-bit values.
    Function* entry = Function::Create(llvm::FunctionType::get(llvm::Type::getVoidTy(c), {ptr, ptr}, false),
                                       Function::ExternalLinkage, info.entry_symbol, module);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(c, "entry", entry));
    std::vector<Value*> args = {entry->getArg(0)};
    for (unsigned a = 1; a < kernel->arg_size(); ++a) {
      Value* raw = b.CreateLoad(b.getInt64Ty(), b.CreateConstInBoundsGEP1_64(b.getInt64Ty(), entry->getArg(1), a - 1));
      llvm::Type* t = kernel->getArg(a)->getType();
      if (t->isPointerTy()) {
        args.push_back(b.CreateIntToPtr(raw, t));
      } else if (t->isIntegerTy()) {
        args.push_back(b.CreateZExtOrTrunc(raw, t));
      } else {
        return Error(fmt::format("kernel {}: parameter {} has a type the simulator cannot pass", names[i], a - 1));
      }
    }
    b.CreateCall(kernel, args);
    b.CreateRetVoid();
    result.kernels.push_back(std::move(info));
  }
  // Only the entry points are visible: modules of several executables share one JIT.
  std::set<std::string> entries;
  for (const SimKernel& k : result.kernels) entries.insert(k.entry_symbol);
  for (Function& f : module) {
    if (!f.isDeclaration() && !entries.count(f.getName().str())) f.setLinkage(llvm::GlobalValue::InternalLinkage);
  }
  for (llvm::GlobalVariable& g : module.globals()) {
    if (!g.isDeclaration()) g.setLinkage(llvm::GlobalValue::InternalLinkage);
  }
  return result;
}

}  // namespace xlens::codegen
