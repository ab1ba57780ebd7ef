// Small LLVM IR helpers every emitter shares: how each HLO element type is held in IR (as a
// value and in memory), the f16/bf16 <-> f32 conversions, and counted loops.
#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include <llvm/IR/IRBuilder.h>

#include "compiler/hlo/primitive_type.h"
#include "compiler/support/status.h"

namespace xlens::codegen {

// The IR type of one element as a value: pred is i1, integers iN, f16 half, bf16 its i16 bits
// (arithmetic happens in f32), f32 float, f64 double, c64 {float, float}, c128 {double, double}.
// Errors for types the compiler does not compute with (F8, sub-byte integers, tokens).
StatusOr<llvm::Type*> ValueType(PrimitiveType type, llvm::LLVMContext& context);
// The IR type of one element in memory: as ValueType, but pred is a byte.
StatusOr<llvm::Type*> StorageType(PrimitiveType type, llvm::LLVMContext& context);
// Whether the compiler can compute with `type`.
bool IsCodegenSupportedType(PrimitiveType type);

// Storage <-> value for one element (pred: byte != 0 / zext).
llvm::Value* StorageToValue(llvm::IRBuilder<>& b, PrimitiveType type, llvm::Value* stored);
llvm::Value* ValueToStorage(llvm::IRBuilder<>& b, PrimitiveType type, llvm::Value* value);

// Floating-point types compute in their ComputeType: f16, bf16 and the 8-bit floats in f32
// (rounded once per operation, as XLA's CPU backend does), f32 and f64 in themselves.
// ComputeToFloat also takes an f64 for an 8-bit float type, rounding it once, as XLA does.
llvm::Value* FloatToCompute(llvm::IRBuilder<>& b, PrimitiveType type, llvm::Value* value);
llvm::Value* ComputeToFloat(llvm::IRBuilder<>& b, PrimitiveType type, llvm::Value* value);
llvm::Type* FloatComputeType(PrimitiveType type, llvm::LLVMContext& context);

// Emits `for (i = start; i < end; ++i) body(i)` at the builder's insertion point and leaves the
// builder after the loop. `body` may emit blocks of its own.
// With `parallel_access_group`, the loop is marked llvm.loop.parallel_accesses over it: its
// iterations touch the group's memory independently.
Status EmitForLoop(llvm::IRBuilder<>& b, llvm::Value* start, llvm::Value* end,
                   std::string_view name, const std::function<Status(llvm::Value*)>& body,
                   llvm::MDNode* parallel_access_group = nullptr);

// One property of a loop for AddLoopHints: `name` with `value` (an i1 or i32 constant), or
// `name` alone where `value` is null ("llvm.loop.unroll.disable").
llvm::MDNode* LoopHint(llvm::LLVMContext& context, std::string_view name, llvm::Constant* value = nullptr);
// Adds `hints` to the llvm.loop metadata of the loop whose header is `header` (on each latch
// that has it, as EmitForLoop's loops do), keeping the properties it had.
void AddLoopHints(llvm::BasicBlock* header, const std::vector<llvm::Metadata*>& hints);

// An alloca in the function's entry block (so that mem2reg promotes it), initialised to `init`.
llvm::AllocaInst* EmitEntryAlloca(llvm::IRBuilder<>& b, llvm::Type* type, std::string_view name);

// The n x n block whose row j is `rows[j]` (n vectors of n lanes, n a power of two) transposed:
// lane i of result j is lane j of rows[i]. log2(n) stages, each swapping the off-diagonal s x s
// blocks of every 2s x 2s block with two shuffles per pair of rows (n log2(n) shuffles).
std::vector<llvm::Value*> EmitTransposeInRegisters(llvm::IRBuilder<>& b, std::vector<llvm::Value*> rows);

// Declares (or finds) `double name(double)`-style functions of the C library and runtime.
llvm::FunctionCallee DeclareFunction(llvm::Module& module, std::string_view name,
                                     llvm::Type* result, llvm::ArrayRef<llvm::Type*> params);

}  // namespace xlens::codegen
