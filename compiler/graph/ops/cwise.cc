#include "compiler/graph/ops/cwise.h"

#include <algorithm>
#include <cstring>
#include <memory>

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

void BinaryLoopRows(const Broadcast& bc, const void* a, int64_t a_size, const void* b,
                    int64_t b_size, void* out, int64_t out_size, const BinaryRowFns& fns) {
  const int64_t n = bc.num_elements;
  if (n == 0) return;
  const char* x = static_cast<const char*>(a);
  const char* y = static_cast<const char*>(b);
  char* o = static_cast<char*>(out);
  if (bc.same[0] && !bc.scalar[1]) {
    // x op y with y repeated along the leading dims: rows of straight loops.
    if (const int64_t block = RepeatedBlock(bc, 1); block > 0 && n % block == 0) {
      for (int64_t r = 0; r < n; r += block) fns.both(x + r * a_size, y, o + r * out_size, block);
      return;
    }
  }
  if (bc.same[1] && !bc.scalar[0]) {
    if (const int64_t block = RepeatedBlock(bc, 0); block > 0 && n % block == 0) {
      for (int64_t r = 0; r < n; r += block) fns.both(x, y + r * b_size, o + r * out_size, block);
      return;
    }
  }
  if (bc.same[0] && bc.same[1]) {
    fns.both(x, y, o, n);
    return;
  }
  if (bc.same[0] && bc.scalar[1]) {
    fns.b_scalar(x, y, o, n);
    return;
  }
  if (bc.scalar[0] && bc.same[1]) {
    fns.a_scalar(x, y, o, n);
    return;
  }
  // The output's dimensions with those of size 1 dropped and neighbours that both operands walk
  // alike merged (each contiguous across them, or broadcast along both), so that the rows below
  // are as long as they can be: x[1000,1000,1] - y[1000,1,1] is a thousand rows of a thousand,
  // not a million rows of one.
  std::vector<int64_t> dims;
  std::vector<int64_t> strides[2];
  for (size_t d = 0; d < bc.out_dims.size(); ++d) {
    const int64_t size = bc.out_dims[d];
    if (size == 1) continue;
    if (!dims.empty() && strides[0].back() == bc.strides[0][d] * size &&
        strides[1].back() == bc.strides[1][d] * size) {
      dims.back() *= size;
      strides[0].back() = bc.strides[0][d];
      strides[1].back() = bc.strides[1][d];
      continue;
    }
    dims.push_back(size);
    strides[0].push_back(bc.strides[0][d]);
    strides[1].push_back(bc.strides[1][d]);
  }
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (rank == 0) {
    fns.both(x, y, o, 1);
    return;
  }
  // Row by row over the innermost dim, along which each operand's stride is 1 or 0 (broadcast).
  const int64_t inner = dims[rank - 1];
  const bool x_row = strides[0][rank - 1] != 0, y_row = strides[1][rank - 1] != 0;
  const BinaryRowFns::Fn row = x_row == y_row ? fns.both : x_row ? fns.b_scalar : fns.a_scalar;
  std::vector<int64_t> index(rank, 0);
  for (int64_t start = 0; start < n; start += inner) {
    int64_t xo = 0, yo = 0;
    for (int64_t d = 0; d + 1 < rank; ++d) {
      xo += index[d] * strides[0][d];
      yo += index[d] * strides[1][d];
    }
    row(x + xo * a_size, y + yo * b_size, o + start * out_size, inner);
    for (int64_t d = rank - 2; d >= 0; --d) {
      if (++index[d] < dims[d]) break;
      index[d] = 0;
    }
  }
}

Status BinaryOpRows(OpKernelContext& ctx, int64_t in_size, int64_t out_size, bool may_forward,
                    const BinaryRowFns& fns) {
  const Tensor& x = ctx.input(0);
  const Tensor& y = ctx.input(1);
  auto bc = MakeBroadcast({x.dims(), y.dims()});
  if (!bc.ok()) return ctx.Error(bc.status().message());
  // In place over an operand of the output's shape that nothing else holds.
  int forward = -1;
  if (may_forward) {
    if (x.RefCountIsOne() && x.dims() == bc->out_dims) forward = 0;
    else if (y.RefCountIsOne() && y.dims() == bc->out_dims) forward = 1;
  }
  ASSIGN_OR_RETURN(Tensor * out, forward >= 0
                                     ? ctx.forward_input_or_allocate_output(forward, 0, bc->out_dims)
                                     : ctx.allocate_output(0, bc->out_dims));
  BinaryLoopRows(*bc, x.raw_data(), in_size, y.raw_data(), in_size, out->raw_data(), out_size,
                 fns);
  return OkStatus();
}

StatusOr<Tensor*> UnaryOutput(OpKernelContext& ctx, bool may_forward) {
  const Tensor& x = ctx.input(0);
  return may_forward ? ctx.forward_input_or_allocate_output(0, 0, x.dims())
                     : ctx.allocate_output(0, x.dims());
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

namespace {

// Copies the n elements of `in` at `offsets` (from `base`) to `buffer`, as elements of U (the
// element size's unsigned type, or a 16-byte block for complex128).
// Copied as bytes (a memcpy of a constant size is one move): read through U's type, a float or
// a complex would be accessed as an object of another type.
template <typename U>
void Gather(const void* in, int64_t base, const std::vector<int64_t>& offsets, void* buffer) {
  const char* from = static_cast<const char*>(in) + base * sizeof(U);
  char* to = static_cast<char*>(buffer);
  for (size_t i = 0; i < offsets.size(); ++i) {
    std::memcpy(to + i * sizeof(U), from + offsets[i] * sizeof(U), sizeof(U));
  }
}

struct Bytes16 {
  uint64_t lo, hi;
};

}  // namespace

void ForEachReductionErased(const Reduction& r, const void* in, int64_t elem_size, ReductionFn fn,
                            void* state) {
  const int64_t rank = static_cast<int64_t>(r.in_dims.size());
  const int64_t n = r.reduced_size;
  const char* bytes = static_cast<const char*>(in);
  // Reduced axes all trailing: the values of an output are contiguous already.
  int64_t first_reduced = rank;
  while (first_reduced > 0 && r.reduced[first_reduced - 1]) --first_reduced;
  bool trailing = true;
  for (int64_t d = 0; d < first_reduced; ++d) trailing &= !r.reduced[d];
  if (trailing) {
    for (int64_t o = 0; o < r.num_outputs; ++o) fn(bytes + o * n * elem_size, n, o, state);
    return;
  }
  std::vector<int64_t> stride(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d) stride[d] = stride[d + 1] * r.in_dims[d + 1];
  std::vector<int64_t> kept_axes, red_axes;
  for (int64_t d = 0; d < rank; ++d) (r.reduced[d] ? red_axes : kept_axes).push_back(d);
  // Offsets of the reduced elements relative to an output's first element.
  std::vector<int64_t> red_offsets;
  red_offsets.reserve(n);
  {
    std::vector<int64_t> idx(red_axes.size(), 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t off = 0;
      for (size_t k = 0; k < red_axes.size(); ++k) off += idx[k] * stride[red_axes[k]];
      red_offsets.push_back(off);
      for (int64_t k = static_cast<int64_t>(red_axes.size()) - 1; k >= 0; --k) {
        if (++idx[k] < r.in_dims[red_axes[k]]) break;
        idx[k] = 0;
      }
    }
  }
  void (*gather)(const void*, int64_t, const std::vector<int64_t>&, void*) =
      elem_size == 1   ? &Gather<uint8_t>
      : elem_size == 2 ? &Gather<uint16_t>
      : elem_size == 4 ? &Gather<uint32_t>
      : elem_size == 8 ? &Gather<uint64_t>
                       : &Gather<Bytes16>;
  // operator new's alignment suits every element type (16 bytes for complex128).
  std::unique_ptr<char[]> buffer(new char[(n > 0 ? n : 1) * elem_size]);
  std::vector<int64_t> idx(kept_axes.size(), 0);
  for (int64_t o = 0; o < r.num_outputs; ++o) {
    int64_t base = 0;
    for (size_t k = 0; k < kept_axes.size(); ++k) base += idx[k] * stride[kept_axes[k]];
    gather(in, base, red_offsets, buffer.get());
    fn(buffer.get(), n, o, state);
    for (int64_t k = static_cast<int64_t>(kept_axes.size()) - 1; k >= 0; --k) {
      if (++idx[k] < r.in_dims[kept_axes[k]]) break;
      idx[k] = 0;
    }
  }
}

}  // namespace xlens::graph::cwise
