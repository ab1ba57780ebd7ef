#include "compiler/graph/ops/op_util.h"

#include "compiler/graph/ops/strided_copy.h"

namespace xlens::graph {

int64_t NumElements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

Tensor IntTensor(DataType type, const std::vector<int64_t>& values, std::vector<int64_t> dims) {
  Tensor t(type, std::move(dims));
  for (size_t i = 0; i < values.size(); ++i) t.SetFromInt64(static_cast<int64_t>(i), values[i]);
  return t;
}

Tensor NumericScalar(DataType type, double value) {
  Tensor t(type, {});
  if (type == DT_BOOL) {
    t.flat<bool>()[0] = value != 0;
  } else if (type == DT_INT64 || type == DT_UINT64) {
    t.SetFromInt64(0, static_cast<int64_t>(value));
  } else {
    t.SetFromDouble(0, value);
  }
  return t;
}

void FillWithScalar(Tensor& dst, const Tensor& scalar) {
  const std::vector<int64_t> zeros(dst.rank(), 0);
  StridedCopy(scalar, 0, zeros, dst, 0, RowMajorStrides(dst.dims()), dst.dims());
}

void CopyElements(const Tensor& src, int64_t src_pos, Tensor& dst, int64_t dst_pos, int64_t n) {
  const int64_t one = 1, count = n;
  StridedCopy(src, src_pos, {&one, 1}, dst, dst_pos, {&one, 1}, {&count, 1});
}

StatusOr<int64_t> CanonicalAxis(int64_t axis, int64_t rank, const std::string& what) {
  if (axis < -rank || axis >= rank) {
    return Status::Error(what + " must be in range [-" + std::to_string(rank) + ", " +
                         std::to_string(rank) + ") but got " + std::to_string(axis));
  }
  return axis < 0 ? axis + rank : axis;
}

bool ElementIsTrue(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DT_STRING:
      return !t.strings()[i].empty();
    case DT_BOOL:
      return t.flat<bool>()[i];
    case DT_COMPLEX64:
    case DT_COMPLEX128:
      return t.literal().GetAsComplex(i) != complex128(0, 0);
    default:
      if (DataTypeIsFloating(t.dtype())) return t.GetAsDouble(i) != 0.0;
      return t.GetAsInt64(i) != 0;
  }
}

}  // namespace xlens::graph
