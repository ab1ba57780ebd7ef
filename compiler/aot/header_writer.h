// The C++ header of an ahead-of-time compiled function, with tfcompile's class interface, so
// code written against a tfcompile header builds against ours: a class (in the namespaces of
// --cpp_class=ns1::ns2::Name) that owns or borrows its buffers (AllocMode), `bool Run()`,
// `error_msg()`, accessors of arguments, results and variables by index and by the config's
// names (set_arg0_data, arg0_data, arg_x_data, arg0(i, j), result0_data, result_y_data,
// var_w_data, ...), counts and byte sizes, the shapes as constexpr constants, and a
// set_thread_pool hook (accepted; the code is single-threaded). The header needs only the C++17
// standard library: the small base class it defines is guarded, so several generated headers
// can share a translation unit; the entry function it calls is the object's, by its C name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/support/status.h"

namespace xlens::aot {

// One buffer of the entry function: a dense row-major array.
struct HeaderBuffer {
  std::string name;          // the config's name ("" : accessible by index only)
  std::string element_type;  // HLO's: "f32", "s32", "pred", ...
  std::vector<int64_t> dimensions;
  int64_t byte_size = 0;
};

struct HeaderSpec {
  std::string cpp_class;    // "Name" or "ns1::ns2::Name"
  std::string entry_point;  // the C symbol of the entry function
  // The entry function's arguments are `args` then `variables`; its results `results` then,
  // for each variable with update_result >= 0, the variable's new value (copied back into the
  // variable's buffer after the run, as tfcompile's variables are updated in place).
  std::vector<HeaderBuffer> args;
  std::vector<HeaderBuffer> results;
  std::vector<HeaderBuffer> variables;
  std::vector<int> variable_update_result;  // per variable: the entry result index, or -1
  std::vector<bool> variable_readonly;      // per variable (empty: none): const accessors
  int64_t temp_bytes = 0;
  int64_t temp_alignment = 64;
  int64_t weights_bytes = 0;
  std::string target_triple;  // for the comment
  std::string source;         // what was compiled, for the comment ("graph.pb + config.pbtxt")
};

// Checks `cpp_class` ("[ns::]*Name", each a C++ identifier): the --cpp_class flag's errors.
Status CheckCppClassName(const std::string& cpp_class);

// The header's text, or an error naming what cannot be written (a name that is not an
// identifier, an element type without a C++ type).
StatusOr<std::string> WriteHeader(const HeaderSpec& spec);

// The C++ type of an element of HLO type `element_type` ("f32" -> "float"), "" when none.
std::string CppElementType(const std::string& element_type);

}  // namespace xlens::aot
