// Execution snapshots (--xla_dump_hlo_snapshots): the arguments and results of one execution of
// a module as .npy files, named as XLA names its snapshot files
// (module_0001.NAME.execution_0001.arg0.npy, ...out0.npy; tuple results leaf by leaf, in order),
// each with a checksum so that a bundle's reader can tell a damaged file from a real result.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/hlo/literal.h"
#include "compiler/support/status.h"

namespace xlens {

// One tensor of a snapshot, serialized.
struct SnapshotTensor {
  std::string suffix;  // "execution_0001.arg0.npy": the dump file name after the module's prefix
  std::string shape;   // "f32[2,3]"
  std::string npy;     // the .npy file's bytes
};

// The files of execution number `execution` (1 for the first) of a module called with
// `arguments` that returned `result`. A tuple argument, or an element type .npy cannot hold, is an
// error naming it: the snapshot is skipped rather than written half.
StatusOr<std::vector<SnapshotTensor>> SerializeExecution(int64_t execution,
                                                         const std::vector<Literal>& arguments,
                                                         const Literal& result);

// "crc32:0a1b2c3d": the checksum the manifest records for a snapshot file (zlib's CRC-32, the one
// gzip and `python3 -c 'import zlib; zlib.crc32(data)'` compute).
std::string SnapshotChecksum(std::string_view bytes);

}  // namespace xlens
