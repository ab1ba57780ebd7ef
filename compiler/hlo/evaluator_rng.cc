// rng-bit-generator, with the bits XLA's CPU and GPU backends give it (checked against jaxlib).
//
// XLA expands the op (RngBitGeneratorExpander over xla/hlo/builder/lib/prng.cc); this is that
// expansion written plainly. The state operand is u64[n]: state[0] is the key; the rest is the
// counter, read per algorithm:
//   * philox (rng_default on CPU and GPU): a 128-bit counter, low word state[1], high word
//     state[2] when n >= 3, else state[0] (the key itself: XLA reverses a u64[2] state). Each
//     Philox-4x32-10 block i runs on counter + i and gives four u32 outputs, element 4i+j taking
//     word j; a 64-bit element takes two words, element 2i+k = word 2k | word 2k+1 << 32. The
//     new state is the key, then counter + blocks: (low, high) for n >= 3, low alone for n = 2.
//   * three_fry: a 64-bit counter state[1] (n must be 2). A 64-bit element at linear index i
//     is ThreeFry-2x32-20 on counter + i, word 0 | word 1 << 32. A 32-bit element halves the
//     work: the shape is split at its first even dimension (the largest one when none is even),
//     counter + h runs for every index h of the halved shape, and the two output words fill the
//     even and odd coordinates of the split dimension. The new state is (key, counter + runs).
// Narrower elements take the low bits of the 32-bit ones.
#include <algorithm>
#include <array>

#include "compiler/hlo/evaluator_internal.h"

namespace xlens::evaluator_internal {
namespace {

using Words4 = std::array<uint32_t, 4>;
using Words2 = std::array<uint32_t, 2>;

Words4 Philox4x32(Words4 x, Words2 key) {
  constexpr uint32_t kMulA = 0xD2511F53, kMulB = 0xCD9E8D57;
  constexpr uint32_t kWeylA = 0x9E3779B9, kWeylB = 0xBB67AE85;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{x[0]} * kMulA;
    const uint64_t p1 = uint64_t{x[2]} * kMulB;
    x = {static_cast<uint32_t>(p1 >> 32) ^ x[1] ^ key[0], static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ x[3] ^ key[1], static_cast<uint32_t>(p0)};
    key = {key[0] + kWeylA, key[1] + kWeylB};
  }
  return x;
}

uint32_t Rotl(uint32_t v, int distance) { return (v << distance) | (v >> (32 - distance)); }

Words2 ThreeFry2x32(Words2 x, Words2 key) {
  constexpr int kRotations[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  const uint32_t ks[3] = {key[0], key[1], 0x1BD11BDAu ^ key[0] ^ key[1]};
  x[0] += ks[0];
  x[1] += ks[1];
  for (int group = 0; group < 5; ++group) {
    for (int r = 0; r < 4; ++r) {
      x[0] += x[1];
      x[1] = Rotl(x[1], kRotations[(group % 2) * 4 + r]);
      x[1] ^= x[0];
    }
    x[0] += ks[(group + 1) % 3];
    x[1] += ks[(group + 2) % 3] + static_cast<uint32_t>(group + 1);
  }
  return x;
}

Words2 Split(uint64_t v) { return {static_cast<uint32_t>(v), static_cast<uint32_t>(v >> 32)}; }
uint64_t Join(uint32_t low, uint32_t high) { return uint64_t{low} | (uint64_t{high} << 32); }

// Stores the low `width` bytes of `bits` as element `index` of `out`.
void Store(uint8_t* out, int64_t width, int64_t index, uint64_t bits) {
  switch (width) {
    case 1: out[index] = static_cast<uint8_t>(bits); break;
    case 2: { uint16_t v = static_cast<uint16_t>(bits); std::memcpy(out + index * 2, &v, 2); break; }
    case 4: { uint32_t v = static_cast<uint32_t>(bits); std::memcpy(out + index * 4, &v, 4); break; }
    default: std::memcpy(out + index * 8, &bits, 8); break;
  }
}

// Fills `out` and returns the new state.
std::vector<uint64_t> Philox(std::span<const uint64_t> state, const Shape& shape, uint8_t* out) {
  const int64_t count = shape.num_elements();
  const int64_t width = ByteWidth(shape.element_type());
  const Words2 key = Split(state[0]);
  const uint64_t low = state[1];
  const uint64_t high = state.size() >= 3 ? state[2] : state[0];
  const int64_t per_block = width == 8 ? 2 : 4;
  const int64_t blocks = (count + per_block - 1) / per_block;
  for (int64_t i = 0; i < blocks; ++i) {
    const uint64_t block_low = low + static_cast<uint64_t>(i);
    const uint64_t block_high = high + (block_low < low ? 1 : 0);
    const Words2 l = Split(block_low), h = Split(block_high);
    const Words4 words = Philox4x32({l[0], l[1], h[0], h[1]}, key);
    for (int64_t j = 0; j < per_block && i * per_block + j < count; ++j) {
      const uint64_t bits = width == 8 ? Join(words[2 * j], words[2 * j + 1]) : words[j];
      Store(out, width, i * per_block + j, bits);
    }
  }
  const uint64_t new_low = low + static_cast<uint64_t>(blocks);
  std::vector<uint64_t> result = {state[0], new_low};
  if (state.size() >= 3) result.push_back(high + (new_low < low ? 1 : 0));
  return result;
}

std::vector<uint64_t> ThreeFry(std::span<const uint64_t> state, const Shape& shape,
                               uint8_t* out) {
  const int64_t count = shape.num_elements();
  const int64_t width = ByteWidth(shape.element_type());
  const Words2 key = Split(state[0]);
  const uint64_t counter = state[1];
  if (width == 8) {
    for (int64_t i = 0; i < count; ++i) {
      const Words2 w = ThreeFry2x32(Split(counter + static_cast<uint64_t>(i)), key);
      Store(out, width, i, Join(w[0], w[1]));
    }
    return {state[0], counter + static_cast<uint64_t>(count)};
  }
  // The halved shape: split dimension d of size s becomes ceil(s / 2).
  std::vector<int64_t> dims(shape.dimensions().begin(), shape.dimensions().end());
  int64_t split = -1;
  for (size_t d = 0; d < dims.size() && split < 0; ++d) {
    if (dims[d] % 2 == 0) split = static_cast<int64_t>(d);
  }
  if (split < 0) {
    for (size_t d = 0; d < dims.size(); ++d) {
      if (split < 0 || dims[d] > dims[split]) split = static_cast<int64_t>(d);
    }
  }
  if (dims.empty()) {
    // A scalar: one run, its first word.
    Store(out, width, 0, ThreeFry2x32(Split(counter), key)[0]);
    return {state[0], counter + 1};
  }
  std::vector<int64_t> half = dims;
  half[split] = (dims[split] + 1) / 2;
  int64_t runs = 1;
  for (int64_t d : half) runs *= d;
  // Row-major strides of both shapes.
  std::vector<int64_t> half_strides(dims.size(), 1), strides(dims.size(), 1);
  for (int64_t d = static_cast<int64_t>(dims.size()) - 2; d >= 0; --d) {
    half_strides[d] = half_strides[d + 1] * half[d + 1];
    strides[d] = strides[d + 1] * dims[d + 1];
  }
  if (count > 0) {
    IndexCounter index(dims);
    do {
      int64_t h = 0, linear = 0;
      for (size_t d = 0; d < dims.size(); ++d) {
        const int64_t coordinate = index.index()[d];
        h += (static_cast<int64_t>(d) == split ? coordinate / 2 : coordinate) * half_strides[d];
        linear += coordinate * strides[d];
      }
      const Words2 w = ThreeFry2x32(Split(counter + static_cast<uint64_t>(h)), key);
      Store(out, width, linear, w[index.index()[split] % 2]);
    } while (index.Next());
  }
  return {state[0], counter + static_cast<uint64_t>(runs)};
}

}  // namespace

StatusOr<Literal> HandleRngBitGenerator(const HloInstruction& instruction,
                                        const Literal& state) {
  const Shape& shape = instruction.shape();
  const Shape& values_shape = shape.IsTuple() && shape.tuple_shapes_size() == 2
                                  ? shape.tuple_shapes(1)
                                  : shape;
  const Shape& state_shape = state.shape();
  if (!state_shape.IsArray() || state_shape.element_type() != PrimitiveType::U64 ||
      state_shape.rank() != 1 || state_shape.dimensions(0) < 2) {
    return Error(fmt::format("rng-bit-generator's state must be u64[n] with n >= 2, not {}",
                             state_shape.ToString(false)));
  }
  bool generable = false;
  if (values_shape.IsArray()) {
    switch (values_shape.element_type()) {
      case PrimitiveType::U8: case PrimitiveType::S8: case PrimitiveType::U16:
      case PrimitiveType::S16: case PrimitiveType::F16: case PrimitiveType::BF16:
      case PrimitiveType::U32: case PrimitiveType::S32: case PrimitiveType::F32:
      case PrimitiveType::U64: case PrimitiveType::S64: case PrimitiveType::F64:
        generable = true;
        break;
      default:
        break;
    }
  }
  if (!generable) {
    return Error(fmt::format("rng-bit-generator of {}: values must be an array of 8- to 64-bit "
                             "integers or floats",
                             values_shape.ToString(false)));
  }
  const std::string* algorithm_text = instruction.raw_attribute("algorithm");
  const std::string algorithm = algorithm_text ? *algorithm_text : "rng_default";
  const int64_t n = state_shape.dimensions(0);
  const std::span<const uint64_t> words = state.data<uint64_t>();
  Literal values(values_shape);
  std::vector<uint64_t> new_state;
  if (algorithm == "rng_philox" || algorithm == "rng_default") {
    if (n > 3) {
      return Error(fmt::format("rng-bit-generator with rng_philox takes a u64[2] or u64[3] "
                               "state, not u64[{}]", n));
    }
    new_state = Philox(words, values_shape, values.untyped_data());
  } else if (algorithm == "rng_three_fry") {
    if (n != 2) {
      return Error(fmt::format("rng-bit-generator with rng_three_fry takes a u64[2] state, "
                               "not u64[{}]", n));
    }
    new_state = ThreeFry(words, values_shape, values.untyped_data());
  } else {
    return Error(fmt::format("rng-bit-generator with algorithm={}: expected rng_default, "
                             "rng_philox or rng_three_fry", algorithm));
  }
  if (!shape.IsTuple()) return values;
  Literal next(state_shape);
  std::copy(new_state.begin(), new_state.end(), next.data<uint64_t>().begin());
  std::vector<Literal> elements;
  elements.push_back(std::move(next));
  elements.push_back(std::move(values));
  return Literal::MakeTuple(std::move(elements));
}

}  // namespace xlens::evaluator_internal
