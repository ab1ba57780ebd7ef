// The second product of causally masked attention, probabilities @ values, over the part of its
// contraction where the probabilities can be nonzero (Impl::contraction_blocks in
// onednn_thunk_parts.h). Softmax over scores select(mask, s, -1e9) gives each masked column of
// row r the value exp(-1e9 - max_r) / sum_r, the same for every masked column of the row, and 0
// unless every score of the row is itself near -1e9. The compiler knows which columns those are
// (product_mask.h: RowUniformOutsideColumns) but not the value, so every call checks it: one
// element a row. Then row r of the product adds 0 * v[j] = +-0 for each masked column j, which
// changes no sum (but a sum of -0, to +0) where v[j] is finite, checked too: the last non-finite
// row of each batch element's values. The same terms are then summed, but not always grouped
// the same way: a shorter block runs on another kernel (gemm:jit) than the whole product
// (brgemm), which splits the contraction its own way. On the benchmark's 8x512x64 inputs the
// rows contracted over at most 384 columns came out bit for bit as the whole product's; in rows
// 384-511, 11% of all outputs differed, by 8.2e-8 at most. The tests compare with the evaluator
// at the products' usual tolerance, as for any other blocking.
#ifdef XLENS_HAVE_ONEDNN
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "compiler/runtime/onednn_thunk_parts.h"
#include "compiler/runtime/product_mask.h"
#include "compiler/support/cpu_features.h"

namespace xlens::runtime {

using namespace onednn_detail;

namespace {

// Whether the float with these bits is an infinity or a NaN.
inline bool NotFinite(uint32_t bits) { return (bits & 0x7f800000u) == 0x7f800000u; }

// Whether one of x[0, count) is an infinity or a NaN: its exponent's bits all ones, plus one in
// the exponent, carry into the sign bit. In 16 lanes, which the compiler keeps in vectors at -O2;
// a compare per float stayed scalar, and the benchmark's call (8x512x64) took best 502-542 us
// with it against 473-479 (3 alternating rounds of 300 runs, load 3-3.5).
bool AnyNotFiniteScalar(const float* x, int64_t count) {
  uint32_t lanes[16] = {};
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) {
    uint32_t bits[16];
    std::memcpy(bits, x + i, sizeof(bits));
    for (int l = 0; l < 16; ++l) lanes[l] |= (bits[l] & 0x7f800000u) + 0x00800000u;
  }
  uint32_t all = 0;
  for (; i < count; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, sizeof(bits));
    all |= (bits & 0x7f800000u) + 0x00800000u;
  }
  for (int l = 0; l < 16; ++l) all |= lanes[l];
  return (all & 0x80000000u) != 0;
}

#if defined(__x86_64__)
// A lane's exponent plus one in the exponent: the sign bit set where it was all ones.
__attribute__((target("avx512f"), always_inline)) inline __m512i ExponentCarry(__m512i bits) {
  return _mm512_add_epi32(_mm512_and_si512(bits, _mm512_set1_epi32(0x7f800000)), _mm512_set1_epi32(0x00800000));
}

// AnyNotFiniteScalar in AVX-512 registers, four vectors a step, the last of fewer than 16 floats
// a masked load. GCC's -O2 code for the scalar version (SSE, its lanes and each step's bits
// stored to the stack and loaded back) made the check of causal attention's values (8x448x64
// floats a call) 3.0% of the f32[8,512,64] module's perf samples (1500 runs); 1.6% here, the
// rest mostly the values' reads, which the product then finds in cache.
__attribute__((target("avx512f"))) bool AnyNotFiniteAvx512(const float* x, int64_t count) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 64 <= count; i += 64) {
    a0 = _mm512_or_si512(a0, ExponentCarry(_mm512_loadu_si512(x + i)));
    a1 = _mm512_or_si512(a1, ExponentCarry(_mm512_loadu_si512(x + i + 16)));
    a2 = _mm512_or_si512(a2, ExponentCarry(_mm512_loadu_si512(x + i + 32)));
    a3 = _mm512_or_si512(a3, ExponentCarry(_mm512_loadu_si512(x + i + 48)));
  }
  for (; i < count; i += 16) {
    const __mmask16 in = count - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (count - i)) - 1);
    a0 = _mm512_or_si512(a0, ExponentCarry(_mm512_maskz_loadu_epi32(in, x + i)));  // 0 is finite
  }
  const __m512i all = _mm512_or_si512(_mm512_or_si512(a0, a1), _mm512_or_si512(a2, a3));
  return _mm512_test_epi32_mask(all, _mm512_set1_epi32(static_cast<int>(0x80000000u))) != 0;
}
#endif

bool AnyNotFinite(const float* x, int64_t count) {
#if defined(__x86_64__)
  if (CpuHasAvx512F()) return AnyNotFiniteAvx512(x, count);
#endif
  return AnyNotFiniteScalar(x, count);
}

// The last of rows [from, k) of a [k, n] matrix (row-major, or stored transposed: [n, k]) that
// holds an infinity or a NaN, or from - 1 where none does.
int64_t LastNonFiniteRow(const float* matrix, int64_t k, int64_t n, bool transposed, int64_t from) {
  if (!transposed) {
    if (!AnyNotFinite(matrix + from * n, (k - from) * n)) return from - 1;
    for (int64_t r = k - 1; r >= from; --r) {
      if (AnyNotFinite(matrix + r * n, n)) return r;
    }
    return from - 1;
  }
  int64_t last = from - 1;
  for (int64_t c = 0; c < n; ++c) {
    for (int64_t r = k - 1; r > last; --r) {
      uint32_t bits;
      std::memcpy(&bits, matrix + c * k + r, sizeof(bits));
      if (NotFinite(bits)) {
        last = r;
        break;
      }
    }
  }
  return last;
}

// Blocks of this many rows, each contracted up to its last row's end rounded up to a vector: a
// causal 512x512 in 8 blocks computes 36/64 = 56% of the multiply-adds.
constexpr int64_t kContractionBlockRows = 64, kContractionAlign = 16;

}  // namespace

bool OneDnnThunk::Impl::BuildMaskedContraction(
    const HloInstruction& fusion, const OneDnnCall& call, int64_t m, int64_t k, int64_t n, bool rhs_transposed,
    const std::function<dnnl::primitive_attr(const std::vector<dnnl::memory::desc>&)>& attributes) {
  const HloInstruction& core = *call.core;
  // A part per batch element, so as many as the pool has threads (as the masked scores' packed
  // keys, onednn_thunks.cc).
  if (batch < ThreadPool::Default().parallelism() || call.lhs_transposed || !call.post_ops.empty() || call.lhs_offset != 0 || fusion.fused_computation() == nullptr ||
      core.operand(0) != fusion.fused_computation()->parameter_instruction(call.lhs_parameter)) {
    return false;
  }
  const HloInstruction& producer = *fusion.operand(call.lhs_parameter);
  if (producer.shape().dimensions() != core.operand(0)->shape().dimensions() ||
      producer.shape().num_elements() != batch * m * k) {
    return false;
  }
  std::optional<std::vector<ColumnRange>> ranges = RowUniformOutsideColumns(producer);
  if (!ranges || static_cast<int64_t>(ranges->size()) != m) return false;
  std::vector<ContractionBlock> blocks;
  int64_t computed = 0, checked_from = k;
  for (int64_t r0 = 0; r0 < m; r0 += kContractionBlockRows) {
    const int64_t rows = std::min(kContractionBlockRows, m - r0);
    int64_t end = 0;
    for (int64_t r = r0; r < r0 + rows; ++r) end = std::max(end, (*ranges)[r].end);
    end = std::min(k, std::max(kContractionAlign, (end + kContractionAlign - 1) / kContractionAlign * kContractionAlign));
    blocks.push_back({r0, rows, end});
    computed += rows * end;
    checked_from = std::min(checked_from, end);
  }
  if (4 * computed > 3 * m * k) return false;  // not worth the checks and the calls
  std::map<std::pair<int64_t, int64_t>, Part> built;
  std::string kernel;
  for (const ContractionBlock& b : blocks) {
    for (int64_t extent : {b.k_end, k}) {  // and the whole contraction, for a check that fails
      if (built.count({b.rows, extent})) continue;
      Part part;
      part.src = dnnl::memory::desc({b.rows, extent}, dt::f32, dims{k, 1});
      part.weights = dnnl::memory::desc({extent, n}, dt::f32, rhs_transposed ? dims{1, k} : dims{n, 1});
      part.dst = dnnl::memory::desc({b.rows, n}, dt::f32, dims{n, 1});
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(part.src, part.weights, part.dst), attributes({}),
                                      CpuEngine());
      const std::string name = pd.impl_info_str();
      if (name.rfind("ref", 0) == 0) return false;
      if (extent == b.k_end && kernel.empty()) kernel = name;
      part.primitive = dnnl::matmul(pd);
      part.scratchpad = pd.scratchpad_desc();
      built.emplace(std::make_pair(b.rows, extent), std::move(part));
    }
  }
  contraction_parts = std::move(built);
  contraction_blocks = std::move(blocks);
  this->blocks = static_cast<int64_t>(contraction_blocks.size());
  contraction_k = k;
  contraction_n = n;
  contraction_checked_from = checked_from;
  contraction_share = static_cast<double>(computed) / static_cast<double>(m * k);
  implementation = kernel;
  return true;
}

// Each batch element is a part, which runs its blocks of rows one after the other, each
// contracted over its k_end columns where the checks pass, else over all of them.
Status OneDnnThunk::Impl::ExecuteMaskedContraction(char** frame, ExecuteContext& context,
                                                   const std::string& name) const {
  const int64_t k = contraction_k, n = contraction_n;
  const float* lhs = Lhs(frame);
  const float* rhs = Rhs(frame);
  float* output = reinterpret_cast<float*>(frame[output_slot]);
  return RunPerBatchElement(context, name, [&](int64_t b, dnnl::stream& stream) {
    const float* values = rhs + b * weights_step;
    // The values' last non-finite row from contraction_checked_from on, looked for once.
    std::optional<int64_t> last_non_finite;
    for (size_t i = 0; i < contraction_blocks.size(); ++i) {
      const ContractionBlock& block = contraction_blocks[i];
      const float* block_lhs = lhs + b * src_step + block.row * k;
      int64_t extent = block.k_end;
      for (int64_t r = 0; r < block.rows && extent < k; ++r) {
        if (block_lhs[r * k + k - 1] != 0.0f) extent = k;  // the row's value past its columns
      }
      if (extent < k) {
        if (!last_non_finite) {
          last_non_finite = LastNonFiniteRow(values, k, n, weights_column_step != 1, contraction_checked_from);
        }
        if (*last_non_finite >= extent) extent = k;
      }
      const Part& part = contraction_parts.at({block.rows, extent});
      std::unordered_map<int, dnnl::memory>& args = KeptArguments(&name, static_cast<int64_t>(i));
      BindArgument(args, DNNL_ARG_SRC, part.src, const_cast<float*>(block_lhs));
      BindArgument(args, DNNL_ARG_WEIGHTS, part.weights, const_cast<float*>(values));
      BindArgument(args, DNNL_ARG_DST, part.dst, output + b * dst_step + block.row * n);
      thread_local std::vector<char> scratchpad;
      if (scratchpad.size() < part.scratchpad.get_size()) scratchpad.resize(part.scratchpad.get_size());
      BindArgument(args, DNNL_ARG_SCRATCHPAD, part.scratchpad, scratchpad.data());
      part.primitive.execute(stream, args);
      stream.wait();
    }
  });
}

}  // namespace xlens::runtime

#endif  // XLENS_HAVE_ONEDNN
