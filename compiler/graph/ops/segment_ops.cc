// Segment reductions (TensorFlow's math_ops segment family). UnsortedSegmentSum is what
// TensorFlow's Python turns a gather's IndexedSlices gradient into when it needs it dense
// (indexed_slices._indexed_slices_to_tensor), so the gradient of GatherV2 is built on it.
#include <algorithm>

#include "compiler/graph/op_kernel.h"
#include "compiler/graph/op_registry.h"
#include "compiler/graph/shape_inference.h"

namespace xlens::graph {

namespace {

// output = [num_segments] + data.shape[rank(segment_ids):].
Status UnsortedSegmentShape(InferenceContext& c) {
  const PartialShape& data = c.input(0);
  const PartialShape& ids = c.input(1);
  if (c.input(2).rank() > 0) {
    return c.Error("num_segments must be a scalar, got shape " + c.input(2).ToString());
  }
  if (data.unknown_rank() || ids.unknown_rank()) {
    c.set_output(0, PartialShape::UnknownRank());
    return OkStatus();
  }
  if (ids.rank() > data.rank()) {
    return c.Error("segment_ids of shape " + ids.ToString() +
                   " has more dimensions than data of shape " + data.ToString());
  }
  for (int64_t i = 0; i < ids.rank(); ++i) {
    if (ids.dim(i) >= 0 && data.dim(i) >= 0 && ids.dim(i) != data.dim(i)) {
      return c.Error("data.shape = " + data.ToString() +
                     " does not start with segment_ids.shape = " + ids.ToString());
    }
  }
  int64_t segments = -1;
  if (const Tensor* n = c.input_tensor(2); n != nullptr && n->num_elements() == 1) {
    segments = n->GetAsInt64(0);
  }
  std::vector<int64_t> dims = {segments};
  for (int64_t i = ids.rank(); i < data.rank(); ++i) dims.push_back(data.dim(i));
  c.set_output(0, PartialShape(dims));
  return OkStatus();
}

template <typename T>
void AccumulateRows(const Tensor& data, const std::vector<int64_t>& rows, int64_t inner,
                    Tensor& out) {
  auto in = data.flat<T>();
  auto o = out.flat<T>();
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0) continue;
    for (int64_t k = 0; k < inner; ++k) o[rows[i] * inner + k] += in[i * inner + k];
  }
}

Status UnsortedSegmentSumKernel(OpKernelContext& c) {
  const Tensor& data = c.input(0);
  const Tensor& ids = c.input(1);
  const Tensor& num = c.input(2);
  if (num.rank() != 0) {
    return c.Error("num_segments should be a scalar, not shape " + DimsToString(num.dims()));
  }
  const int64_t segments = num.GetAsInt64(0);
  if (segments < 0) {
    return c.Error("Input num_segments == " + std::to_string(segments) +
                   " must not be negative.");
  }
  if (ids.rank() > data.rank() ||
      !std::equal(ids.dims().begin(), ids.dims().end(), data.dims().begin())) {
    return c.Error("data.shape = " + DimsToString(data.dims()) +
                   " does not start with segment_ids.shape = " + DimsToString(ids.dims()));
  }
  std::vector<int64_t> out_dims = {segments};
  int64_t inner = 1;
  for (int64_t i = ids.rank(); i < data.rank(); ++i) {
    out_dims.push_back(data.dims()[i]);
    inner *= data.dims()[i];
  }
  // Negative ids are dropped, as TensorFlow's kernel drops them; too large ones are errors.
  std::vector<int64_t> rows(ids.num_elements());
  for (int64_t i = 0; i < ids.num_elements(); ++i) {
    rows[i] = ids.GetAsInt64(i);
    if (rows[i] >= segments) {
      return c.Error("segment_ids[" + std::to_string(i) + "] = " + std::to_string(rows[i]) +
                     " is out of range [0, " + std::to_string(segments) + ")");
    }
  }
  ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(0, out_dims));  // zeros
  switch (data.dtype()) {
    case DT_FLOAT: AccumulateRows<float>(data, rows, inner, *out); break;
    case DT_DOUBLE: AccumulateRows<double>(data, rows, inner, *out); break;
    case DT_INT32: AccumulateRows<int32_t>(data, rows, inner, *out); break;
    case DT_INT64: AccumulateRows<int64_t>(data, rows, inner, *out); break;
    default:
      if (!DataTypeIsFloating(data.dtype()) && !DataTypeIsInteger(data.dtype())) {
        return c.Error("UnsortedSegmentSum is not implemented for " +
                       DataTypeName(data.dtype()));
      }
      // The narrow types (half, bfloat16, small integers) sum exactly through double.
      for (size_t i = 0; i < rows.size(); ++i) {
        if (rows[i] < 0) continue;
        for (int64_t k = 0; k < inner; ++k) {
          const int64_t o = rows[i] * inner + k;
          out->SetFromDouble(o, out->GetAsDouble(o) +
                                    data.GetAsDouble(static_cast<int64_t>(i) * inner + k));
        }
      }
  }
  return OkStatus();
}

}  // namespace

void RegisterSegmentOps(OpRegistry& r) {
  REGISTER_OP(r, "UnsortedSegmentSum")
      .Input("data: T")
      .Input("segment_ids: Tindices")
      .Input("num_segments: Tnumsegments")
      .Output("output: T")
      .Attr("T: {float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, "
            "qint32, bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64}")
      .Attr("Tindices: {int16, int32, int64}")
      .Attr("Tnumsegments: {int32, int64} = DT_INT32")
      .CompileTimeConstInput("num_segments")
      .SetShapeFn(UnsortedSegmentShape)
      .SetKernel(UnsortedSegmentSumKernel);
}

}  // namespace xlens::graph
