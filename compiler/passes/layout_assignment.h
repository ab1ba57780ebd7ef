// layout-assignment: gives every array value a layout (minor-to-major order) chosen for the
// backend, and inserts copies where a value's layout differs from what a user requires.
//
// Constraints it honours:
//  - the entry's parameters and result take the layouts of module.entry_computation_layout() when
//    the header has one, else the layouts written on the entry's parameters and root;
//  - the interfaces (parameters and root) of every other non-fused computation (while bodies,
//    branches, reducers, called computations) keep their layouts, and their callers conform to
//    them;
//  - dot wants row-major operands and result; convolution wants b01f input and output and 01io
//    kernel in physical order (what the CPU's Eigen kernels take; the GPU rules are the same
//    for now, cuBLAS and cuDNN both accept them);
//  - a bitcast is a reinterpretation of bytes, so its operand and result keep the layouts they
//    had (a copy feeds it when the operand's layout changes), and so do opaque instructions
//    (custom-calls, collectives, sort, ...).
// Everything else gets a layout chosen for it: preferences flow back from users (so an
// elementwise chain ends in the layout the root wants without copies) and forward from operands
// (elementwise ops take their operands' layout; a transpose with no preference gets the layout
// that makes it a bitcast). Fused computations get the layouts of their fusion's operands and
// result. Reports a change when an instruction's minor-to-major order changed or a copy was
// inserted; layout suffixes (tiles, memory space) are kept where the order does not change.
#pragma once

#include "compiler/passes/hlo_pass.h"

namespace xlens {

enum class LayoutBackend { kCpu, kGpu };

class LayoutAssignment : public HloPass {
 public:
  explicit LayoutAssignment(LayoutBackend backend = LayoutBackend::kCpu) : backend_(backend) {}
  std::string_view name() const override { return "layout-assignment"; }
  StatusOr<bool> Run(HloModule& module) override;

  LayoutBackend backend() const { return backend_; }

 private:
  LayoutBackend backend_;
};

// Whether two shapes agree on every array's minor-to-major order (suffixes ignored); shapes
// without a layout agree only with shapes without one.
bool SameLayouts(const Shape& a, const Shape& b);

}  // namespace xlens
