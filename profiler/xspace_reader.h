// Reads an XSpace (*.xplane.pb): the protobuf that jax.profiler and tf.profiler.experimental
// write first, and the only file TensorFlow's profiler writes. Its messages are declared in
// proto/xplane.proto; this reader walks their wire format itself.
//
// Planes become processes (pid: the plane's place in the file, name: the plane's), lines become
// threads (tid: display_id, else id; name: display_name, else name), and every timed event a
// complete span handed to the same ChromeTraceVisitor the JSON reader feeds, so `xlens trace
// summary`, the viewer and everything else that reads a trace read both alike. An event starts
// at its line's timestamp_ns plus its offset_ps (ns since the Unix epoch; the base time is 0).
// Its name is its metadata's; its args are its stats and then its metadata's, by their stat
// names (a ref_value becomes the name it refers to; bytes are dropped), so `hlo_op`,
// `hlo_module`, `tf_op` and `correlation_id` are there for linking kernels to HLO. Events that
// carry `hlo_op` are kernels: "cpu_kernel" on a host plane, "kernel" (or "gpu_memcpy",
// "gpu_memset") on a device's stream lines; XLA's derived lines ("XLA Ops", "XLA Modules",
// "Steps") are categorised by their line, so nothing is counted twice. Events with the same
// correlation_id on a host and a device plane are bound as a flow.
//
// Memory: the file is mapped, not copied (at most MaxInputBytes(), refused in one line beyond),
// and names are read in place; what the reader keeps beside it (the metadata tables of one plane,
// flow points) is bounded as the JSON reader's is. Broken input (truncated, wrong wire types,
// lengths past the end, groups, times beyond ±2^62 ns) is a one-line error naming the file, the
// message and the field; an event whose metadata is missing is named by its id and counted.
#pragma once

#include <string>
#include <string_view>

#include "compiler/support/status.h"
#include "profiler/chrome_trace_reader.h"

namespace xlens::profiler {

// Whether a file that starts with `head` (its first bytes, at least 3 when it has them) and is
// named `path` is an XSpace rather than JSON: named *.pb, or starting with a field of XSpace
// that JSON text cannot start with.
bool LooksLikeXSpace(std::string_view head, std::string_view path);

// Streams the XSpace at `path` into `visitor`.
StatusOr<ChromeTraceHeader> StreamXSpace(const std::string& path, ChromeTraceVisitor& visitor);
// The same from bytes in memory; `source` names them in errors.
StatusOr<ChromeTraceHeader> StreamXSpaceBytes(std::string_view bytes, const std::string& source,
                                              ChromeTraceVisitor& visitor);

}  // namespace xlens::profiler
