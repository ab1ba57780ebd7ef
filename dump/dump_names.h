// Dump file names, exactly as XLA's xla/service/dump.cc makes them, so scripts written for XLA
// dumps work on ours:
//
//   [TIMESTAMP.]module_0001.NAME.SUFFIX
//
// where the module name is dropped when the whole name would pass 255 characters (a file system
// limit). Whole-module dumps carry the timestamp when --xla_dump_include_timestamp is on; the
// other files (LLVM IR, PTX, thunks) do not, as in XLA.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace xlens {

// The longest file name most file systems take.
inline constexpr size_t kMaxDumpFileNameLength = 255;

inline constexpr std::string_view kBeforeOptimizations = "before_optimizations";
inline constexpr std::string_view kAfterOptimizations = "after_optimizations";
// The pseudo pass names around a pipeline's passes in between-pass dumps.
inline constexpr std::string_view kPipelineStart = "pipeline-start";
inline constexpr std::string_view kPipelineEnd = "pipeline-end";

// "[prefix.]module_%04d[.module_name].suffix"; the module name is left out when the name would be
// longer than 255 characters. `prefix` is the timestamp or empty. The result is sanitized.
std::string DumpFileName(int64_t module_id, std::string_view module_name, std::string_view prefix,
                         std::string_view suffix);

// XLA's SanitizeFileName: '/', '\\', '[', ']' and ' ' become '_'.
std::string SanitizeFileName(std::string name);

// "cpu_after_optimizations".
std::string CpuAfterOptimizationsName();
// "sm_9.0_gpu_after_optimizations" for compute capability 9.0.
std::string GpuAfterOptimizationsName(int major, int minor);

// "0004.PIPELINE.after_PASS.before_NEXT", the name of a between-pass dump (step is per module).
std::string PassBoundaryName(int64_t step, std::string_view pipeline, std::string_view after_pass,
                             std::string_view before_pass);

// "NAME-buffer-assignment.txt" beside the module dumped as NAME ("cpu_after_optimizations").
std::string BufferAssignmentSuffix(std::string_view dump_name);
// "ir-no-opt.ll" / "ir-with-opt.ll"; a non-empty `kernel` gives "ir-no-opt.KERNEL.ll".
std::string LlvmIrSuffix(bool optimized, std::string_view kernel = "");
inline constexpr std::string_view kPtxSuffix = "ptx";
inline constexpr std::string_view kThunkSequenceSuffix = "thunk_sequence.txt";

// XLA's timestamp prefix: microseconds since the Unix epoch, as decimal.
std::string TimestampPrefix(int64_t micros_since_epoch);

// The module id in a dump file name ("module_0012.foo.txt" and "1700000000.module_0012.x" give
// 12), or -1 when the name is not one.
int64_t ModuleIdFromFileName(std::string_view file_name);

}  // namespace xlens
