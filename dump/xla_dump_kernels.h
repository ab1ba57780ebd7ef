// The kernels of a module as XLA compiled it, from its after_optimizations HLO: what a dump
// without a manifest says of them. A kernel is an instruction that runs (a fusion, a custom call,
// a dot, a while loop, ...) in the entry computation or in a computation a control-flow
// instruction there runs (while bodies, conditional branches, calls), never a fused
// computation's inside. Each carries its op_name (and the op_names inside a fusion) and where it
// came from: its stack_frame_id resolved through the module's stack-frame table, else
// source_file/source_line; for a fusion without either, the first instruction inside that has one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "compiler/support/status.h"
#include "dump/dump_directory.h"

namespace xlens {

// Parses `hlo_text` (`file_name` names it in errors) and lists its kernels in program order.
StatusOr<std::vector<DerivedKernel>> DeriveKernelsFromHlo(std::string_view hlo_text, const std::string& file_name);

}  // namespace xlens
