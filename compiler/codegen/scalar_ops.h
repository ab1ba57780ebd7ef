// The scalar operations of HLO in LLVM IR, with XLA's semantics (the reference evaluator's):
// wrapping integers, x/0 == -1, NaN-propagating max/min, saturating float->int converts,
// f16/bf16 computed in f32 and rounded once per operation. Complex transcendental functions and
// integer powers call small runtime functions (cpu/runtime_symbols.cc) so that they round as the
// evaluator's std::complex code does.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <llvm/IR/IRBuilder.h>

#include "compiler/hlo/instruction.h"
#include "compiler/support/status.h"

namespace xlens::codegen {

// Whether `exp` is exp(a - broadcast(m)) with m at least the maximum of each row of a (softmax's
// and log-softmax's shift): its operand is <= 0 at every element, or NaN.
bool ExpOfShiftByMaximum(const HloInstruction& exp);

// The dimensions of `reduce`'s (first) operand that it keeps, in increasing order: those of its
// result, which a broadcast of it back to the operand's shape takes as its dimensions.
std::vector<int64_t> KeptDimensions(const HloInstruction& reduce);

// Operands and result are element values (see ValueType).
StatusOr<llvm::Value*> EmitUnaryOp(llvm::IRBuilder<>& b, const HloInstruction& hlo,
                                   llvm::Value* operand);
StatusOr<llvm::Value*> EmitBinaryOp(llvm::IRBuilder<>& b, const HloInstruction& hlo,
                                    llvm::Value* lhs, llvm::Value* rhs);
StatusOr<llvm::Value*> EmitBinaryOpcode(llvm::IRBuilder<>& b, HloOpcode opcode, PrimitiveType type,
                                        llvm::Value* lhs, llvm::Value* rhs);
StatusOr<llvm::Value*> EmitCompare(llvm::IRBuilder<>& b, PrimitiveType type,
                                   ComparisonDirection direction, ComparisonType comparison,
                                   llvm::Value* lhs, llvm::Value* rhs);
StatusOr<llvm::Value*> EmitConvert(llvm::IRBuilder<>& b, PrimitiveType from, PrimitiveType to,
                                   llvm::Value* value);
StatusOr<llvm::Value*> EmitBitcastConvert(llvm::IRBuilder<>& b, PrimitiveType from,
                                          PrimitiveType to, llvm::Value* value);
StatusOr<llvm::Value*> EmitReducePrecision(llvm::IRBuilder<>& b, PrimitiveType type,
                                           int64_t exponent_bits, int64_t mantissa_bits,
                                           llvm::Value* value);
// A constant element of a literal (pred as i1).
StatusOr<llvm::Value*> EmitLiteralElement(llvm::IRBuilder<>& b, const Literal& literal,
                                          int64_t linear_index);
// An integer value (i64) converted to an element of `type` (iota).
StatusOr<llvm::Value*> EmitFromInt64(llvm::IRBuilder<>& b, PrimitiveType type, llvm::Value* v);
// An index element of integer `type` (a dynamic-slice start, a gather or scatter index) as an
// i64 to clamp or bounds-check: signed types sign-extend, unsigned ones zero-extend, and a u64
// past INT64_MAX saturates there. Read as s64 it would turn negative: a start of 2^63 would clamp
// to 0 instead of to the end, and a scatter index would wrap. The evaluator reads them the same.
StatusOr<llvm::Value*> EmitIndexToInt64(llvm::IRBuilder<>& b, PrimitiveType type, llvm::Value* v);

// Functions that cost an elementwise loop tens of instructions an element (polynomials and their
// range reductions, fast_math.h), which the loops' launch and unrolling weigh. Not
// HloCostAnalysis's IsTranscendental, which is XLA's count of transcendentals and stays as XLA
// counts: sqrt and rsqrt, for one, are transcendentals there and a single instruction each in a
// loop here. Here, not in the CPU row loops, so that the generic kernel emitter prices its loops
// with the same list.
bool IsPolynomialTranscendental(HloOpcode op);

// Whether computing `values` per element computes a polynomial transcendental function: one
// they reach before a reduction, a parameter or an instruction for which `read` is true (a value
// read from memory or a register).
bool ReachesTranscendental(const std::vector<const HloInstruction*>& values,
                           const std::function<bool(const HloInstruction*)>& read);
// How many polynomial transcendental functions computing `values` per element computes (each
// instruction once, however many of the values read it), up to the same reductions, parameters
// and reads.
int64_t TranscendentalsPerElement(const std::vector<const HloInstruction*>& values,
                                  const std::function<bool(const HloInstruction*)>& read);

}  // namespace xlens::codegen
