// Dot and convolution. Both convert their operands to an accumulation type first: integers
// accumulate in the result type (wrapping), floats in at least f32 (f64 when an f64 is
// involved), complex numbers in c64 or c128; the sum is converted to the result type at the end.
#include <algorithm>

#include "compiler/hlo/evaluator_internal.h"

namespace xlens::evaluator_internal {
namespace {

StatusOr<PrimitiveType> AccumulationType(PrimitiveType lhs, PrimitiveType rhs,
                                         PrimitiveType result) {
  const PrimitiveType types[] = {lhs, rhs, result};
  auto any = [&](auto predicate) { return std::any_of(std::begin(types), std::end(types), predicate); };
  const bool has_f64 = any([](PrimitiveType t) { return t == PrimitiveType::F64 || t == PrimitiveType::C128; });
  if (any([](PrimitiveType t) { return IsComplexType(t); })) {
    return has_f64 ? PrimitiveType::C128 : PrimitiveType::C64;
  }
  if (any([](PrimitiveType t) { return IsFloatingPointType(t); })) {
    return has_f64 ? PrimitiveType::F64 : PrimitiveType::F32;
  }
  return result;
}

template <typename T>
inline constexpr bool kIsAccumulator = !std::is_same_v<T, half> && !kIsWrappedFloat<T>;

template <typename T>
T MultiplyAdd(T accumulator, T a, T b) {
  if constexpr (kIsPred<T>) {
    return accumulator || (a && b);
  } else if constexpr (kIsInteger<T>) {
    using U = std::conditional_t<(sizeof(T) < sizeof(uint32_t)), uint32_t, std::make_unsigned_t<T>>;
    return static_cast<T>(static_cast<U>(accumulator) + static_cast<U>(a) * static_cast<U>(b));
  } else {
    return accumulator + a * b;
  }
}

// Both operands in the accumulation type, then the accumulated result converted to `shape`.
struct Accumulation {
  PrimitiveType type;
  Literal lhs;
  Literal rhs;
};

StatusOr<Accumulation> PrepareAccumulation(const Literal& lhs, const Literal& rhs,
                                           const Shape& shape) {
  ASSIGN_OR_RETURN(PrimitiveType type, AccumulationType(lhs.shape().element_type(),
                                                        rhs.shape().element_type(),
                                                        shape.element_type()));
  ASSIGN_OR_RETURN(Literal lhs_converted, ConvertLiteral(lhs, type));
  ASSIGN_OR_RETURN(Literal rhs_converted, ConvertLiteral(rhs, type));
  return Accumulation{type, std::move(lhs_converted), std::move(rhs_converted)};
}

// Checks that `dims` are distinct dimensions of a rank-`rank` array.
Status CheckDimensionList(std::span<const int64_t> dims, int64_t rank, std::vector<bool>& used,
                          std::string_view what) {
  for (int64_t d : dims) {
    if (d < 0 || d >= rank || used[d]) {
      return Error(fmt::format("{} dimension {} is out of range or repeated", what, d));
    }
    used[d] = true;
  }
  return OkStatus();
}

// Copies `literal` into a dense array ordered by `order` (a permutation of its dimensions).
Literal Permute(const Literal& literal, std::span<const int64_t> order) {
  const Shape& shape = literal.shape();
  std::vector<int64_t> dims, source_strides;
  const std::vector<int64_t> strides = StridesOf(shape);
  for (int64_t d : order) {
    dims.push_back(shape.dimensions(d));
    source_strides.push_back(strides[d]);
  }
  Literal result(Shape(shape.element_type(), dims));
  StridedCopy(ByteWidth(shape.element_type()), dims, result.untyped_data(), 0,
              shape_util::RowMajorStrides(dims), literal.untyped_data(), 0, source_strides);
  return result;
}

int64_t Product(const Shape& shape, std::span<const int64_t> dims) {
  int64_t product = 1;
  for (int64_t d : dims) product *= shape.dimensions(d);
  return product;
}

}  // namespace

StatusOr<Literal> HandleDot(const HloInstruction& instruction, const Literal& lhs,
                            const Literal& rhs) {
  const Shape& shape = instruction.shape();
  const Shape& lhs_shape = lhs.shape();
  const Shape& rhs_shape = rhs.shape();
  DotDimensionNumbers dnums;
  if (instruction.dot_dimension_numbers) {
    dnums = *instruction.dot_dimension_numbers;
  } else if (lhs_shape.rank() <= 2 && rhs_shape.rank() <= 2) {
    // The classic matrix/vector product.
    if (lhs_shape.rank() >= 1) dnums.lhs_contracting_dimensions = {lhs_shape.rank() - 1};
    if (rhs_shape.rank() >= 1) dnums.rhs_contracting_dimensions = {0};
  } else {
    return Error("dot without dimension numbers");
  }
  if (dnums.lhs_batch_dimensions.size() != dnums.rhs_batch_dimensions.size() ||
      dnums.lhs_contracting_dimensions.size() != dnums.rhs_contracting_dimensions.size()) {
    return Error("lhs and rhs have different numbers of batch or contracting dimensions");
  }
  std::vector<bool> lhs_used(lhs_shape.rank(), false), rhs_used(rhs_shape.rank(), false);
  RETURN_IF_ERROR(CheckDimensionList(dnums.lhs_batch_dimensions, lhs_shape.rank(), lhs_used, "lhs batch"));
  RETURN_IF_ERROR(CheckDimensionList(dnums.lhs_contracting_dimensions, lhs_shape.rank(), lhs_used,
                                     "lhs contracting"));
  RETURN_IF_ERROR(CheckDimensionList(dnums.rhs_batch_dimensions, rhs_shape.rank(), rhs_used, "rhs batch"));
  RETURN_IF_ERROR(CheckDimensionList(dnums.rhs_contracting_dimensions, rhs_shape.rank(), rhs_used,
                                     "rhs contracting"));
  std::vector<int64_t> result_dims;
  for (size_t i = 0; i < dnums.lhs_batch_dimensions.size(); ++i) {
    const int64_t size = lhs_shape.dimensions(dnums.lhs_batch_dimensions[i]);
    if (size != rhs_shape.dimensions(dnums.rhs_batch_dimensions[i])) {
      return Error(fmt::format("batch dimension {} differs between lhs and rhs", i));
    }
    result_dims.push_back(size);
  }
  for (size_t i = 0; i < dnums.lhs_contracting_dimensions.size(); ++i) {
    if (lhs_shape.dimensions(dnums.lhs_contracting_dimensions[i]) !=
        rhs_shape.dimensions(dnums.rhs_contracting_dimensions[i])) {
      return Error(fmt::format("contracting dimension {} differs between lhs and rhs", i));
    }
  }
  std::vector<int64_t> lhs_free, rhs_free;
  for (int64_t d = 0; d < lhs_shape.rank(); ++d) {
    if (!lhs_used[d]) lhs_free.push_back(d);
  }
  for (int64_t d = 0; d < rhs_shape.rank(); ++d) {
    if (!rhs_used[d]) rhs_free.push_back(d);
  }
  for (int64_t d : lhs_free) result_dims.push_back(lhs_shape.dimensions(d));
  for (int64_t d : rhs_free) result_dims.push_back(rhs_shape.dimensions(d));
  RETURN_IF_ERROR(ExpectDimensions(shape, result_dims, "dot result"));

  ASSIGN_OR_RETURN(Accumulation accumulation, PrepareAccumulation(lhs, rhs, shape));
  // lhs as [batch, m, k] and rhs as [batch, k, n], then out[b, i, j] += lhs[b, i, k] * rhs[b, k, j]
  // with k innermost per output element, in increasing order.
  std::vector<int64_t> lhs_order = dnums.lhs_batch_dimensions;
  lhs_order.insert(lhs_order.end(), lhs_free.begin(), lhs_free.end());
  lhs_order.insert(lhs_order.end(), dnums.lhs_contracting_dimensions.begin(),
                   dnums.lhs_contracting_dimensions.end());
  std::vector<int64_t> rhs_order = dnums.rhs_batch_dimensions;
  rhs_order.insert(rhs_order.end(), dnums.rhs_contracting_dimensions.begin(),
                   dnums.rhs_contracting_dimensions.end());
  rhs_order.insert(rhs_order.end(), rhs_free.begin(), rhs_free.end());
  const Literal lhs_matrix = Permute(accumulation.lhs, lhs_order);
  const Literal rhs_matrix = Permute(accumulation.rhs, rhs_order);
  const int64_t batch = Product(lhs_shape, dnums.lhs_batch_dimensions);
  const int64_t m = Product(lhs_shape, lhs_free);
  const int64_t k_size = Product(lhs_shape, dnums.lhs_contracting_dimensions);
  const int64_t n = Product(rhs_shape, rhs_free);

  Literal sum(shape_util::ChangeElementType(shape, accumulation.type));
  DispatchSupportedType(accumulation.type, [&]<PrimitiveType P>() {
    using T = NativeType<P>;
    if constexpr (kIsAccumulator<T>) {
      const T* a = lhs_matrix.data<T>().data();
      const T* b = rhs_matrix.data<T>().data();
      T* out = sum.data<T>().data();
      for (int64_t bi = 0; bi < batch; ++bi) {
        for (int64_t i = 0; i < m; ++i) {
          T* out_row = out + (bi * m + i) * n;
          const T* a_row = a + (bi * m + i) * k_size;
          for (int64_t k = 0; k < k_size; ++k) {
            const T* b_row = b + (bi * k_size + k) * n;
            for (int64_t j = 0; j < n; ++j) out_row[j] = MultiplyAdd(out_row[j], a_row[k], b_row[j]);
          }
        }
      }
    }
  });
  return ConvertLiteral(sum, shape.element_type());
}

StatusOr<Literal> HandleConvolution(const HloInstruction& instruction, const Literal& lhs,
                                    const Literal& rhs) {
  const Shape& shape = instruction.shape();
  const Shape& lhs_shape = lhs.shape();
  const Shape& rhs_shape = rhs.shape();
  if (!instruction.convolution_dimension_numbers || !instruction.window) {
    return Error("convolution needs dim_labels and a window");
  }
  const ConvolutionDimensionNumbers& dnums = *instruction.convolution_dimension_numbers;
  const Window& window = *instruction.window;
  const int64_t spatial = static_cast<int64_t>(dnums.input_spatial_dimensions.size());
  if (dnums.kernel_spatial_dimensions.size() != static_cast<size_t>(spatial) ||
      dnums.output_spatial_dimensions.size() != static_cast<size_t>(spatial) ||
      window.dimensions.size() != static_cast<size_t>(spatial) || lhs_shape.rank() != spatial + 2 ||
      rhs_shape.rank() != spatial + 2 || shape.rank() != spatial + 2) {
    return Error(fmt::format("convolution with {} spatial dimensions over {} and {}", spatial,
                             lhs_shape.ToString(false), rhs_shape.ToString(false)));
  }
  std::vector<bool> lhs_used(spatial + 2, false), rhs_used(spatial + 2, false),
      out_used(spatial + 2, false);
  const int64_t input_dims[] = {dnums.input_batch_dimension, dnums.input_feature_dimension};
  const int64_t kernel_feature_dims[] = {dnums.kernel_input_feature_dimension,
                                         dnums.kernel_output_feature_dimension};
  const int64_t output_dims[] = {dnums.output_batch_dimension, dnums.output_feature_dimension};
  RETURN_IF_ERROR(CheckDimensionList(input_dims, spatial + 2, lhs_used, "input"));
  RETURN_IF_ERROR(CheckDimensionList(dnums.input_spatial_dimensions, spatial + 2, lhs_used, "input"));
  RETURN_IF_ERROR(CheckDimensionList(kernel_feature_dims, spatial + 2, rhs_used, "kernel"));
  RETURN_IF_ERROR(CheckDimensionList(dnums.kernel_spatial_dimensions, spatial + 2, rhs_used, "kernel"));
  RETURN_IF_ERROR(CheckDimensionList(output_dims, spatial + 2, out_used, "output"));
  RETURN_IF_ERROR(CheckDimensionList(dnums.output_spatial_dimensions, spatial + 2, out_used, "output"));

  const int64_t feature_groups = instruction.feature_group_count();
  const int64_t batch_groups = instruction.batch_group_count();
  const int64_t input_batch = lhs_shape.dimensions(dnums.input_batch_dimension);
  const int64_t input_features = lhs_shape.dimensions(dnums.input_feature_dimension);
  const int64_t output_features = rhs_shape.dimensions(dnums.kernel_output_feature_dimension);
  if (feature_groups < 1 || batch_groups < 1 || input_features % feature_groups != 0 ||
      output_features % feature_groups != 0 || output_features % batch_groups != 0 ||
      input_batch % batch_groups != 0 ||
      rhs_shape.dimensions(dnums.kernel_input_feature_dimension) != input_features / feature_groups) {
    return Error(fmt::format(
        "feature_group_count={} batch_group_count={} do not fit input {} and kernel {}",
        feature_groups, batch_groups, lhs_shape.ToString(false), rhs_shape.ToString(false)));
  }
  std::vector<int64_t> expected(spatial + 2);
  expected[dnums.output_batch_dimension] = input_batch / batch_groups;
  expected[dnums.output_feature_dimension] = output_features;
  std::vector<int64_t> kernel_sizes;
  for (int64_t i = 0; i < spatial; ++i) {
    const WindowDimension& w = window.dimensions[i];
    const int64_t kernel_size = rhs_shape.dimensions(dnums.kernel_spatial_dimensions[i]);
    if (w.size != kernel_size) {
      return Error(fmt::format("window size {} differs from kernel size {}", w.size, kernel_size));
    }
    kernel_sizes.push_back(kernel_size);
    ASSIGN_OR_RETURN(expected[dnums.output_spatial_dimensions[i]],
                     WindowedSize(lhs_shape.dimensions(dnums.input_spatial_dimensions[i]), w));
  }
  RETURN_IF_ERROR(ExpectDimensions(shape, expected, "convolution result"));

  ASSIGN_OR_RETURN(Accumulation accumulation, PrepareAccumulation(lhs, rhs, shape));
  Literal sum(shape_util::ChangeElementType(shape, accumulation.type));
  if (shape.num_elements() == 0) return ConvertLiteral(sum, shape.element_type());
  const std::vector<int64_t> lhs_strides = StridesOf(lhs_shape);
  const std::vector<int64_t> rhs_strides = StridesOf(rhs_shape);
  const int64_t input_group_size = input_features / feature_groups;
  const int64_t output_feature_group_size = output_features / feature_groups;
  const int64_t output_batch_group_size = output_features / batch_groups;
  const int64_t output_batch = input_batch / batch_groups;

  DispatchSupportedType(accumulation.type, [&]<PrimitiveType P>() {
    using T = NativeType<P>;
    if constexpr (kIsAccumulator<T>) {
      const T* a = accumulation.lhs.data<T>().data();
      const T* b = accumulation.rhs.data<T>().data();
      T* out = sum.data<T>().data();
      IndexCounter out_index(shape.dimensions());
      int64_t out_linear = 0;
      do {
        const std::vector<int64_t>& o = out_index.index();
        const int64_t feature = o[dnums.output_feature_dimension];
        const int64_t feature_group = feature / output_feature_group_size;
        // batch_group_count splits the input batch; output feature group g reads batch group g.
        const int64_t batch = (feature / output_batch_group_size) * output_batch +
                              o[dnums.output_batch_dimension];
        T accumulator{};
        IndexCounter kernel_index(kernel_sizes);
        do {
          int64_t lhs_offset = batch * lhs_strides[dnums.input_batch_dimension];
          int64_t rhs_offset = feature * rhs_strides[dnums.kernel_output_feature_dimension];
          bool in_bounds = true;
          for (int64_t i = 0; i < spatial; ++i) {
            const WindowDimension& w = window.dimensions[i];
            const int64_t k = kernel_index.index()[i];
            const int64_t dilated =
                o[dnums.output_spatial_dimensions[i]] * w.stride - w.padding_low + k * w.window_dilation;
            if (dilated < 0 || dilated % w.base_dilation != 0) {
              in_bounds = false;
              break;
            }
            const int64_t position = dilated / w.base_dilation;
            if (position >= lhs_shape.dimensions(dnums.input_spatial_dimensions[i])) {
              in_bounds = false;
              break;
            }
            lhs_offset += position * lhs_strides[dnums.input_spatial_dimensions[i]];
            rhs_offset += (w.window_reversal ? w.size - 1 - k : k) *
                          rhs_strides[dnums.kernel_spatial_dimensions[i]];
          }
          if (!in_bounds) continue;
          for (int64_t iz = 0; iz < input_group_size; ++iz) {
            const int64_t input_feature = feature_group * input_group_size + iz;
            accumulator = MultiplyAdd(
                accumulator, a[lhs_offset + input_feature * lhs_strides[dnums.input_feature_dimension]],
                b[rhs_offset + iz * rhs_strides[dnums.kernel_input_feature_dimension]]);
          }
        } while (kernel_index.Next());
        out[out_linear++] = accumulator;
      } while (out_index.Next());
    }
  });
  return ConvertLiteral(sum, shape.element_type());
}

}  // namespace xlens::evaluator_internal
