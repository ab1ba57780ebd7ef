// reduce-precision-insertion: a numerics experiment switch. Inserts
// `reduce-precision(x), exponent_bits=E, mantissa_bits=M` after the output of every instruction
// whose opcode the configuration selects, so a model can be run as if those ops produced a
// narrower float type. Only f32, f16 and bf16 array outputs are rounded. Every user of the
// instruction (and the root, when it is one) uses the rounded value instead.
// Unconfigured (the default) it does nothing and reports no change. It leaves alone fusion
// computations, reduce-precision instructions themselves, and outputs already followed by exactly
// this rounding (so running it twice inserts nothing new). Reports a change when it inserted any.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>

#include "compiler/passes/hlo_pass.h"

namespace xlens {

class ReducePrecisionInsertion : public HloPass {
 public:
  using OpcodeFilter = std::function<bool(HloOpcode)>;

  // Not configured: the pass does nothing.
  ReducePrecisionInsertion() = default;
  // Rounds the outputs of instructions for which `filter` is true.
  ReducePrecisionInsertion(int64_t exponent_bits, int64_t mantissa_bits, OpcodeFilter filter);
  // Rounds the outputs of instructions with one of `opcodes`.
  ReducePrecisionInsertion(int64_t exponent_bits, int64_t mantissa_bits,
                           std::set<HloOpcode> opcodes);

  std::string_view name() const override { return "reduce-precision-insertion"; }
  StatusOr<bool> Run(HloModule& module) override;

 private:
  struct Config {
    int64_t exponent_bits = 0;
    int64_t mantissa_bits = 0;
    OpcodeFilter filter;
  };
  std::optional<Config> config_;
};

}  // namespace xlens
