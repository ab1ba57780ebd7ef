// tfcompile's --out_metadata_object: a second object beside the function's, holding what the
// function is as data (the class, the entry point, every argument, result and variable with its
// name, element type, shape and byte size, the temporaries and weights), for tools that inspect a
// linked program without its header. Two symbols, C names derived from the entry point:
//   const char <entry>_metadata[];          // JSON text, NUL-terminated
//   const unsigned long <entry>_metadata_size;  // its length without the NUL
// Emitted for the same target triple as the function, so it links into the same program.
#pragma once

#include <string>

#include "compiler/aot/header_writer.h"
#include "compiler/support/status.h"

namespace xlens::aot {

// The JSON the object holds.
std::string MetadataJson(const HeaderSpec& spec);

// The relocatable object for `target_triple` ("" : the host's).
StatusOr<std::string> MetadataObject(const HeaderSpec& spec, const std::string& target_triple);

}  // namespace xlens::aot
