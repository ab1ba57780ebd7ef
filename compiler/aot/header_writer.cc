#include "compiler/aot/header_writer.h"

#include <map>
#include <set>
#include <sstream>

#include "compiler/aot/tf2xla_config.h"

namespace xlens::aot {

namespace {

// The base class every generated header shares, defined once per translation unit (the guard).
// Its names follow tfcompile's XlaCompiledCpuFunction, which code written for tfcompile calls
// through the generated class: AllocMode, Run, error_msg, set_arg_data, arg_data, result_data,
// num_args, num_results, LookupArgIndex, LookupResultIndex, set_thread_pool.
constexpr const char* kBaseClass = R"XLENS(#ifndef XLENS_AOT_COMPILED_FUNCTION_V1
#define XLENS_AOT_COMPILED_FUNCTION_V1
namespace xlens_aot {

// What a generated class tells its base: the entry function and every buffer's size.
struct StaticData {
  void (*entry)(const void* const* args, void* const* results, void* temp);
  int num_args;       // feeds, then variables
  int num_variables;  // the last num_variables of the arguments
  int num_results;    // fetches, then updated variables (not visible as results)
  int num_visible_results;
  const std::size_t* arg_bytes;
  const std::size_t* result_bytes;
  const char* const* arg_names;     // "" for a feed without a name
  const char* const* result_names;
  const int* update_of_variable;    // per result: the argument it is copied into, or -1
  std::size_t temp_bytes;
  std::size_t temp_alignment;
};

class CompiledFunction {
 public:
  // Who owns the argument buffers. ARGS_VARIABLES_RESULTS_PROFILES_AND_TEMPS: the object
  // allocates every buffer (fill arg<N>_data() before Run()). RESULTS_PROFILES_AND_TEMPS_ONLY:
  // arguments and variables are the caller's (set_arg<N>_data() before Run()).
  enum class AllocMode {
    ARGS_VARIABLES_RESULTS_PROFILES_AND_TEMPS,
    RESULTS_PROFILES_AND_TEMPS_ONLY,
  };

  CompiledFunction(const StaticData& data, AllocMode mode) : data_(data) {
    args_ = new const void*[data.num_args > 0 ? data.num_args : 1]();
    results_ = new void*[data.num_results > 0 ? data.num_results : 1]();
    owned_ = new void*[data.num_args + data.num_results + 1]();
    int owned = 0;
    for (int i = 0; i < data.num_args; ++i) {
      if (mode == AllocMode::ARGS_VARIABLES_RESULTS_PROFILES_AND_TEMPS) {
        args_[i] = owned_[owned++] = Allocate(data.arg_bytes[i], 64);
      }
    }
    for (int i = 0; i < data.num_results; ++i) {
      results_[i] = owned_[owned++] = Allocate(data.result_bytes[i], 64);
    }
    if (data.temp_bytes > 0) {
      temp_ = owned_[owned++] = Allocate(data.temp_bytes, data.temp_alignment);
    }
  }
  ~CompiledFunction() {
    for (int i = 0; i < data_.num_args + data_.num_results + 1; ++i) Free(owned_[i]);
    delete[] owned_;
    delete[] results_;
    delete[] args_;
  }
  CompiledFunction(const CompiledFunction&) = delete;
  CompiledFunction& operator=(const CompiledFunction&) = delete;

  // Runs the computation on the arguments; false (and error_msg() says why) when an argument
  // has no buffer or a buffer could not be allocated. One Run() at a time per object.
  bool Run() {
    error_msg_.clear();
    if (!allocated_) {
      error_msg_ = "out of memory allocating the computation's buffers";
      return false;
    }
    for (int i = 0; i < data_.num_args; ++i) {
      if (args_[i] == nullptr) {
        error_msg_ = std::string("argument ") + std::to_string(i) + " has no data: call set_arg" +
                     std::to_string(i) + "_data() before Run()";
        return false;
      }
    }
    data_.entry(args_, results_, temp_);
    // Updated variables are written back where the caller reads them, as in place.
    for (int r = 0; r < data_.num_results; ++r) {
      int a = data_.update_of_variable[r];
      if (a >= 0) std::memcpy(const_cast<void*>(args_[a]), results_[r], data_.result_bytes[r]);
    }
    return true;
  }
  const std::string& error_msg() const { return error_msg_; }

  // Accepted for tfcompile's interface (an Eigen::ThreadPoolDevice*); the generated code runs
  // on the calling thread.
  template <typename Pool>
  void set_thread_pool(const Pool*) {}

  void set_arg_data(std::size_t index, const void* data) { args_[index] = data; }
  void* arg_data(std::size_t index) { return const_cast<void*>(args_[index]); }
  const void* arg_data(std::size_t index) const { return args_[index]; }
  void* result_data(std::size_t index) { return results_[index]; }
  const void* result_data(std::size_t index) const { return results_[index]; }
  // As tfcompile counts them: the arguments are the feeds then the variables; the results the
  // fetches then the updated (not readonly) variables' new values.
  int num_args() const { return data_.num_args; }
  int num_variables() const { return data_.num_variables; }
  int num_results() const { return data_.num_results; }
  std::size_t arg_size(std::size_t index) const { return data_.arg_bytes[index]; }
  std::size_t result_size(std::size_t index) const { return data_.result_bytes[index]; }
  const char* const* arg_names() const { return data_.arg_names; }
  const char* const* result_names() const { return data_.result_names; }
  // The index of the argument or result the config named `name`, -1 when none.
  int LookupArgIndex(const std::string& name) const {
    for (int i = 0; i < data_.num_args - data_.num_variables; ++i) {
      if (name == data_.arg_names[i]) return i;
    }
    return -1;
  }
  // The argument index of the variable named `name`, -1 when none.
  int LookupVariableIndex(const std::string& name) const {
    for (int i = data_.num_args - data_.num_variables; i < data_.num_args; ++i) {
      if (name == data_.arg_names[i]) return i;
    }
    return -1;
  }
  int LookupResultIndex(const std::string& name) const {
    for (int i = 0; i < data_.num_visible_results; ++i) {
      if (name == data_.result_names[i]) return i;
    }
    return -1;
  }

 private:
  void* Allocate(std::size_t bytes, std::size_t alignment) {
    if (alignment < alignof(std::max_align_t)) alignment = alignof(std::max_align_t);
    std::size_t rounded = (bytes + alignment - 1) / alignment * alignment;
    void* p = std::aligned_alloc(alignment, rounded > 0 ? rounded : alignment);
    if (p == nullptr) allocated_ = false;
    else std::memset(p, 0, rounded > 0 ? rounded : alignment);
    return p;
  }
  static void Free(void* p) { std::free(p); }

  StaticData data_;
  const void** args_ = nullptr;
  void** results_ = nullptr;
  void** owned_ = nullptr;
  void* temp_ = nullptr;
  bool allocated_ = true;
  std::string error_msg_;
};

}  // namespace xlens_aot
#endif  // XLENS_AOT_COMPILED_FUNCTION_V1
)XLENS";

std::vector<std::string> Split(const std::string& text, const std::string& sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t at = text.find(sep, start);
    parts.push_back(text.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) break;
    start = at + sep.size();
  }
  return parts;
}

int64_t Count(const HeaderBuffer& b) {
  int64_t n = 1;
  for (int64_t d : b.dimensions) n *= d;
  return n;
}

std::string ShapeComment(const HeaderBuffer& b) {
  std::string text = b.element_type + "[";
  for (size_t i = 0; i < b.dimensions.size(); ++i) {
    text += (i ? "," : "") + std::to_string(b.dimensions[i]);
  }
  return text + "]";
}

// The accessors of one buffer: `kind` is "arg", "result" or "var"; `index` its position among
// the entry's arguments or results; `label` "0" or "_name" (set_arg0_data, set_arg_x_data).
void WriteAccessors(std::ostringstream& out, const HeaderBuffer& b, const std::string& kind,
                    int index, const std::string& label, const std::string& cpp_type,
                    bool settable, bool readonly) {
  const std::string name = kind + label;
  const std::string idx = std::to_string(index);
  const std::string get = kind == "result" ? "result_data(" + idx + ")" : "arg_data(" + idx + ")";
  out << "  // " << name << ": " << ShapeComment(b) << ", " << b.byte_size << " bytes\n";
  // A readonly variable is only read: its buffer may be the caller's constant data.
  const std::string maybe_const = readonly ? "const " : "";
  if (settable) {
    if (kind == "var") {
      out << "  void set_" << name << "_data(" << maybe_const << cpp_type
          << "* data) { set_arg_data(" << idx << ", data); }\n";
    } else {
      out << "  void set_" << name << "_data(const void* data) { set_arg_data(" << idx
          << ", data); }\n";
    }
  }
  out << "  " << maybe_const << cpp_type << "* " << name << "_data() { return static_cast<"
      << maybe_const << cpp_type << "*>(" << get << "); }\n";
  out << "  const " << cpp_type << "* " << name << "_data() const { return static_cast<const "
      << cpp_type << "*>(" << get << "); }\n";
  // The element accessor: name(i, j) in row-major order.
  std::string params, offset = "0";
  for (size_t d = 0; d < b.dimensions.size(); ++d) {
    params += (d ? ", " : "") + std::string("std::size_t dim") + std::to_string(d);
    offset = d == 0 ? "dim0" : "(" + offset + ") * " + std::to_string(b.dimensions[d]) + " + dim" + std::to_string(d);
  }
  out << "  " << maybe_const << cpp_type << "& " << name << "(" << params << ") { return " << name
      << "_data()[" << offset << "]; }\n";
  out << "  const " << cpp_type << "& " << name << "(" << params << ") const { return " << name
      << "_data()[" << offset << "]; }\n";
  out << "  int " << name << "_size() const { return " << b.byte_size << "; }\n";
  out << "  int " << name << "_count() const { return " << Count(b) << "; }\n";
}

// kArg0Shapes as tfcompile writes it (a scalar's is {-1}, its rank 0), and ours beside it: the
// rank, the element count and the byte size. `kind` is "Arg" or "Result".
void WriteConstants(std::ostringstream& out, const HeaderBuffer& b, const std::string& kind,
                    int index) {
  const std::string s = kind + std::to_string(index);
  out << "  static constexpr std::int32_t k" << s << "Shapes[] = {";
  for (size_t i = 0; i < b.dimensions.size(); ++i) out << (i ? ", " : "") << b.dimensions[i];
  if (b.dimensions.empty()) out << "-1";
  out << "};\n";
  out << "  static constexpr int k" << s << "Rank = " << b.dimensions.size() << ";\n";
  out << "  static constexpr std::size_t k" << s << "Count = " << Count(b) << ";\n";
  out << "  static constexpr std::size_t k" << s << "Size = " << b.byte_size << ";\n";
}

std::string StringArray(const std::vector<HeaderBuffer>& a, const std::vector<HeaderBuffer>& b) {
  std::string text = "{";
  bool first = true;
  for (const auto* list : {&a, &b}) {
    for (const HeaderBuffer& x : *list) {
      text += (first ? "\"" : ", \"") + x.name + "\"";
      first = false;
    }
  }
  return text + (first ? "\"\"}" : "}");
}

}  // namespace

std::string CppElementType(const std::string& t) {
  static const std::map<std::string, std::string> kTypes = {
      {"f32", "float"},           {"f64", "double"},          {"s8", "std::int8_t"},
      {"s16", "std::int16_t"},    {"s32", "std::int32_t"},    {"s64", "std::int64_t"},
      {"u8", "std::uint8_t"},     {"u16", "std::uint16_t"},   {"u32", "std::uint32_t"},
      {"u64", "std::uint64_t"},   {"pred", "bool"},
      // Halves are their bits: the standard library has no 16-bit float before C++23.
      {"f16", "std::uint16_t"},   {"bf16", "std::uint16_t"},
      {"c64", "std::complex<float>"}, {"c128", "std::complex<double>"}};
  auto it = kTypes.find(t);
  return it == kTypes.end() ? "" : it->second;
}

Status CheckCppClassName(const std::string& cpp_class) {
  if (cpp_class.empty()) return Error("aot: --cpp_class is empty: give the class's name, e.g. ns::Model");
  if (cpp_class.rfind("xlens_aot::", 0) == 0 || cpp_class == "xlens_aot") {
    return Error("aot: --cpp_class '" + cpp_class.substr(0, 200) +
                 "': the namespace xlens_aot is the generated header's own");
  }
  for (const std::string& part : Split(cpp_class, "::")) {
    if (!IsValidCppIdentifier(part)) {
      return Error("aot: --cpp_class '" + cpp_class.substr(0, 200) +
                   "': '" + part.substr(0, 200) + "' is not a C++ identifier (expected Name or ns1::ns2::Name)");
    }
  }
  return OkStatus();
}

StatusOr<std::string> WriteHeader(const HeaderSpec& spec) {
  RETURN_IF_ERROR(CheckCppClassName(spec.cpp_class));
  if (!IsValidCppIdentifier(spec.entry_point)) {
    return Error("aot: --entry_point '" + spec.entry_point.substr(0, 200) + "' is not a C identifier");
  }
  // The entry function is declared at global scope: a class of the same name there would be
  // hidden by it.
  if (spec.cpp_class == spec.entry_point) {
    return Error("aot: --cpp_class '" + spec.cpp_class + "' is also the entry function's name "
                 "(--entry_point): give one of them another name");
  }
  if (spec.variable_update_result.size() != spec.variables.size()) {
    return Error("aot: internal: a variable without its update index");
  }
  std::vector<std::string> namespaces = Split(spec.cpp_class, "::");
  const std::string class_name = namespaces.back();
  namespaces.pop_back();
  std::set<std::string> seen;
  auto type_of = [&](const HeaderBuffer& b, const std::string& what) -> StatusOr<std::string> {
    std::string t = CppElementType(b.element_type);
    if (t.empty()) return Error("aot: " + what + " has element type " + b.element_type + ", which has no C++ type");
    if (!b.name.empty() && !IsValidCppIdentifier(b.name)) {
      return Error("aot: " + what + " is named '" + b.name.substr(0, 200) + "', not a C++ identifier");
    }
    return t;
  };

  // The results the entry writes: the fetches, then the updated variables.
  int num_entry_results = static_cast<int>(spec.results.size());
  std::vector<int> update_of(spec.results.size(), -1);
  std::vector<int64_t> result_bytes;
  for (const HeaderBuffer& r : spec.results) result_bytes.push_back(r.byte_size);
  for (size_t v = 0; v < spec.variables.size(); ++v) {
    int r = spec.variable_update_result[v];
    if (r < 0) continue;
    if (r != num_entry_results) return Error("aot: internal: variable updates out of order");
    ++num_entry_results;
    update_of.push_back(static_cast<int>(spec.args.size() + v));
    result_bytes.push_back(spec.variables[v].byte_size);
  }

  std::string guard = "XLENS_AOT_";
  for (char c : spec.cpp_class) guard += c == ':' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  guard += "_H_";

  std::ostringstream out;
  out << "// Generated by `xlens aot`";
  if (!spec.source.empty()) out << " from " << spec.source;
  out << " for " << (spec.target_triple.empty() ? "the host" : spec.target_triple) << ". Do not edit.\n"
      << "//\n"
      << "// Link the function object beside this header; nothing else is needed (the C++ standard\n"
      << "// library). Use, as with tfcompile:\n"
      << "//   " << spec.cpp_class << " f;       // owns its buffers\n"
      << "//   std::copy(in, in + f.arg0_count(), f.arg0_data());\n"
      << "//   if (!f.Run()) std::cerr << f.error_msg();\n"
      << "//   const auto* out = f.result0_data();\n"
      << "//\n"
      << "// Memory: weights " << spec.weights_bytes << " bytes (read-only data of the object), "
      << "temporaries " << spec.temp_bytes << " bytes.\n"
      << "#ifndef " << guard << "\n#define " << guard << "\n\n"
      << "#include <complex>\n#include <cstddef>\n#include <cstdint>\n#include <cstdlib>\n"
      << "#include <cstring>\n#include <string>\n\n"
      << "extern \"C\" void " << spec.entry_point
      << "(const void* const* args, void* const* results, void* temp);\n\n"
      << kBaseClass << "\n";
  for (const std::string& ns : namespaces) out << "namespace " << ns << " {\n";
  if (!namespaces.empty()) out << "\n";

  out << "class " << class_name << " final : public ::xlens_aot::CompiledFunction {\n public:\n";
  // tfcompile's counts: the arguments include the variables, the results their updates.
  out << "  static constexpr std::size_t kNumArgs = " << spec.args.size() + spec.variables.size() << ";\n";
  out << "  static constexpr std::size_t kNumResults = " << num_entry_results << ";\n";
  out << "  static constexpr std::size_t kNumVariables = " << spec.variables.size() << ";\n";
  out << "  static constexpr std::size_t kTempSize = " << spec.temp_bytes << ";\n";
  out << "  static constexpr std::size_t kWeightsSize = " << spec.weights_bytes << ";\n";
  for (size_t i = 0; i < spec.args.size() + spec.variables.size(); ++i) {
    const HeaderBuffer& b = i < spec.args.size() ? spec.args[i] : spec.variables[i - spec.args.size()];
    WriteConstants(out, b, "Arg", static_cast<int>(i));
  }
  for (size_t i = 0; i < spec.results.size(); ++i) WriteConstants(out, spec.results[i], "Result", static_cast<int>(i));
  for (size_t v = 0, r = spec.results.size(); v < spec.variables.size(); ++v) {
    if (spec.variable_update_result[v] >= 0) WriteConstants(out, spec.variables[v], "Result", static_cast<int>(r++));
  }

  // The byte size of argument `index` (tfcompile's ArgSize).
  out << "\n  static std::int64_t ArgSize(std::int32_t index) {\n    static constexpr std::int64_t kSizes[] = {";
  for (size_t i = 0; i < spec.args.size() + spec.variables.size(); ++i) {
    const HeaderBuffer& b = i < spec.args.size() ? spec.args[i] : spec.variables[i - spec.args.size()];
    out << (i ? ", " : "") << b.byte_size;
  }
  if (spec.args.empty() && spec.variables.empty()) out << "0";
  out << "};\n    return kSizes[index];\n  }\n\n";

  out << "  explicit " << class_name
      << "(AllocMode mode = AllocMode::ARGS_VARIABLES_RESULTS_PROFILES_AND_TEMPS)\n"
      << "      : CompiledFunction(StaticDataFor(), mode) {}\n\n";

  for (size_t i = 0; i < spec.args.size(); ++i) {
    const HeaderBuffer& b = spec.args[i];
    ASSIGN_OR_RETURN(std::string t, type_of(b, "feed " + std::to_string(i)));
    WriteAccessors(out, b, "arg", static_cast<int>(i), std::to_string(i), t, true, false);
    if (!b.name.empty()) {
      WriteAccessors(out, b, "arg", static_cast<int>(i), "_" + b.name, t, true, false);
    }
  }
  for (size_t i = 0; i < spec.results.size(); ++i) {
    const HeaderBuffer& b = spec.results[i];
    ASSIGN_OR_RETURN(std::string t, type_of(b, "fetch " + std::to_string(i)));
    WriteAccessors(out, b, "result", static_cast<int>(i), std::to_string(i), t, false, true);
    if (!b.name.empty()) {
      WriteAccessors(out, b, "result", static_cast<int>(i), "_" + b.name, t, false, true);
    }
  }
  for (size_t i = 0; i < spec.variables.size(); ++i) {
    const HeaderBuffer& b = spec.variables[i];
    ASSIGN_OR_RETURN(std::string t, type_of(b, "variable " + std::to_string(i)));
    if (b.name.empty()) return Error("aot: variable " + std::to_string(i) + " has no name");
    // tfcompile names a variable's accessors by its name only (var_<name>_data), the node's
    // when the config gives none.
    const bool readonly = i < spec.variable_readonly.size() && spec.variable_readonly[i];
    WriteAccessors(out, b, "var", static_cast<int>(spec.args.size() + i), "_" + b.name, t, true,
                   readonly);
  }

  out << "\n private:\n  static const ::xlens_aot::StaticData& StaticDataFor() {\n";
  out << "    static constexpr std::size_t kArgBytes[] = {";
  for (size_t i = 0; i < spec.args.size() + spec.variables.size(); ++i) {
    const HeaderBuffer& b = i < spec.args.size() ? spec.args[i] : spec.variables[i - spec.args.size()];
    out << (i ? ", " : "") << b.byte_size;
  }
  if (spec.args.empty() && spec.variables.empty()) out << "0";
  out << "};\n    static constexpr std::size_t kResultBytes[] = {";
  for (size_t i = 0; i < result_bytes.size(); ++i) out << (i ? ", " : "") << result_bytes[i];
  if (result_bytes.empty()) out << "0";
  out << "};\n    static const char* const kArgNames[] = " << StringArray(spec.args, spec.variables) << ";\n";
  out << "    static const char* const kResultNames[] = " << StringArray(spec.results, {}) << ";\n";
  out << "    static constexpr int kUpdateOfVariable[] = {";
  for (size_t i = 0; i < update_of.size(); ++i) out << (i ? ", " : "") << update_of[i];
  if (update_of.empty()) out << "-1";
  out << "};\n";
  out << "    static const ::xlens_aot::StaticData kData = {\n"
      << "        &::" << spec.entry_point << ", " << spec.args.size() + spec.variables.size() << ", "
      << spec.variables.size() << ", " << num_entry_results << ", " << spec.results.size() << ",\n"
      << "        kArgBytes, kResultBytes, kArgNames, kResultNames, kUpdateOfVariable, "
      << spec.temp_bytes << ", " << (spec.temp_alignment > 0 ? spec.temp_alignment : 64) << "};\n"
      << "    return kData;\n  }\n};\n";
  if (!namespaces.empty()) out << "\n";
  for (auto it = namespaces.rbegin(); it != namespaces.rend(); ++it) out << "}  // namespace " << *it << "\n";
  out << "\n#endif  // " << guard << "\n";
  return out.str();
}

}  // namespace xlens::aot
