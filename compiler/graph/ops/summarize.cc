#include "compiler/graph/ops/summarize.h"

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace xlens::graph {
namespace {

// absl::Utf8SafeCEscape: escapes control characters, quotes and backslashes; bytes >= 0x80 are
// kept (UTF-8 passes through).
std::string CEscape(const std::string& s) {
  std::string out;
  for (unsigned char ch : s) {
    switch (ch) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\"': out += "\\\""; break;
      case '\'': out += "\\'"; break;
      case '\\': out += "\\\\"; break;
      default:
        if (ch < 0x20 || ch == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\%03o", ch);
          out += buf;
        } else {
          out += static_cast<char>(ch);
        }
    }
  }
  return out;
}

std::string Element(const Tensor& t, int64_t i, bool print_v2) {
  switch (t.dtype()) {
    case DT_STRING: {
      std::string s = CEscape(t.strings()[i]);
      return print_v2 ? "\"" + s + "\"" : s;
    }
    case DT_BOOL:
      return print_v2 ? (t.flat<bool>()[i] ? "True" : "False") : (t.flat<bool>()[i] ? "1" : "0");
    case DT_FLOAT:
      return FloatToString(t.flat<float>()[i]);
    case DT_DOUBLE:
      return DoubleToString(t.flat<double>()[i]);
    case DT_HALF:
    case DT_BFLOAT16:
      return FloatToString(static_cast<float>(t.GetAsDouble(i)));
    case DT_COMPLEX64:
    case DT_COMPLEX128: {
      complex128 v = t.literal().GetAsComplex(i);
      if (t.dtype() == DT_COMPLEX64) {
        return "(" + FloatToString(static_cast<float>(v.real())) + "," +
               FloatToString(static_cast<float>(v.imag())) + ")";
      }
      return "(" + DoubleToString(v.real()) + "," + DoubleToString(v.imag()) + ")";
    }
    case DT_UINT64:
      return std::to_string(static_cast<uint64_t>(t.GetAsInt64(i)));
    case DT_RESOURCE:
      return "<ResourceHandle(name=\"" + t.handles()[i].name + "\")>";
    default:
      return std::to_string(t.GetAsInt64(i));
  }
}

void PrintOneDim(const Tensor& t, int dim, int64_t limit, int64_t* index, std::string* out) {
  if (*index >= limit) return;
  const int64_t count = t.dim(dim);
  if (dim == t.rank() - 1) {
    for (int64_t i = 0; i < count; ++i) {
      if (*index >= limit) {
        if (dim != 0) *out += "...";
        return;
      }
      if (i > 0) *out += " ";
      *out += Element(t, (*index)++, false);
    }
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    bool opened = false;
    if (*index < limit) {
      *out += "[";
      opened = true;
    }
    PrintOneDim(t, dim + 1, limit, index, out);
    if (*index < limit || opened) *out += "]";
  }
}

void PrintDimSpacing(int dim, int rank, std::string* out) {
  if (dim == rank - 1) {
    *out += " ";
    return;
  }
  out->append(rank - dim - 1, '\n');
  out->append(dim + 1, ' ');
}

void PrintOneDimV2(const Tensor& t, int dim, int64_t at_ends, int64_t index, std::string* out) {
  const int rank = static_cast<int>(t.rank());
  if (dim == rank) {
    *out += Element(t, index, true);
    return;
  }
  *out += "[";
  const int64_t count = t.dim(dim);
  const int64_t start_of_end = std::max(at_ends, count - at_ends);
  int64_t per = 1;
  for (int i = dim + 1; i < rank; ++i) per *= t.dim(i);
  for (int64_t i = 0; i < at_ends && i < count; ++i) {
    if (i > 0) PrintDimSpacing(dim, rank, out);
    PrintOneDimV2(t, dim + 1, at_ends, index + per * i, out);
  }
  if (count > 2 * at_ends) {
    PrintDimSpacing(dim, rank, out);
    *out += "...";
  }
  for (int64_t i = start_of_end; i < count; ++i) {
    PrintDimSpacing(dim, rank, out);
    PrintOneDimV2(t, dim + 1, at_ends, index + per * i, out);
  }
  *out += "]";
}

}  // namespace

std::string FloatToString(float v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.*g", FLT_DIG, v);
  if (std::strtof(buf, nullptr) != v) std::snprintf(buf, sizeof(buf), "%.*g", FLT_DIG + 3, v);
  return buf;
}

std::string DoubleToString(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.*g", DBL_DIG, v);
  if (std::strtod(buf, nullptr) != v) std::snprintf(buf, sizeof(buf), "%.*g", DBL_DIG + 2, v);
  return buf;
}

std::string SummarizeValue(const Tensor& t, int64_t max_entries, bool print_v2) {
  const int64_t n = t.num_elements();
  if (max_entries < 0) max_entries = n;
  const int64_t limit = std::min(max_entries, n);
  std::string out;
  if (t.rank() == 0) {
    for (int64_t i = 0; i < limit; ++i) {
      if (i > 0) out += " ";
      out += Element(t, i, print_v2);
    }
    if (n > limit) out += "...";
    return out;
  }
  if (print_v2) {
    PrintOneDimV2(t, 0, limit, 0, &out);
  } else {
    int64_t index = 0;
    PrintOneDim(t, 0, limit, &index, &out);
    if (n > limit) out += "...";
  }
  return out;
}

}  // namespace xlens::graph
