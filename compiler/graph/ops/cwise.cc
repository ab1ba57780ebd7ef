#include "compiler/graph/ops/cwise.h"

#include <algorithm>

namespace xlens::graph::cwise {

StatusOr<Broadcast> MakeBroadcast(const std::vector<std::vector<int64_t>>& operand_dims) {
  Broadcast bc;
  size_t rank = 0;
  for (const auto& d : operand_dims) rank = std::max(rank, d.size());
  bc.out_dims.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    for (const auto& d : operand_dims) {
      const size_t pad = rank - d.size();
      if (i < pad) continue;
      const int64_t size = d[i - pad];
      int64_t& out = bc.out_dims[i];
      if (size == out || size == 1) continue;
      if (out == 1) {
        out = size;
        continue;
      }
      std::string message = "Incompatible shapes: ";
      for (size_t k = 0; k < operand_dims.size(); ++k)
        message += (k ? " vs. " : "") + DimsToString(operand_dims[k]);
      return Status::Error(message);
    }
  }
  for (int64_t d : bc.out_dims) bc.num_elements *= d;
  for (const auto& d : operand_dims) {
    std::vector<int64_t> strides(rank, 0);
    int64_t stride = 1;
    int64_t count = 1;
    for (size_t i = d.size(); i-- > 0;) {
      const size_t o = i + rank - d.size();
      strides[o] = d[i] == 1 ? 0 : stride;
      stride *= d[i];
      count *= d[i];
    }
    bc.same.push_back(d == bc.out_dims);
    bc.scalar.push_back(count == 1);
    bc.strides.push_back(std::move(strides));
  }
  return bc;
}

StatusOr<Reduction> MakeReduction(const std::vector<int64_t>& dims,
                                  const std::vector<int64_t>& axes) {
  Reduction r;
  const int64_t rank = static_cast<int64_t>(dims.size());
  r.in_dims = dims;
  r.reduced.assign(rank, false);
  for (int64_t axis : axes) {
    if (axis < -rank || axis >= rank) {
      return Status::Error("Invalid reduction dimension " + std::to_string(axis) +
                           " for input with " + std::to_string(rank) + " dimensions.");
    }
    r.reduced[axis < 0 ? axis + rank : axis] = true;
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (r.reduced[d]) {
      r.reduced_size *= dims[d];
      r.keep_dims_out.push_back(1);
    } else {
      r.num_outputs *= dims[d];
      r.out_dims.push_back(dims[d]);
      r.keep_dims_out.push_back(dims[d]);
    }
  }
  return r;
}

}  // namespace xlens::graph::cwise
