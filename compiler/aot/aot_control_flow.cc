// The entry function's control flow and sorts (aot_builder.h): a while loop as a loop over its
// condition's and body's code, a conditional as a switch over its branches' code, each called
// computation's values in its own region of temp.
#include <algorithm>

#include <fmt/format.h>

#include "compiler/aot/aot_builder.h"
#include "compiler/aot/sort_emitter.h"

namespace xlens::aot {

Status AotBuilder::EmitWhile(llvm::IRBuilder<>& b, const Frame& frame, const HloInstruction& hlo) {
  ASSIGN_OR_RETURN(std::vector<Place> state, LeafPlaces(b, frame, hlo));
  ASSIGN_OR_RETURN(std::vector<Place> init, LeafPlaces(b, frame, *hlo.operand(0)));
  const auto leaves = ArrayLeaves(hlo.shape());
  for (size_t i = 0; i < state.size(); ++i) Copy(b, state[i], init[i], leaves[i].second);
  llvm::Function* f = b.GetInsertBlock()->getParent();
  llvm::LLVMContext& c = *context_;
  const std::string name = codegen::SanitizeName(hlo.name());
  auto* cond_block = llvm::BasicBlock::Create(c, name + ".condition", f);
  auto* body_block = llvm::BasicBlock::Create(c, name + ".body", f);
  auto* exit_block = llvm::BasicBlock::Create(c, name + ".exit", f);
  b.CreateBr(cond_block);

  b.SetInsertPoint(cond_block);
  const HloComputation& condition = *hlo.while_condition();
  const Frame cond_frame = NestedFrame(condition, state);
  auto cond_order = condition.MakeInstructionPostOrder();
  RETURN_IF_ERROR(EmitSequence(b, cond_frame, {cond_order.begin(), cond_order.end()}));
  ASSIGN_OR_RETURN(Place predicate, PlaceOf(b, cond_frame, *condition.root_instruction(), {}));
  llvm::Value* go_on = b.CreateICmpNE(b.CreateLoad(b.getInt8Ty(), predicate.pointer), b.getInt8(0));
  b.CreateCondBr(go_on, body_block, exit_block);

  b.SetInsertPoint(body_block);
  const HloComputation& body = *hlo.while_body();
  const Frame body_frame = NestedFrame(body, state);
  auto body_order = body.MakeInstructionPostOrder();
  RETURN_IF_ERROR(EmitSequence(b, body_frame, {body_order.begin(), body_order.end()}));
  ASSIGN_OR_RETURN(std::vector<Place> next, LeafPlaces(b, body_frame, *body.root_instruction()));
  // A result that is another element of the state is staged first; the others (the body's own
  // values) are copied straight in.
  const NestedLayout& layout = nested_.at(&body);
  std::vector<std::pair<size_t, Place>> staged;
  for (size_t i = 0; i < next.size(); ++i) {
    if (next[i] == state[i]) continue;
    if (std::find(state.begin(), state.end(), next[i]) == state.end()) continue;
    const int64_t offset = layout.staging.at(i);
    Place stage{temp_, offset, b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), temp_, offset)};
    Copy(b, stage, next[i], leaves[i].second);
    staged.push_back({i, stage});
  }
  for (size_t i = 0; i < next.size(); ++i) {
    if (std::find(state.begin(), state.end(), next[i]) == state.end()) {
      Copy(b, state[i], next[i], leaves[i].second);
    }
  }
  for (const auto& [i, stage] : staged) Copy(b, state[i], stage, leaves[i].second);
  b.CreateBr(cond_block);
  b.SetInsertPoint(exit_block);
  return OkStatus();
}

Status AotBuilder::EmitConditional(llvm::IRBuilder<>& b, const Frame& frame,
                                   const HloInstruction& hlo) {
  const std::vector<HloComputation*> branches = hlo.branch_computations();
  ASSIGN_OR_RETURN(Place selector, PlaceOf(b, frame, *hlo.operand(0), {}));
  ASSIGN_OR_RETURN(std::vector<Place> outputs, LeafPlaces(b, frame, hlo));
  const auto leaves = ArrayLeaves(hlo.shape());
  llvm::Value* branch_index;
  if (hlo.operand(0)->shape().element_type() == PrimitiveType::PRED) {
    // true runs the first computation, false the second.
    llvm::Value* predicate = b.CreateICmpNE(b.CreateLoad(b.getInt8Ty(), selector.pointer), b.getInt8(0));
    branch_index = b.CreateSelect(predicate, b.getInt32(0), b.getInt32(1));
  } else {
    branch_index = b.CreateLoad(b.getInt32Ty(), selector.pointer);
  }
  llvm::Function* f = b.GetInsertBlock()->getParent();
  const std::string name = codegen::SanitizeName(hlo.name());
  auto* merge = llvm::BasicBlock::Create(*context_, name + ".done", f);
  std::vector<llvm::BasicBlock*> blocks;
  for (size_t i = 0; i < branches.size(); ++i) {
    blocks.push_back(llvm::BasicBlock::Create(*context_, fmt::format("{}.branch{}", name, i), f));
  }
  // An index out of range runs the last branch, as XLA does.
  llvm::SwitchInst* dispatch = b.CreateSwitch(branch_index, blocks.back(), branches.size());
  for (size_t i = 0; i + 1 < branches.size(); ++i) dispatch->addCase(b.getInt32(i), blocks[i]);
  for (size_t i = 0; i < branches.size(); ++i) {
    b.SetInsertPoint(blocks[i]);
    ASSIGN_OR_RETURN(std::vector<Place> arguments, LeafPlaces(b, frame, *hlo.operand(i + 1)));
    const Frame branch_frame = NestedFrame(*branches[i], arguments);
    auto order = branches[i]->MakeInstructionPostOrder();
    RETURN_IF_ERROR(EmitSequence(b, branch_frame, {order.begin(), order.end()}));
    ASSIGN_OR_RETURN(std::vector<Place> results,
                     LeafPlaces(b, branch_frame, *branches[i]->root_instruction()));
    for (size_t j = 0; j < results.size(); ++j) Copy(b, outputs[j], results[j], leaves[j].second);
    b.CreateBr(merge);
  }
  b.SetInsertPoint(merge);
  return OkStatus();
}

Status AotBuilder::EmitSort(llvm::IRBuilder<>& b, const Frame& frame, const HloInstruction& hlo) {
  ASSIGN_OR_RETURN(std::vector<Place> outputs, LeafPlaces(b, frame, hlo));
  std::vector<llvm::Value*> pointers;
  for (int64_t i = 0; i < hlo.operand_count(); ++i) {
    ASSIGN_OR_RETURN(Place operand, PlaceOf(b, frame, *hlo.operand(i), {}));
    Copy(b, outputs.at(i), operand, shape_util::ByteSizeOf(hlo.operand(i)->shape()));
    pointers.push_back(outputs[i].pointer);
  }
  EmitInsertionSort(b, *allocas_, hlo, llvm_module_->getFunction(comparators_.at(&hlo)), pointers);
  return OkStatus();
}

}  // namespace xlens::aot
