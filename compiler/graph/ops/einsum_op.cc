// Einsum's CPU kernel, in the steps of TensorFlow's EinsumOp: each operand is reduced to its
// distinct labels (diagonals of repeated labels taken, labels no other operand or the output has
// summed out), the two operands are packed as [batch, free, contracted] and multiplied batch by
// batch (Eigen's GEMM; batch dimensions of the ellipsis broadcast), and the product is laid out
// in the output's order, put on the diagonal where an output label repeats. Half types compute
// in float, integer types in uint64_t (cwise::ProductType).
#include <Eigen/Dense>
#include <algorithm>
#include <numeric>

#include "compiler/graph/op_registry.h"
#include "compiler/graph/ops/cwise.h"
#include "compiler/graph/ops/einsum_equation.h"
#include "compiler/graph/ops/register_ops.h"
#include "compiler/graph/shape_inference.h"

namespace xlens::graph {
namespace {

using cwise::ComputeType;
using cwise::Data;
using cwise::Dispatch;
using cwise::MutableData;

// The elements of an operand (labels per axis) rearranged as `keep` (labels with sizes, in
// order; a label of size 1 in the operand is broadcast to its size here) and summed over `sum`
// (labels of the operand absent from `keep`). A label on several axes reads their diagonal.
template <typename C, typename T>
std::vector<C> Rearrange(const T* in, const std::vector<int64_t>& in_dims,
                         const std::vector<int>& in_labels, const std::vector<int>& keep,
                         const std::vector<int64_t>& keep_sizes, const std::vector<int>& sum,
                         const std::vector<int64_t>& sum_sizes) {
  const int64_t rank = static_cast<int64_t>(in_dims.size());
  std::vector<int64_t> axis_stride(rank, 1);
  for (int64_t a = rank - 2; a >= 0; --a) axis_stride[a] = axis_stride[a + 1] * in_dims[a + 1];
  auto label_stride = [&](int label, int64_t size) {
    int64_t s = 0;
    for (int64_t a = 0; a < rank; ++a) {
      if (in_labels[a] != label) continue;
      if (in_dims[a] == 1 && size != 1) return int64_t{0};  // broadcast
      s += axis_stride[a];
    }
    return s;
  };
  std::vector<int64_t> ks, ss;
  for (size_t i = 0; i < keep.size(); ++i) ks.push_back(label_stride(keep[i], keep_sizes[i]));
  for (size_t i = 0; i < sum.size(); ++i) ss.push_back(label_stride(sum[i], sum_sizes[i]));
  const int64_t n_keep = std::accumulate(keep_sizes.begin(), keep_sizes.end(), int64_t{1},
                                         std::multiplies<>());
  const int64_t n_sum =
      std::accumulate(sum_sizes.begin(), sum_sizes.end(), int64_t{1}, std::multiplies<>());
  std::vector<C> out(n_keep, C(0));
  std::vector<int64_t> ki(keep.size(), 0), si(sum.size(), 0);
  int64_t base = 0;
  for (int64_t o = 0; o < n_keep; ++o) {
    C acc = C(0);
    int64_t off = 0;
    for (int64_t s = 0; s < n_sum; ++s) {
      acc += static_cast<C>(in[base + off]);
      for (int64_t d = static_cast<int64_t>(sum.size()) - 1; d >= 0; --d) {
        off += ss[d];
        if (++si[d] < sum_sizes[d]) break;
        off -= ss[d] * sum_sizes[d];
        si[d] = 0;
      }
    }
    out[o] = acc;
    for (int64_t d = static_cast<int64_t>(keep.size()) - 1; d >= 0; --d) {
      base += ks[d];
      if (++ki[d] < keep_sizes[d]) break;
      base -= ks[d] * keep_sizes[d];
      ki[d] = 0;
    }
  }
  return out;
}

bool Contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// The distinct labels of `labels` in order of first appearance.
std::vector<int> Distinct(const std::vector<int>& labels) {
  std::vector<int> out;
  for (int l : labels)
    if (!Contains(out, l)) out.push_back(l);
  return out;
}

template <typename T>
Status EinsumTyped(OpKernelContext& ctx, const EinsumDims& d) {
  using C = cwise::ProductType<T>;
  using Matrix = Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const int n = ctx.num_inputs();
  const std::vector<int>& out_labels = d.output_labels;
  auto sizes = [&](const std::vector<int>& labels) {
    std::vector<int64_t> s;
    for (int l : labels) s.push_back(d.label_size[l]);
    return s;
  };
  // Labels summed within one operand: in no other operand and not in the output.
  auto summed = [&](int i) {
    std::vector<int> s;
    for (int l : Distinct(d.input_labels[i])) {
      bool elsewhere = Contains(out_labels, l);
      for (int j = 0; j < n; ++j) elsewhere |= j != i && Contains(d.input_labels[j], l);
      if (!elsewhere) s.push_back(l);
    }
    return s;
  };
  // Every buffer (the packed operands, the product, the output) within the executor's tensor
  // limit, checked before any is allocated (saturating: sizes may overflow int64).
  const int64_t limit = ctx.max_tensor_bytes() / static_cast<int64_t>(sizeof(C));
  auto check = [&](const std::vector<int>& labels) -> Status {
    int64_t c = 1;
    for (int l : labels) {
      const int64_t size = d.label_size[l];
      if (size != 0 && c > limit / size) {
        return ctx.Error("the einsum needs a buffer past the executor's tensor limit (" +
                         std::to_string(ctx.max_tensor_bytes()) + " bytes)");
      }
      c *= size;
    }
    return OkStatus();
  };
  RETURN_IF_ERROR(check(out_labels));
  // The product's labels and values before the output layout.
  std::vector<int> result_labels;
  std::vector<C> result;
  if (n == 1) {
    const Tensor& x = ctx.input(0);
    result_labels = Distinct(out_labels);
    const std::vector<int> sum = summed(0);
    // Sizes of the operand itself: an ellipsis dimension of size 1 stays 1 here.
    result = Rearrange<C, T>(Data<T>(x), x.dims(), d.input_labels[0], result_labels,
                             sizes(result_labels), sum, sizes(sum));
  } else {
    std::vector<int> batch, contract, free_a, free_b;
    const std::vector<int> a_labels = Distinct(d.input_labels[0]);
    const std::vector<int> b_labels = Distinct(d.input_labels[1]);
    const std::vector<int> sum_a = summed(0), sum_b = summed(1);
    for (int l : a_labels) {
      if (Contains(sum_a, l)) continue;
      if (Contains(b_labels, l)) (Contains(out_labels, l) ? batch : contract).push_back(l);
      else free_a.push_back(l);
    }
    for (int l : b_labels)
      if (!Contains(sum_b, l) && !Contains(a_labels, l)) free_b.push_back(l);
    std::vector<int> a_keep = batch, b_keep = batch;
    a_keep.insert(a_keep.end(), free_a.begin(), free_a.end());
    a_keep.insert(a_keep.end(), contract.begin(), contract.end());
    b_keep.insert(b_keep.end(), contract.begin(), contract.end());
    b_keep.insert(b_keep.end(), free_b.begin(), free_b.end());
    RETURN_IF_ERROR(check(a_keep));
    RETURN_IF_ERROR(check(b_keep));
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    std::vector<C> pa = Rearrange<C, T>(Data<T>(a), a.dims(), d.input_labels[0], a_keep,
                                        sizes(a_keep), sum_a, sizes(sum_a));
    std::vector<C> pb = Rearrange<C, T>(Data<T>(b), b.dims(), d.input_labels[1], b_keep,
                                        sizes(b_keep), sum_b, sizes(sum_b));
    auto count = [&](const std::vector<int>& labels) {
      int64_t c = 1;
      for (int l : labels) c *= d.label_size[l];
      return c;
    };
    const int64_t nb = count(batch), m = count(free_a), k = count(contract), nn = count(free_b);
    result.assign(nb * m * nn, C(0));
    for (int64_t bi = 0; bi < nb && m * nn > 0; ++bi) {
      Eigen::Map<Matrix> out(result.data() + bi * m * nn, m, nn);
      if (k == 0) continue;
      out.noalias() = Eigen::Map<const Matrix>(pa.data() + bi * m * k, m, k) *
                      Eigen::Map<const Matrix>(pb.data() + bi * k * nn, k, nn);
    }
    result_labels = batch;
    result_labels.insert(result_labels.end(), free_a.begin(), free_a.end());
    result_labels.insert(result_labels.end(), free_b.begin(), free_b.end());
  }
  // The output layout: each output axis reads the product's axis of its label; where a label
  // repeats in the output, only the diagonal is set.
  ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, d.output_dims));
  T* o = MutableData<T>(*out);
  const int64_t out_rank = static_cast<int64_t>(out_labels.size());
  std::vector<int64_t> result_stride(result_labels.size(), 1);
  for (int64_t a = static_cast<int64_t>(result_labels.size()) - 2; a >= 0; --a)
    result_stride[a] = result_stride[a + 1] * d.label_size[result_labels[a + 1]];
  std::vector<int64_t> stride(out_rank, 0);  // the product's stride, first axis of a label only
  std::vector<int64_t> first_axis(out_rank);
  for (int64_t a = 0; a < out_rank; ++a) {
    first_axis[a] = std::find(out_labels.begin(), out_labels.end(), out_labels[a]) -
                    out_labels.begin();
    const int64_t r = std::find(result_labels.begin(), result_labels.end(), out_labels[a]) -
                      result_labels.begin();
    if (first_axis[a] == a) stride[a] = result_stride[r];
  }
  std::vector<int64_t> idx(out_rank, 0);
  for (int64_t i = 0, total = out->num_elements(); i < total; ++i) {
    int64_t off = 0;
    bool on_diagonal = true;
    for (int64_t a = 0; a < out_rank; ++a) {
      off += idx[a] * stride[a];
      on_diagonal &= idx[a] == idx[first_axis[a]];
    }
    o[i] = on_diagonal ? T(result[off]) : T(C(0));
    for (int64_t a = out_rank - 1; a >= 0; --a) {
      if (++idx[a] < d.output_dims[a]) break;
      idx[a] = 0;
    }
  }
  return OkStatus();
}

Status EinsumKernel(OpKernelContext& ctx) {
  ASSIGN_OR_RETURN(std::string equation, ctx.GetAttr<std::string>("equation"));
  auto parsed = ParseEinsumEquation(equation, ctx.num_inputs());
  if (!parsed.ok()) return ctx.Error(parsed.status().message());
  std::vector<std::vector<int64_t>> dims;
  for (int i = 0; i < ctx.num_inputs(); ++i) dims.push_back(ctx.input(i).dims());
  auto resolved = ResolveEinsum(*parsed, dims);
  if (!resolved.ok()) return ctx.Error(resolved.status().message());
  return Dispatch<cwise::kFloating | cwise::kSignedTypes | cwise::kUnsignedTypes>(
      ctx, ctx.input(0).dtype(),
      [&](auto tag) { return EinsumTyped<typename decltype(tag)::type>(ctx, *resolved); });
}

// The output shape when every operand's rank is known; unknown sizes stay unknown.
Status EinsumShape(InferenceContext& c) {
  ASSIGN_OR_RETURN(std::string equation, c.GetAttr<std::string>("equation"));
  auto parsed = ParseEinsumEquation(equation, c.num_inputs());
  if (!parsed.ok()) return c.Error(parsed.status().message());
  std::vector<std::vector<int64_t>> dims;
  for (int i = 0; i < c.num_inputs(); ++i) {
    if (c.input(i).unknown_rank()) return shape_fn::UnknownShape(c);
    // Unknown sizes resolve as 1 (they broadcast) and are marked unknown below.
    std::vector<int64_t> d = c.input(i).dims();
    for (int64_t& x : d) x = x < 0 ? 1 : x;
    dims.push_back(d);
  }
  auto resolved = ResolveEinsum(*parsed, dims);
  if (!resolved.ok()) return c.Error(resolved.status().message());
  std::vector<int64_t> out = resolved->output_dims;
  for (size_t a = 0; a < out.size(); ++a) {
    const int label = resolved->output_labels[a];
    for (int i = 0; i < c.num_inputs(); ++i) {
      for (size_t k = 0; k < resolved->input_labels[i].size(); ++k) {
        if (resolved->input_labels[i][k] == label && c.input(i).dim(k) < 0) out[a] = -1;
      }
    }
  }
  c.set_output(0, PartialShape(out));
  return OkStatus();
}

}  // namespace

void RegisterEinsumOps(OpRegistry& r) {
  REGISTER_OP(r, "Einsum")
      .Input("inputs: N * T")
      .Output("output: T")
      .Attr("equation: string")
      .Attr("N: int >= 1")
      .Attr("T: type")
      .SetShapeFn(EinsumShape)
      .SetKernel(EinsumKernel);
}

}  // namespace xlens::graph
