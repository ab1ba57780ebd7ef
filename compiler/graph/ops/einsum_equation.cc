#include "compiler/graph/ops/einsum_equation.h"

#include <algorithm>

namespace xlens::graph {
namespace {

constexpr const char* kEllipsis = "...";

std::string DimsText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

// The number of named labels (characters outside the ellipsis) and whether there is an ellipsis.
Status CountLabels(const std::string& subscripts, int64_t* named, bool* has_ellipsis) {
  const size_t first = subscripts.find(kEllipsis);
  *has_ellipsis = first != std::string::npos;
  if (*has_ellipsis && subscripts.find(kEllipsis, first + 3) != std::string::npos) {
    return Status::Error("Found more than one ellipsis (...) in einsum subscripts '" +
                         subscripts + "'");
  }
  std::string rest = subscripts;
  if (*has_ellipsis) rest.erase(first, 3);
  if (rest.find('.') != std::string::npos) {
    return Status::Error("Found a '.' outside an ellipsis (...) in einsum subscripts '" +
                         subscripts + "'");
  }
  *named = static_cast<int64_t>(rest.size());
  return OkStatus();
}

}  // namespace

StatusOr<EinsumEquation> ParseEinsumEquation(const std::string& equation, int num_inputs) {
  const size_t arrow = equation.find("->");
  if (arrow == std::string::npos || equation.find("->", arrow + 2) != std::string::npos) {
    return Status::Error("Expecting exactly one '->' in einsum equation: " + equation);
  }
  EinsumEquation eq;
  eq.output = equation.substr(arrow + 2);
  const std::string inputs = equation.substr(0, arrow);
  size_t start = 0;
  while (true) {
    const size_t comma = inputs.find(',', start);
    eq.inputs.push_back(inputs.substr(start, comma == std::string::npos ? comma : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (eq.inputs.size() < 1 || eq.inputs.size() > 2) {
    return Status::Error("Expecting 1 or 2 input subscripts in equation '" + equation +
                         "' but got: " + std::to_string(eq.inputs.size()));
  }
  if (static_cast<int>(eq.inputs.size()) != num_inputs) {
    return Status::Error("Expecting " + std::to_string(eq.inputs.size()) +
                         " inputs for einsum equation '" + equation + "' but got: " +
                         std::to_string(num_inputs));
  }
  for (const std::string* s : {&eq.inputs[0], &eq.output}) {
    int64_t named = 0;
    bool ellipsis = false;
    RETURN_IF_ERROR(CountLabels(*s, &named, &ellipsis));
  }
  if (eq.inputs.size() == 2) {
    int64_t named = 0;
    bool ellipsis = false;
    RETURN_IF_ERROR(CountLabels(eq.inputs[1], &named, &ellipsis));
  }
  for (char c : eq.output) {
    if (c == '.') continue;
    bool found = false;
    for (const std::string& in : eq.inputs) found |= in.find(c) != std::string::npos;
    if (!found) {
      return Status::Error(std::string("Output subscript contains label '") + c +
                           "' which is not present in any input subscripts of '" + equation +
                           "'");
    }
  }
  return eq;
}

std::vector<int> EinsumLabels(const std::string& subscripts, int ellipsis_rank) {
  std::vector<int> labels;
  for (size_t i = 0; i < subscripts.size(); ++i) {
    if (subscripts.compare(i, 3, kEllipsis) == 0) {
      for (int k = ellipsis_rank - 1; k >= 0; --k) labels.push_back(kEllipsisLabel + k);
      i += 2;
    } else {
      labels.push_back(static_cast<unsigned char>(subscripts[i]));
    }
  }
  return labels;
}

StatusOr<EinsumDims> ResolveEinsum(const EinsumEquation& equation,
                                   const std::vector<std::vector<int64_t>>& input_dims) {
  EinsumDims r;
  const size_t n = equation.inputs.size();
  if (input_dims.size() != n) {
    return Status::Error("Expecting " + std::to_string(n) + " inputs but got " +
                         std::to_string(input_dims.size()));
  }
  for (size_t i = 0; i < n; ++i) {
    int64_t named = 0;
    bool ellipsis = false;
    RETURN_IF_ERROR(CountLabels(equation.inputs[i], &named, &ellipsis));
    const int64_t rank = static_cast<int64_t>(input_dims[i].size());
    if (!ellipsis && rank != named) {
      return Status::Error("Expected input " + std::to_string(i) + " to have rank " +
                           std::to_string(named) + " but got: " + std::to_string(rank));
    }
    if (ellipsis && rank < named) {
      return Status::Error("Expected input " + std::to_string(i) + " to have rank at least " +
                           std::to_string(named) + " but got: " + std::to_string(rank));
    }
    const int e = ellipsis ? static_cast<int>(rank - named) : 0;
    r.num_ellipsis_dims = std::max(r.num_ellipsis_dims, e);
    r.input_labels.push_back(EinsumLabels(equation.inputs[i], e));
  }
  r.label_size.assign(kEllipsisLabel + r.num_ellipsis_dims, 0);
  // Named labels must agree exactly; ellipsis dimensions broadcast.
  std::vector<bool> seen(r.label_size.size(), false);
  for (size_t i = 0; i < n; ++i) {
    for (size_t axis = 0; axis < input_dims[i].size(); ++axis) {
      const int label = r.input_labels[i][axis];
      const int64_t size = input_dims[i][axis];
      int64_t& known = r.label_size[label];
      if (label >= kEllipsisLabel) {
        if (known > 1 && size != 1 && size != known) {
          return Status::Error("Incompatible broadcasting dimensions in einsum: " +
                               std::to_string(known) + " and " + std::to_string(size) +
                               " at axis " + std::to_string(axis) + " of the input shaped " +
                               DimsText(input_dims[i]));
        }
        if (known <= 1) known = size;
        continue;
      }
      if (!seen[label]) {
        seen[label] = true;
        known = size;
      } else if (known != size) {
        return Status::Error("Expected dimension " + std::to_string(known) + " at axis " +
                             std::to_string(axis) + " of the input shaped " +
                             DimsText(input_dims[i]) + " but got dimension " +
                             std::to_string(size));
      }
    }
  }
  int64_t out_named = 0;
  bool out_ellipsis = false;
  RETURN_IF_ERROR(CountLabels(equation.output, &out_named, &out_ellipsis));
  if (!out_ellipsis && r.num_ellipsis_dims > 0) {
    return Status::Error("Output contains " + std::to_string(r.num_ellipsis_dims) +
                         " broadcasting dimension(s) but no ellipsis (...) was found in the "
                         "output subscripts.");
  }
  r.output_labels = EinsumLabels(equation.output, r.num_ellipsis_dims);
  for (int label : r.output_labels) r.output_dims.push_back(r.label_size[label]);
  return r;
}

}  // namespace xlens::graph
