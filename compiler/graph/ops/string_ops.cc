// Logging and string ops (TensorFlow's logging_ops.cc, string_*_op.cc, script_ops.cc): Assert,
// PrintV2, StringFormat, AsString, StringToNumber, StringJoin, and PyFunc, which is registered
// so graphs that use it load, but whose Python function cannot run here.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "compiler/graph/op_kernel.h"
#include "compiler/graph/op_registry.h"
#include "compiler/graph/ops/op_util.h"
#include "compiler/graph/ops/register_ops.h"
#include "compiler/graph/ops/summarize.h"
#include "compiler/graph/shape_inference.h"

namespace xlens::graph {
namespace {

Status AssertKernel(OpKernelContext& c) {
  const Tensor& cond = c.input(0);
  if (cond.dtype() != DT_BOOL || cond.num_elements() != 1) {
    return c.Error("In[0] expects a scalar bool, got " + DataTypeName(cond.dtype()) + " " +
                   DimsToString(cond.dims()));
  }
  if (cond.flat<bool>()[0]) return OkStatus();
  ASSIGN_OR_RETURN(int64_t summarize, IntAttr(c, "summarize"));
  std::string msg = "assertion failed: ";
  for (int i = 1; i < c.num_inputs(); ++i) {
    msg += "[" + SummarizeValue(c.input(i), summarize, false) + "]";
    if (i < c.num_inputs() - 1) msg += " ";
  }
  return c.Error(msg);
}

Status PrintV2Kernel(OpKernelContext& c) {
  const Tensor& in = c.input(0);
  if (in.rank() != 0) return c.Error("Input is expected to be scalar, but got " +
                                     DimsToString(in.dims()));
  ASSIGN_OR_RETURN(std::string stream, GetStringAttr(c.attrs(), "output_stream", c.name()));
  ASSIGN_OR_RETURN(std::string end, GetStringAttr(c.attrs(), "end", c.name()));
  const std::string text = in.strings()[0] + end;
  if (stream == "stdout") {
    std::cout << text << std::flush;
  } else if (stream == "stderr" || stream == "log(info)" || stream == "log(warning)" ||
             stream == "log(error)") {
    std::cerr << text << std::flush;
  } else if (stream.rfind("file://", 0) == 0) {
    std::ofstream file(stream.substr(7), std::ios::app);
    if (!file) return c.Error("cannot open " + stream.substr(7) + " for appending");
    file << text;
  } else {
    return c.Error("Unknown output stream: " + stream + ", Valid streams are: stdout, stderr, "
                   "log(info), log(warning), log(error), file://<filename>.");
  }
  return OkStatus();
}

// ---- StringFormat ---------------------------------------------------------------------------

StatusOr<std::vector<std::string>> SplitTemplate(const std::string& tmpl,
                                                 const std::string& placeholder) {
  std::vector<std::string> pieces;
  size_t start = 0;
  while (!placeholder.empty()) {
    size_t at = tmpl.find(placeholder, start);
    if (at == std::string::npos) break;
    pieces.push_back(tmpl.substr(start, at - start));
    start = at + placeholder.size();
  }
  pieces.push_back(tmpl.substr(start));
  return pieces;
}

Status StringFormatKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(std::string tmpl, GetStringAttr(c.attrs(), "template", c.name()));
  ASSIGN_OR_RETURN(std::string placeholder, GetStringAttr(c.attrs(), "placeholder", c.name()));
  ASSIGN_OR_RETURN(int64_t summarize, IntAttr(c, "summarize"));
  ASSIGN_OR_RETURN(std::vector<std::string> pieces, SplitTemplate(tmpl, placeholder));
  if (static_cast<int>(pieces.size()) - 1 != c.num_inputs()) {
    return c.Error("num placeholders in template and num inputs must match: " +
                   std::to_string(pieces.size() - 1) + " vs. " +
                   std::to_string(c.num_inputs()));
  }
  std::string out = pieces[0];
  for (int i = 0; i < c.num_inputs(); ++i) {
    out += SummarizeValue(c.input(i), summarize, true) + pieces[i + 1];
  }
  c.set_output(0, Tensor::StringScalar(std::move(out)));
  return OkStatus();
}

// ---- AsString -------------------------------------------------------------------------------

struct AsStringFormat {
  std::string format;  // printf format for one element
  bool is_bool = false;
};

StatusOr<AsStringFormat> MakeAsStringFormat(const OpKernelContext& c, DataType type) {
  ASSIGN_OR_RETURN(int64_t precision, IntAttr(c, "precision"));
  ASSIGN_OR_RETURN(bool scientific, GetBoolAttr(c.attrs(), "scientific", c.name()));
  ASSIGN_OR_RETURN(bool shortest, GetBoolAttr(c.attrs(), "shortest", c.name()));
  ASSIGN_OR_RETURN(int64_t width, IntAttr(c, "width"));
  ASSIGN_OR_RETURN(std::string fill, GetStringAttr(c.attrs(), "fill", c.name()));
  const bool floating = DataTypeIsFloating(type) || DataTypeIsComplex(type);
  if (!floating && (scientific || shortest || precision > -1)) {
    if (scientific) return c.Error("scientific not supported for type " + DataTypeName(type));
    if (shortest) return c.Error("shortest not supported for type " + DataTypeName(type));
    return c.Error("precision not supported for type " + DataTypeName(type));
  }
  if (scientific && shortest) return c.Error("Cannot select both scientific and shortest notation");
  if (shortest && precision != -1) return c.Error("Cannot specify both shortest and precision");
  if (fill.size() > 1) return c.Error("Fill string must be one or fewer characters");
  if ((type == DT_STRING || type == DT_BOOL) && !fill.empty() && fill != " ") {
    return c.Error("Fill argument not supported for type " + DataTypeName(type));
  }
  AsStringFormat f;
  f.format = "%";
  if (fill == "-" || fill == "+" || fill == "0" || fill == " " || fill == "#") {
    f.format += fill;
  } else if (!fill.empty()) {
    return c.Error("Fill argument not supported: \"" + fill + "\"");
  }
  if (width > -1) f.format += std::to_string(width);
  if (precision > -1) f.format += "." + std::to_string(precision);
  if (floating) {
    f.format += shortest ? "g" : (scientific ? "e" : "f");
  } else if (type == DT_STRING || type == DT_BOOL) {
    f.format += "s";
    f.is_bool = type == DT_BOOL;
  } else if (type == DT_UINT8 || type == DT_UINT16 || type == DT_UINT32 || type == DT_UINT64) {
    f.format += "llu";
  } else if (DataTypeIsInteger(type)) {
    f.format += "lld";
  } else {
    return c.Error("Type not supported: " + DataTypeName(type));
  }
  return f;
}

template <typename... Args>
std::string Format(const std::string& format, Args... args) {
  const int n = std::snprintf(nullptr, 0, format.c_str(), args...);
  std::string out(n > 0 ? n : 0, '\0');
  std::snprintf(out.data(), out.size() + 1, format.c_str(), args...);
  return out;
}

Status AsStringKernel(OpKernelContext& c) {
  const Tensor& x = c.input(0);
  ASSIGN_OR_RETURN(AsStringFormat f, MakeAsStringFormat(c, x.dtype()));
  Tensor out(DT_STRING, x.dims());
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    std::string& s = out.strings()[i];
    if (x.dtype() == DT_STRING) {
      s = Format(f.format, x.strings()[i].c_str());
    } else if (f.is_bool) {
      s = Format(f.format, x.flat<bool>()[i] ? "true" : "false");
    } else if (DataTypeIsComplex(x.dtype())) {
      complex128 v = x.literal().GetAsComplex(i);
      s = "(" + Format(f.format, v.real()) + "," + Format(f.format, v.imag()) + ")";
    } else if (DataTypeIsFloating(x.dtype())) {
      s = Format(f.format, x.GetAsDouble(i));
    } else if (x.dtype() == DT_UINT64) {
      s = Format(f.format, static_cast<unsigned long long>(x.GetAsInt64(i)));
    } else {
      s = Format(f.format, static_cast<long long>(x.GetAsInt64(i)));
    }
  }
  c.set_output(0, std::move(out));
  return OkStatus();
}

// ---- StringToNumber, StringJoin -------------------------------------------------------------

// Whole-string parses as TensorFlow's safe_strto* do: surrounding whitespace allowed, nothing
// else, and the value must fit the type.
bool ParseNumber(const std::string& s, DataType type, Tensor& out, int64_t i) {
  const char* begin = s.c_str();
  char* end = nullptr;
  errno = 0;
  auto rest_is_space = [&] {
    while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r') ++end;
    return *end == '\0';
  };
  if (s.empty()) return false;
  if (type == DT_FLOAT || type == DT_DOUBLE) {
    const double v = type == DT_FLOAT ? std::strtof(begin, &end) : std::strtod(begin, &end);
    if (end == begin || !rest_is_space()) return false;
    out.SetFromDouble(i, v);
    return true;
  }
  if (type == DT_UINT32 || type == DT_UINT64) {
    while (*begin == ' ' || *begin == '\t') ++begin;
    if (*begin == '-') return false;
    const unsigned long long v = std::strtoull(begin, &end, 10);
    if (end == begin || errno == ERANGE || !rest_is_space()) return false;
    if (type == DT_UINT32 && v > UINT32_MAX) return false;
    out.SetFromInt64(i, static_cast<int64_t>(v));
    return true;
  }
  const long long v = std::strtoll(begin, &end, 10);
  if (end == begin || errno == ERANGE || !rest_is_space()) return false;
  if (type == DT_INT32 && (v < INT32_MIN || v > INT32_MAX)) return false;
  out.SetFromInt64(i, v);
  return true;
}

Status StringToNumberKernel(OpKernelContext& c) {
  const Tensor& in = c.input(0);
  ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(0, in.dims()));
  for (int64_t i = 0; i < in.num_elements(); ++i) {
    if (!ParseNumber(in.strings()[i], out->dtype(), *out, i)) {
      return c.Error("StringToNumberOp could not correctly convert string: " + in.strings()[i]);
    }
  }
  return OkStatus();
}

Status StringJoinShape(InferenceContext& c) {
  PartialShape out = PartialShape::Scalar();
  for (int i = 0; i < c.num_inputs(); ++i) {
    const PartialShape& s = c.input(i);
    if (s.rank() == 0) continue;
    if (!out.IsCompatibleWith(s) && out.rank() != 0) {
      return c.Error("Input shapes do not match: " + out.ToString() + " vs. " + s.ToString());
    }
    out = out.rank() == 0 ? s : out.Merge(s);
  }
  c.set_output(0, out);
  return OkStatus();
}

Status StringJoinKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(std::string separator, GetStringAttr(c.attrs(), "separator", c.name()));
  std::vector<int64_t> dims;
  bool have_shape = false;
  for (int i = 0; i < c.num_inputs(); ++i) {
    const Tensor& t = c.input(i);
    if (t.rank() == 0) continue;
    if (have_shape && t.dims() != dims) {
      return c.Error("Input shapes do not match: " + DimsToString(dims) + " vs. " +
                     DimsToString(t.dims()));
    }
    dims = t.dims();
    have_shape = true;
  }
  Tensor out(DT_STRING, dims);
  for (int64_t k = 0; k < out.num_elements(); ++k) {
    std::string& s = out.strings()[k];
    for (int i = 0; i < c.num_inputs(); ++i) {
      if (i > 0) s += separator;
      const Tensor& t = c.input(i);
      s += t.strings()[t.rank() == 0 ? 0 : k];
    }
  }
  c.set_output(0, std::move(out));
  return OkStatus();
}

Status PyFuncKernel(OpKernelContext& c) {
  std::string token;
  if (auto t = GetStringAttr(c.attrs(), "token", c.name()); t.ok()) token = *t;
  return c.Error("the graph calls a Python function (token '" + token +
                 "'), which cannot run outside a Python interpreter");
}

}  // namespace

void RegisterStringOps(OpRegistry& r) {
  REGISTER_OP(r, "Assert")
      .Input("condition: bool")
      .Input("data: T")
      .Attr("T: list(type) >= 1")
      .Attr("summarize: int = 3")
      .SetIsStateful()
      .SetShapeFn(shape_fn::NoOutputs)
      .SetKernel(AssertKernel);
  REGISTER_OP(r, "PrintV2")
      .Input("input: string")
      .Attr("output_stream: string = 'stderr'")
      .Attr("end: string = '\n'")
      .SetIsStateful()
      .NoXlaKernel()
      .SetShapeFn(shape_fn::NoOutputs)
      .SetKernel(PrintV2Kernel);
  REGISTER_OP(r, "StringFormat")
      .Input("inputs: T")
      .Output("output: string")
      .Attr("T: list(type) >= 0")
      .Attr("template: string = '%s'")
      .Attr("placeholder: string = '%s'")
      .Attr("summarize: int = 3")
      .NoXlaKernel()
      .SetShapeFn(shape_fn::ScalarShape)
      .SetKernel(StringFormatKernel);
  REGISTER_OP(r, "AsString")
      .Input("input: T")
      .Output("output: string")
      .Attr("T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, "
            "uint32, uint64, complex64, complex128, bool, variant, string}")
      .Attr("precision: int = -1")
      .Attr("scientific: bool = false")
      .Attr("shortest: bool = false")
      .Attr("width: int = -1")
      .Attr("fill: string = ''")
      .NoXlaKernel()
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(AsStringKernel);
  REGISTER_OP(r, "StringToNumber")
      .Input("string_tensor: string")
      .Output("output: out_type")
      .Attr("out_type: {float, double, int32, int64, uint32, uint64} = DT_FLOAT")
      .NoXlaKernel()
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(StringToNumberKernel);
  REGISTER_OP(r, "StringJoin")
      .Input("inputs: N * string")
      .Output("output: string")
      .Attr("N: int >= 0")
      .Attr("separator: string = ''")
      .NoXlaKernel()
      .SetShapeFn(StringJoinShape)
      .SetKernel(StringJoinKernel);
  REGISTER_OP(r, "PyFunc")
      .Input("input: Tin")
      .Output("output: Tout")
      .Attr("token: string")
      .Attr("Tin: list(type) >= 0")
      .Attr("Tout: list(type) >= 0")
      .SetIsStateful()
      .NoXlaKernel()
      .SetShapeFn(shape_fn::UnknownShape)
      .SetKernel(PyFuncKernel);
}

}  // namespace xlens::graph
