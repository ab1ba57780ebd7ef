// XLA's maximum and minimum of floats on vectors, as AVX-512DQ's range instruction.
//
// HLO's maximum and minimum propagate NaN and order -0 below +0 (IEEE 754-2019's maximum and
// minimum, llvm.maximum and llvm.minimum). x86 has no such instruction before AVX10.2: LLVM 19
// lowers a vector llvm.maximum to six (a sign test, two blends for the signed zeros, the max,
// an unordered compare and a blend for NaN), which made the eight-op chain of
// tests/bench/codegen_vs_xla.py (two of them among eight ops) 1.6x slower in the cache than the
// same chain with additions in their place. vrangeps/pd with imm8 5 (4) takes the larger
// (smaller) of two values with -0 below +0 in one instruction, but returns the other operand
// where one is a quiet NaN; an unordered compare and a masked add (x + y is a NaN where either
// is) put the NaN back: three instructions, the same result for every pair of values
// (tests/codegen/x86_range_min_max_test.cc checks them against the evaluator). The eight-op
// chain over f32[262144] (in L2) on this 2-CPU Sapphire Rapids VM, xlens run, 12 alternating
// rounds of 300 runs at load 6-7: best 0.027 -> 0.017 ms, lowest median 0.036 -> 0.026; over
// f32[16777216], from memory, its kernel's IR in a two-thread C driver gained 2-8% (bests).
#pragma once

#include <llvm/IR/Module.h>

namespace xlens::codegen::cpu {

// Rewrites every llvm.maximum and llvm.minimum of <16 x float> and <8 x double> in the functions
// of `module` whose target features have AVX-512DQ, and of 128- and 256-bit vectors where they
// have AVX-512VL as well, into the range instruction and its NaN fix-up. Run after the loop
// vectorizer has made the vectors (scalar ones are left to LLVM). Returns whether it changed any.
bool LowerVectorMinMaxToRange(llvm::Module& module);

}  // namespace xlens::codegen::cpu
