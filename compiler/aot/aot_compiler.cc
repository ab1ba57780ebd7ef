#include "compiler/aot/aot_compiler.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include <fmt/format.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include "compiler/aot/aot_builder.h"
#include "compiler/aot/aot_target.h"
#include "compiler/aot/convolution_emitter.h"
#include "compiler/aot/dot_emitter.h"
#include "compiler/aot/row_major_interface.h"
#include "compiler/aot/sort_emitter.h"
#include "compiler/codegen/complex_ops.h"
#include "compiler/codegen/kernel_emitter.h"
#include "compiler/codegen/sort_comparator.h"
#include "compiler/hlo/annotation_custom_calls.h"
#include "compiler/hlo/bounded_dynamic_shapes.h"
#include "compiler/hlo/parser.h"
#include "compiler/hlo/printer.h"
#include "compiler/runtime/executable.h"
#include "compiler/runtime/frame_plan.h"
#include "compiler/runtime/library_thunks.h"

namespace xlens::aot {
namespace {

constexpr int64_t kAlignment = 64;

int64_t Aligned(int64_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

bool IsRowMajor(const Shape& shape) {
  return !shape.has_layout() ||
         shape.layout().minor_to_major == shape_util::DefaultMinorToMajor(shape.rank());
}

std::string PrintText(const llvm::Module& module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os, nullptr);
  return text;
}

// Why `hlo` cannot be part of a self-contained object; "" when it can. Asked of every
// instruction before the passes run (so that the names are the user's) and of the scheduled
// entry after them (so that what the passes made, a sort out of a top-k, is caught too).
std::string WhyNotAheadOfTime(const HloInstruction& hlo) {
  switch (hlo.opcode()) {
    case HloOpcode::kAllReduce: case HloOpcode::kAllReduceStart: case HloOpcode::kAllReduceDone:
    case HloOpcode::kAllGather: case HloOpcode::kAllGatherStart: case HloOpcode::kAllGatherDone:
    case HloOpcode::kAllToAll: case HloOpcode::kRaggedAllToAll: case HloOpcode::kReduceScatter:
    case HloOpcode::kCollectiveBroadcast: case HloOpcode::kCollectivePermute:
    case HloOpcode::kCollectivePermuteStart: case HloOpcode::kCollectivePermuteDone:
    case HloOpcode::kReplicaId: case HloOpcode::kPartitionId:
      return "is an operation of a program of several devices; an ahead-of-time object runs on one";
    case HloOpcode::kSend: case HloOpcode::kSendDone: case HloOpcode::kRecv:
    case HloOpcode::kRecvDone: case HloOpcode::kInfeed: case HloOpcode::kOutfeed:
      return "moves data through a framework's transfer handler, which a program linking only the "
             "object does not have";
    case HloOpcode::kCustomCall:
      return fmt::format("calls \"{}\", code outside the module that the object cannot carry",
                         hlo.custom_call_target.value_or(""));
    case HloOpcode::kFft: case HloOpcode::kCholesky: case HloOpcode::kTriangularSolve:
      return "runs as a library call (Eigen, LAPACK) on the CPU, and has no generated code to put "
             "in the object";
    default:
      return "";
  }
}

Status Refuse(const HloInstruction& hlo, const std::string& why) {
  return Error(fmt::format("{}: {} cannot be compiled ahead of time: it {}", hlo.name(),
                           HloOpcodeString(hlo.opcode()), why));
}

Status CheckEntryPoint(const std::string& name) {
  bool ok = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0]));
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (!ok) {
    return Error(fmt::format("--entry_point: '{}' is not a C identifier (letters, digits and _, "
                             "not starting with a digit)", name));
  }
  return OkStatus();
}

}  // namespace

// The array leaves of a shape, depth-first, with their sizes.
std::vector<std::pair<std::vector<int64_t>, int64_t>> ArrayLeaves(const Shape& shape) {
  std::vector<std::pair<std::vector<int64_t>, int64_t>> leaves;
  shape.ForEachLeaf([&](const Shape& s, const std::vector<int64_t>& index) {
    if (s.IsArray()) leaves.push_back({index, shape_util::ByteSizeOf(s)});
  });
  return leaves;
}

Status AotBuilder::PlaceAllocations() {
  const HloComputation& entry = *module_.entry_computation();
  std::vector<const HloInstruction*> parameters(entry.parameter_instructions().begin(),
                                                entry.parameter_instructions().end());
  std::sort(parameters.begin(), parameters.end(), [](const HloInstruction* a, const HloInstruction* b) {
    return a->parameter_number() < b->parameter_number();
  });
  auto buffer_of = [](const HloInstruction& hlo, const Shape& s, const std::vector<int64_t>& index) {
    AotBuffer buffer;
    buffer.name = hlo.name();
    for (int64_t i : index) buffer.name += fmt::format(".{}", i);
    buffer.element_type = std::string(PrimitiveTypeName(s.element_type()));
    buffer.dimensions = s.dimensions();
    buffer.byte_size = shape_util::ByteSizeOf(s);
    return buffer;
  };
  Status status = OkStatus();
  auto check_layout = [&](const HloInstruction& hlo, const Shape& s, const char* what) {
    if (status.ok() && !IsRowMajor(s)) {
      status = Error(fmt::format("{}: the {} has layout {{{}}}, and the ahead-of-time interface "
                                 "passes row-major arrays only",
                                 hlo.name(), what, fmt::join(s.layout().minor_to_major, ",")));
    }
  };
  for (const HloInstruction* p : parameters) {
    p->shape().ForEachLeaf([&](const Shape& s, const std::vector<int64_t>& index) {
      if (!s.IsArray()) return;
      check_layout(*p, s, "parameter");
      argument_of_[{p->parameter_number(), index}] = static_cast<int64_t>(result_.arguments.size());
      result_.arguments.push_back(buffer_of(*p, s, index));
    });
  }
  const HloInstruction* root = entry.root_instruction();
  root->shape().ForEachLeaf([&](const Shape& s, const std::vector<int64_t>& index) {
    if (!s.IsArray()) return;
    check_layout(*root, s, "result");
    result_leaves_.push_back({root, index});
    AotBuffer buffer = buffer_of(*root, s, index);
    if (!root->shape().IsTuple()) buffer.name = root->name();
    result_.results.push_back(std::move(buffer));
  });
  RETURN_IF_ERROR(status);

  const auto& allocations = assignment_->allocations();
  homes_.assign(allocations.size(), Home{});
  // An output allocation holding exactly one result, at its start, is that result's memory:
  // the kernel writes where the caller wants it and nothing is copied. Results that share an
  // allocation, or are an argument or a constant, are copied at the end.
  std::map<int64_t, std::vector<int64_t>> results_in_allocation;
  std::vector<BufferSlice> result_slices;
  for (const auto& [hlo, index] : result_leaves_) {
    ASSIGN_OR_RETURN(BufferSlice slice, assignment_->GetSlice(*hlo, index));
    results_in_allocation[slice.allocation].push_back(static_cast<int64_t>(result_slices.size()));
    result_slices.push_back(slice);
  }
  result_in_place_.assign(result_leaves_.size(), false);
  std::map<int64_t, const LogicalBuffer*> buffer_by_id;
  for (const LogicalBuffer& buffer : assignment_->buffers()) buffer_by_id[buffer.id] = &buffer;
  for (const BufferAllocation& allocation : allocations) {
    Home& home = homes_[allocation.index];
    switch (allocation.kind) {
      case BufferAllocation::Kind::kParameter: {
        auto it = argument_of_.find({allocation.parameter_number, allocation.parameter_index});
        if (it == argument_of_.end()) {
          return Error(fmt::format("allocation {} belongs to parameter {} {{{}}}, which has no "
                                   "argument (a buffer assignment bug)", allocation.index,
                                   allocation.parameter_number,
                                   fmt::join(allocation.parameter_index, ",")));
        }
        home.kind = Home::Kind::kArgument;
        home.index = it->second;
        continue;
      }
      case BufferAllocation::Kind::kConstant: {
        // The weights: the constants' bytes in the buffers' layouts, in read-only data.
        std::string bytes(static_cast<size_t>(allocation.size), '\0');
        for (const BufferAllocation::Assigned& assigned : allocation.assigned) {
          const HloInstruction* hlo = buffer_by_id.at(assigned.buffer)->instruction;
          if (hlo->opcode() != HloOpcode::kConstant) continue;
          if (hlo->literal().is_elided() || hlo->literal().is_text_only()) {
            return Error(fmt::format("{}: the constant has no value in the text (elided), and "
                                     "its value is what the object would carry", hlo->name()));
          }
          runtime::CopyToLayout(hlo->literal().untyped_data(), hlo->shape(),
                                bytes.data() + assigned.offset);
        }
        llvm::Constant* data = llvm::ConstantDataArray::getRaw(
            bytes, bytes.size(), llvm::Type::getInt8Ty(*context_));
        auto* global = new llvm::GlobalVariable(
            *llvm_module_, data->getType(), true, llvm::GlobalValue::InternalLinkage, data,
            fmt::format("weights.{}", allocation.index));
        global->setAlignment(llvm::Align(kAlignment));
        home.kind = Home::Kind::kConstant;
        home.constant = global;
        continue;
      }
      case BufferAllocation::Kind::kOutput: {
        auto it = results_in_allocation.find(allocation.index);
        if (it != results_in_allocation.end() && it->second.size() == 1) {
          const int64_t j = it->second.front();
          if (result_slices[j].offset == 0 && allocation.size <= result_.results[j].byte_size) {
            home.kind = Home::Kind::kResult;
            home.index = j;
            result_in_place_[j] = true;
            continue;
          }
        }
        break;
      }
      case BufferAllocation::Kind::kTemp:
        break;
    }
    home.kind = Home::Kind::kTemp;
    home.offset = temp_bytes_;
    temp_bytes_ += Aligned(allocation.size);
  }
  return OkStatus();
}


StatusOr<Place> AotBuilder::EntryPlace(llvm::IRBuilder<>& b, const HloInstruction& hlo,
                                       const std::vector<int64_t>& index) {
  ASSIGN_OR_RETURN(BufferSlice slice, assignment_->GetSlice(hlo, index));
  const Home& home = homes_.at(slice.allocation);
  llvm::Value* base = nullptr;
  int64_t offset = slice.offset;
  switch (home.kind) {
    case Home::Kind::kArgument: base = argument_ptrs_.at(home.index); break;
    case Home::Kind::kResult: base = result_ptrs_.at(home.index); break;
    case Home::Kind::kConstant: base = home.constant; break;
    case Home::Kind::kTemp:
      base = temp_;
      offset += home.offset;
      break;
  }
  return Place{base, offset,
               offset == 0 ? base : b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), base, offset)};
}

llvm::GlobalVariable* AotBuilder::ConstantGlobal(const HloInstruction& constant) {
  auto it = constants_.find(&constant);
  if (it != constants_.end()) return it->second;
  std::string bytes(static_cast<size_t>(shape_util::ByteSizeOf(constant.shape())), '\0');
  runtime::CopyToLayout(constant.literal().untyped_data(), constant.shape(), bytes.data());
  llvm::Constant* data =
      llvm::ConstantDataArray::getRaw(bytes, bytes.size(), llvm::Type::getInt8Ty(*context_));
  auto* global = new llvm::GlobalVariable(*llvm_module_, data->getType(), true,
                                          llvm::GlobalValue::InternalLinkage, data,
                                          "weights." + codegen::SanitizeName(constant.name()));
  global->setAlignment(llvm::Align(kAlignment));
  constants_[&constant] = global;
  return global;
}

Status AotBuilder::PlanNested(const HloComputation& computation) {
  if (nested_.count(&computation)) return OkStatus();
  NestedLayout layout;
  for (const HloInstruction* p : computation.parameter_instructions()) {
    for (const auto& [index, size] : ArrayLeaves(p->shape())) {
      layout.parameter_leaf[{p, index}] = static_cast<int64_t>(layout.parameter_leaf.size());
    }
  }
  auto order = computation.MakeInstructionPostOrder();
  for (const HloInstruction* hlo : order) {
    if (hlo->opcode() == HloOpcode::kParameter) continue;
    for (const auto& [index, size] : ArrayLeaves(hlo->shape())) {
      if (runtime::DefiningLeaf(hlo, index) != Leaf{hlo, index}) continue;  // an alias
      if (hlo->opcode() == HloOpcode::kConstant) {
        if (hlo->literal().is_elided() || hlo->literal().is_text_only()) {
          return Error(fmt::format("{}: the constant has no value in the text (elided), and its "
                                   "value is what the object would carry", hlo->name()));
        }
        ConstantGlobal(*hlo);
        continue;
      }
      layout.offsets[{hlo, index}] = temp_bytes_;
      temp_bytes_ += Aligned(size);
    }
  }
  // A while body's results are staged before they become the next state: one may be another
  // element of the state (a swap).
  for (const auto& [index, size] : ArrayLeaves(computation.root_instruction()->shape())) {
    layout.staging.push_back(temp_bytes_);
    temp_bytes_ += Aligned(size);
  }
  nested_[&computation] = std::move(layout);
  return EmitKernels({order.begin(), order.end()});
}

Status AotBuilder::EmitKernels(const std::vector<const HloInstruction*>& order) {
  for (const HloInstruction* hlo : order) {
    if (std::string why = WhyNotAheadOfTime(*hlo); !why.empty()) return Refuse(*hlo, why);
    switch (hlo->opcode()) {
      case HloOpcode::kWhile:
        RETURN_IF_ERROR(PlanNested(*hlo->while_condition()));
        RETURN_IF_ERROR(PlanNested(*hlo->while_body()));
        continue;
      case HloOpcode::kConditional:
        for (const HloComputation* branch : hlo->branch_computations()) {
          RETURN_IF_ERROR(PlanNested(*branch));
        }
        continue;
      case HloOpcode::kCall:
        return Refuse(*hlo, "calls a computation the inliner left, which is not generated yet");
      case HloOpcode::kSort: {
        if (std::string why = WhyNotGeneratedSort(*hlo); !why.empty()) return Refuse(*hlo, why);
        ASSIGN_OR_RETURN(const std::string name,
                         codegen::EmitSortComparator(*hlo, symbols_, *llvm_module_));
        comparators_[hlo] = name;
        hlo_of_function_[name] = hlo->name();
        continue;
      }
      default:
        break;
    }
    if (!codegen::IsKernelInstruction(*hlo)) continue;  // parameters, constants, aliases
    const std::string name = codegen::UniqueKernelName(hlo->name(), symbols_);
    // Dots and convolutions the JIT gives Eigen get loop nests of their own (dot_emitter.h,
    // convolution_emitter.h).
    auto spec = runtime::IsEigenDot(*hlo) ? EmitRowMajorDot(*hlo, name, *llvm_module_)
                : runtime::IsEigenConvolution(*hlo)
                    ? EmitCanonicalConvolution(*hlo, name, *llvm_module_)
                    : codegen::EmitKernel(*hlo, name, *llvm_module_);
    if (!spec.ok()) return spec.status().WithContext(hlo->name());
    for (const codegen::KernelPhase& phase : spec->phases) {
      hlo_of_function_[phase.function_name] = hlo->name();
    }
    scratch_bytes_ = std::max(scratch_bytes_, spec->scratch_bytes);
    kernels_[hlo] = std::move(*spec);
  }
  return OkStatus();
}

Frame AotBuilder::NestedFrame(const HloComputation& computation, std::vector<Place> parameters) const {
  return Frame{&computation, &nested_.at(&computation), std::move(parameters)};
}

StatusOr<Place> AotBuilder::PlaceOf(llvm::IRBuilder<>& b, const Frame& frame,
                                    const HloInstruction& hlo, const std::vector<int64_t>& index) {
  if (frame.layout == nullptr) return EntryPlace(b, hlo, index);
  const auto [source, source_index] = runtime::DefiningLeaf(&hlo, index);
  if (source->opcode() == HloOpcode::kParameter) {
    auto it = frame.layout->parameter_leaf.find({source, source_index});
    if (it == frame.layout->parameter_leaf.end() ||
        it->second >= static_cast<int64_t>(frame.parameters.size())) {
      return Error(fmt::format("{}: a parameter leaf has no place", hlo.name()));
    }
    return frame.parameters[it->second];
  }
  if (source->opcode() == HloOpcode::kConstant) {
    llvm::GlobalVariable* global = constants_.at(source);
    return Place{global, 0, global};
  }
  auto it = frame.layout->offsets.find({source, source_index});
  if (it == frame.layout->offsets.end()) {
    return Error(fmt::format("{}: the value has no buffer in {}", hlo.name(),
                             frame.computation->name()));
  }
  return Place{temp_, it->second, b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), temp_, it->second)};
}

StatusOr<std::vector<Place>> AotBuilder::LeafPlaces(llvm::IRBuilder<>& b, const Frame& frame,
                                                    const HloInstruction& hlo) {
  std::vector<Place> places;
  for (const auto& [index, size] : ArrayLeaves(hlo.shape())) {
    ASSIGN_OR_RETURN(Place place, PlaceOf(b, frame, hlo, index));
    places.push_back(place);
  }
  return places;
}

void AotBuilder::Copy(llvm::IRBuilder<>& b, const Place& to, const Place& from, int64_t bytes) {
  if (to == from || bytes == 0) return;
  b.CreateMemMove(to.pointer, llvm::MaybeAlign(1), from.pointer, llvm::MaybeAlign(1), bytes);
}

Status AotBuilder::EmitKernelCall(llvm::IRBuilder<>& b, const Frame& frame,
                                  const HloInstruction& hlo) {
  const codegen::KernelSpec& spec = kernels_.at(&hlo);
  std::vector<llvm::Value*> pointers;
  for (const HloInstruction* operand : hlo.operands()) {
    ASSIGN_OR_RETURN(std::vector<Place> places, LeafPlaces(b, frame, *operand));
    for (const Place& p : places) pointers.push_back(p.pointer);
  }
  ASSIGN_OR_RETURN(std::vector<Place> outputs, LeafPlaces(b, frame, hlo));
  for (const Place& p : outputs) pointers.push_back(p.pointer);
  if (static_cast<int64_t>(pointers.size()) != spec.operand_leaves + spec.output_leaves) {
    return Error(fmt::format("{}: the kernel takes {} buffers but the instruction has {} (a code "
                             "generation bug)", hlo.name(),
                             spec.operand_leaves + spec.output_leaves, pointers.size()));
  }
  pointers.push_back(scratch_);
  llvm::Type* ptr = b.getPtrTy();
  auto* table_type = llvm::ArrayType::get(ptr, pointers.size());
  // In the first block, so that a kernel inside a loop does not grow the stack at every step.
  llvm::Value* table = allocas_->CreateAlloca(table_type, nullptr,
                                              codegen::SanitizeName(hlo.name()) + "_buffers");
  for (size_t i = 0; i < pointers.size(); ++i) {
    b.CreateStore(pointers[i], b.CreateConstInBoundsGEP2_64(table_type, table, 0, i));
  }
  // Phase after phase over all its tasks (the JIT's runtime splits the tasks over threads; here
  // one call does them all).
  for (const codegen::KernelPhase& phase : spec.phases) {
    llvm::Function* fn = llvm_module_->getFunction(phase.function_name);
    if (fn == nullptr) return Error(fmt::format("{}: kernel {} was not emitted", hlo.name(), phase.function_name));
    b.CreateCall(fn, {table, b.getInt64(0), b.getInt64(phase.tasks)});
  }
  return OkStatus();
}

Status AotBuilder::EmitSequence(llvm::IRBuilder<>& b, const Frame& frame,
                                const std::vector<const HloInstruction*>& order) {
  for (const HloInstruction* hlo : order) {
    switch (hlo->opcode()) {
      case HloOpcode::kWhile:
        RETURN_IF_ERROR(EmitWhile(b, frame, *hlo));
        continue;
      case HloOpcode::kConditional:
        RETURN_IF_ERROR(EmitConditional(b, frame, *hlo));
        continue;
      case HloOpcode::kSort:
        RETURN_IF_ERROR(EmitSort(b, frame, *hlo));
        continue;
      default:
        break;
    }
    if (kernels_.count(hlo)) RETURN_IF_ERROR(EmitKernelCall(b, frame, *hlo));
  }
  return OkStatus();
}

Status AotBuilder::EmitEntry() {
  llvm::LLVMContext& c = *context_;
  llvm::Type* ptr = llvm::PointerType::get(c, 0);
  auto* type = llvm::FunctionType::get(llvm::Type::getVoidTy(c), {ptr, ptr, ptr}, false);
  if (llvm_module_->getFunction(options_.entry_point) != nullptr) {
    return Error(fmt::format("--entry_point: '{}' is also the name of a generated kernel; choose "
                             "another", options_.entry_point));
  }
  llvm::Function* entry = llvm::Function::Create(type, llvm::Function::ExternalLinkage,
                                                  options_.entry_point, *llvm_module_);
  entry->addFnAttr(llvm::Attribute::NoUnwind);
  for (unsigned i = 0; i < 3; ++i) entry->addParamAttr(i, llvm::Attribute::NoAlias);
  entry->getArg(0)->setName("args");
  entry->getArg(1)->setName("results");
  entry->getArg(2)->setName("temp");
  auto* first = llvm::BasicBlock::Create(c, "entry", entry);
  auto* start = llvm::BasicBlock::Create(c, "start", entry);
  llvm::IRBuilder<> allocas(first);
  allocas.SetInsertPoint(allocas.CreateBr(start));
  allocas_ = &allocas;
  llvm::IRBuilder<> b(start);
  for (size_t i = 0; i < result_.arguments.size(); ++i) {
    argument_ptrs_.push_back(b.CreateLoad(
        ptr, b.CreateConstInBoundsGEP1_64(ptr, entry->getArg(0), i), fmt::format("arg{}", i)));
  }
  for (size_t j = 0; j < result_.results.size(); ++j) {
    result_ptrs_.push_back(b.CreateLoad(
        ptr, b.CreateConstInBoundsGEP1_64(ptr, entry->getArg(1), j), fmt::format("result{}", j)));
  }
  temp_ = entry->getArg(2);
  scratch_ = b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), temp_, scratch_offset_, "scratch");

  // The entry's instructions in the schedule's order.
  RETURN_IF_ERROR(EmitSequence(b, Frame{module_.entry_computation(), nullptr, {}},
                               assignment_->schedule()));

  // Results computed elsewhere (an argument passed through, a constant, a shared buffer).
  for (size_t j = 0; j < result_leaves_.size(); ++j) {
    if (result_in_place_[j] || result_.results[j].byte_size == 0) continue;
    ASSIGN_OR_RETURN(Place source, EntryPlace(b, *result_leaves_[j].first, result_leaves_[j].second));
    b.CreateMemCpy(result_ptrs_[j], llvm::MaybeAlign(1), source.pointer, llvm::MaybeAlign(1),
                   result_.results[j].byte_size);
  }
  b.CreateRetVoid();
  allocas_ = nullptr;
  return OkStatus();
}

Status AotBuilder::CheckCallsOnlyLibraries() const {
  for (const llvm::Function& f : *llvm_module_) {
    if (!f.isDeclaration() || f.isIntrinsic() || IsLibcOrLibmFunction(f.getName().str())) continue;
    std::string where = "a kernel";
    for (const llvm::User* user : f.users()) {
      const auto* call = llvm::dyn_cast<llvm::Instruction>(user);
      if (call == nullptr) continue;
      auto it = hlo_of_function_.find(call->getFunction()->getName().str());
      if (it != hlo_of_function_.end()) {
        where = it->second;
        break;
      }
    }
    return Error(fmt::format("{}: its generated code calls {}, which lives in the xlens runtime "
                             "(integer power, complex arithmetic), not in libc or libm; an "
                             "ahead-of-time object may call only those",
                             where, f.getName().str()));
  }
  return OkStatus();
}

StatusOr<AotResult> AotBuilder::Build() {
  RETURN_IF_ERROR(CheckEntryPoint(options_.entry_point));
  ASSIGN_OR_RETURN(std::unique_ptr<llvm::TargetMachine> machine,
                   CreateTargetMachine({options_.target_triple, options_.target_cpu,
                                        options_.target_features, options_.opt_level}));
  result_.target_triple = machine->getTargetTriple().str();

  RETURN_IF_ERROR(RemoveAnnotationCustomCalls(module_).status());
  RETURN_IF_ERROR(MakeInterfaceRowMajor(module_).status());
  for (const HloComputation* computation : module_.computations()) {
    for (const HloInstruction* hlo : computation->instructions()) {
      if (std::string why = WhyNotAheadOfTime(*hlo); !why.empty()) return Refuse(*hlo, why);
    }
  }
  if (HasDynamicShapes(module_)) {
    return Error("the module has dynamic shapes; an ahead-of-time object's buffers are sized at "
                 "compile time");
  }
  OptimizeOptions optimize = options_.optimize;
  optimize.backend = Backend::kCpu;
  optimize.end_dump_module = false;
  // Dots and convolutions stay HLO and become generated loops, not oneDNN calls the program
  // would have to link.
  optimize.filter.disabled.insert("onednn-rewriter");
  ASSIGN_OR_RETURN(OptimizeResult optimized, OptimizeHloModule(module_, optimize));
  if (!optimized.buffers) return Error("buffer assignment did not run");
  assignment_ = &*optimized.buffers;

  llvm_module_ = std::make_unique<llvm::Module>(module_.name(), *context_);
  // The triple before any kernel: the emitters choose inline transcendentals by it.
  llvm_module_->setTargetTriple(result_.target_triple);
  llvm_module_->setDataLayout(machine->createDataLayout());
  // Integer powers and complex functions inline (and through libm), not the runtime's calls.
  llvm_module_->addModuleFlag(llvm::Module::Warning, codegen::kNoRuntimeFlag, 1);
  RETURN_IF_ERROR(PlaceAllocations());

  symbols_.insert(options_.entry_point);
  RETURN_IF_ERROR(EmitKernels(assignment_->schedule()));
  scratch_offset_ = temp_bytes_;
  temp_bytes_ += Aligned(scratch_bytes_);
  RETURN_IF_ERROR(CheckCallsOnlyLibraries());
  RETURN_IF_ERROR(EmitEntry());

  // Only the entry function is exported: the kernels are internal, so that LLVM may inline them
  // into it and two objects linked into one program never clash.
  const std::string cpu = machine->getTargetCPU().str();
  const std::string features = machine->getTargetFeatureString().str();
  for (llvm::Function& f : *llvm_module_) {
    if (f.isDeclaration()) continue;
    if (f.getName() != options_.entry_point) f.setLinkage(llvm::GlobalValue::InternalLinkage);
    f.addFnAttr("target-cpu", cpu);
    if (!features.empty()) f.addFnAttr("target-features", features);
  }
  std::string verify_errors;
  llvm::raw_string_ostream verify_os(verify_errors);
  if (llvm::verifyModule(*llvm_module_, &verify_os)) {
    return Error("generated LLVM IR is invalid (a code generation bug): " + verify_errors);
  }
  DumpContext* dump = options_.optimize.dump;
  const bool dumping = dump != nullptr && dump->IsDumped(module_);
  std::vector<std::string> ir_files;
  if (dumping) ir_files.push_back(dump->DumpText(module_, "ir-no-opt.ll", PrintText(*llvm_module_)));
  OptimizeForTarget(*llvm_module_, *machine, options_.opt_level);
  if (dumping) {
    ir_files.push_back(dump->DumpText(module_, "ir-with-opt.ll", PrintText(*llvm_module_)));
    // Every kernel in the manifest, as the JIT records it (merged there with what the pipeline
    // recorded for the same instruction: op_names, the pass that made the fusion).
    std::erase(ir_files, std::string());
    for (const auto& [hlo, spec] : kernels_) {
      ManifestKernel kernel;
      kernel.name = spec.phases.empty() ? spec.name : spec.phases.front().function_name;
      kernel.hlo_instruction = hlo->name();
      if (hlo->opcode() == HloOpcode::kFusion && hlo->fusion_kind) {
        kernel.fusion_kind = std::string(FusionKindString(*hlo->fusion_kind));
      }
      kernel.launch = fmt::format("{} phase{}, each called once over all its tasks (ahead of time)",
                                  spec.phases.size(), spec.phases.size() == 1 ? "" : "s");
      kernel.files = ir_files;
      dump->RecordKernel(module_, std::move(kernel));
    }
  }
  // Weights: every constant the object carries (the entry's and those fused into kernels), as
  // they are after optimization.
  const llvm::DataLayout& layout = llvm_module_->getDataLayout();
  for (const llvm::GlobalVariable& global : llvm_module_->globals()) {
    if (global.isConstant() && global.hasInitializer()) {
      result_.weights_bytes += static_cast<int64_t>(layout.getTypeAllocSize(global.getValueType()));
    }
  }
  ASSIGN_OR_RETURN(result_.object, EmitObject(*llvm_module_, *machine));
  if (dump != nullptr) dump->EndModule(module_);
  result_.temp_bytes = temp_bytes_;
  result_.temp_alignment = kAlignment;
  result_.kernel_count = static_cast<int>(kernels_.size());
  return std::move(result_);
}

StatusOr<AotResult> CompileAheadOfTime(const HloModule& module, const AotOptions& options) {
  // The passes rewrite the module: they run on a copy, and the caller's stays as it was.
  ASSIGN_OR_RETURN(std::unique_ptr<HloModule> copy,
                   ParseHloModule(PrintModule(module), ParseOptions{.verify = true}));
  AotBuilder builder(*copy, options);
  return builder.Build();
}

}  // namespace xlens::aot
