#include "compiler/passes/rng_bit_generator_expander.h"

#include <array>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "compiler/passes/hlo_creation_utils.h"

namespace xlens {
namespace {

constexpr PrimitiveType kU32 = PrimitiveType::U32;
constexpr PrimitiveType kU64 = PrimitiveType::U64;

// Builds the expansion of one rng-bit-generator in its computation.
class Expansion {
 public:
  Expansion(HloComputation* computation, HloInstruction* rng)
      : computation_(computation), rng_(rng), with_layout_(ValuesShape(*rng).has_layout()) {}

  static const Shape& ValuesShape(const HloInstruction& rng) {
    return rng.shape().IsTuple() ? rng.shape().tuple_shapes(1) : rng.shape();
  }

  // The (state, values) tuple, or the values alone where the op returns no state.
  HloInstruction* Replace(HloInstruction* state, HloInstruction* values) {
    if (!rng_->shape().IsTuple()) return values;
    auto tuple = std::make_unique<HloInstruction>(HloOpcode::kTuple, rng_->shape());
    tuple->AppendOperand(state);
    tuple->AppendOperand(values);
    return Add(std::move(tuple));
  }

  Shape MakeShape(PrimitiveType type, std::vector<int64_t> dims) const {
    Shape shape(type, std::move(dims));
    if (with_layout_) shape.SetDefaultLayout();
    return shape;
  }

  HloInstruction* Add(std::unique_ptr<HloInstruction> instruction) {
    instruction->metadata = rng_->metadata;
    return computation_->AddInstruction(std::move(instruction));
  }

  HloInstruction* Constant(PrimitiveType type, uint64_t value) {
    Literal literal(MakeShape(type, {}));
    if (type == kU64) {
      literal.data<uint64_t>()[0] = value;
    } else {
      literal.data<uint32_t>()[0] = static_cast<uint32_t>(value);
    }
    return Add(HloInstruction::CreateConstant(std::move(literal)));
  }

  // A scalar constant broadcast to the shape of `like`.
  HloInstruction* ConstantLike(HloInstruction* like, uint64_t value) {
    HloInstruction* scalar = Constant(like->shape().element_type(), value);
    return like->shape().rank() == 0 ? scalar : Broadcast(scalar, like->shape().dimensions());
  }

  HloInstruction* Broadcast(HloInstruction* scalar, std::vector<int64_t> dims) {
    return Add(
        CreateBroadcast(MakeShape(scalar->shape().element_type(), std::move(dims)), scalar, {}));
  }

  HloInstruction* Binary(HloOpcode opcode, HloInstruction* lhs, HloInstruction* rhs) {
    return Add(HloInstruction::CreateBinary(opcode, lhs->shape(), lhs, rhs));
  }
  HloInstruction* AddOp(HloInstruction* a, HloInstruction* b) {
    return Binary(HloOpcode::kAdd, a, b);
  }
  HloInstruction* Xor(HloInstruction* a, HloInstruction* b) {
    return Binary(HloOpcode::kXor, a, b);
  }

  HloInstruction* Convert(HloInstruction* operand, PrimitiveType type) {
    return Add(HloInstruction::CreateUnary(
        HloOpcode::kConvert, MakeShape(type, operand->shape().dimensions()), operand));
  }
  HloInstruction* BitcastConvert(HloInstruction* operand, PrimitiveType type) {
    return Add(HloInstruction::CreateUnary(
        HloOpcode::kBitcastConvert, MakeShape(type, operand->shape().dimensions()), operand));
  }
  HloInstruction* Reshape(HloInstruction* operand, std::vector<int64_t> dims) {
    return Add(HloInstruction::CreateUnary(
        HloOpcode::kReshape, MakeShape(operand->shape().element_type(), std::move(dims)),
        operand));
  }
  HloInstruction* Slice(HloInstruction* operand, std::vector<int64_t> starts,
                        std::vector<int64_t> limits) {
    std::vector<int64_t> dims;
    for (size_t d = 0; d < starts.size(); ++d) dims.push_back(limits[d] - starts[d]);
    auto slice = HloInstruction::CreateUnary(
        HloOpcode::kSlice, MakeShape(operand->shape().element_type(), dims), operand);
    slice->has_slice = true;
    slice->slice_starts = std::move(starts);
    slice->slice_limits = std::move(limits);
    slice->slice_strides.assign(dims.size(), 1);
    return Add(std::move(slice));
  }
  HloInstruction* Concatenate(std::vector<HloInstruction*> parts, int64_t dimension) {
    std::vector<int64_t> dims = parts[0]->shape().dimensions();
    dims[dimension] = 0;
    for (HloInstruction* part : parts) dims[dimension] += part->shape().dimensions(dimension);
    auto concat = std::make_unique<HloInstruction>(
        HloOpcode::kConcatenate, MakeShape(parts[0]->shape().element_type(), dims));
    for (HloInstruction* part : parts) concat->AppendOperand(part);
    concat->dimensions_attr = std::vector<int64_t>{dimension};
    return Add(std::move(concat));
  }
  HloInstruction* Iota(int64_t length) {
    auto iota = std::make_unique<HloInstruction>(HloOpcode::kIota, MakeShape(kU64, {length}));
    iota->iota_dimension_attr = 0;
    return Add(std::move(iota));
  }
  // The u64 scalar at `index` of the state.
  HloInstruction* StateWord(HloInstruction* state, int64_t index) {
    return Reshape(Slice(state, {index}, {index + 1}), {});
  }
  HloInstruction* ShiftRight(HloInstruction* v, uint64_t bits) {
    return Binary(HloOpcode::kShiftRightLogical, v, ConstantLike(v, bits));
  }
  HloInstruction* ShiftLeft(HloInstruction* v, uint64_t bits) {
    return Binary(HloOpcode::kShiftLeft, v, ConstantLike(v, bits));
  }
  // The low and high u32 halves of u64s.
  std::array<HloInstruction*, 2> Split(HloInstruction* v) {
    return {Convert(v, kU32), Convert(ShiftRight(v, 32), kU32)};
  }
  HloInstruction* Join(HloInstruction* low, HloInstruction* high) {
    return Binary(HloOpcode::kOr, Convert(low, kU64), ShiftLeft(Convert(high, kU64), 32));
  }
  // a + b on u64 with the carry into `high`: (a + b, high + (a + b < a)).
  std::array<HloInstruction*, 2> AddWithCarry(HloInstruction* low, HloInstruction* delta,
                                              HloInstruction* high) {
    HloInstruction* sum = AddOp(low, delta);
    auto compare = HloInstruction::CreateBinary(
        HloOpcode::kCompare, MakeShape(PrimitiveType::PRED, sum->shape().dimensions()), sum, low);
    compare->comparison_direction = ComparisonDirection::kLt;
    HloInstruction* carry = Add(std::move(compare));
    HloInstruction* high_plus_one = AddOp(high, ConstantLike(high, 1));
    return {sum, Add(CreateSelect(carry, high_plus_one, high))};
  }

  // u32 words (flat, of `length`) into the values' type and shape.
  HloInstruction* Finish(HloInstruction* bits, const Shape& values) {
    const int width = ByteWidth(values.element_type());
    PrimitiveType unsigned_type = width == 8   ? kU64
                                  : width == 4 ? kU32
                                  : width == 2 ? PrimitiveType::U16
                                               : PrimitiveType::U8;
    if (bits->shape().element_type() != unsigned_type) bits = Convert(bits, unsigned_type);
    bits = Reshape(bits, values.dimensions());
    if (unsigned_type != values.element_type()) bits = BitcastConvert(bits, values.element_type());
    return bits;
  }

  std::array<HloInstruction*, 4> Philox(std::array<HloInstruction*, 4> x,
                                        std::array<HloInstruction*, 2> key) {
    for (int round = 0; round < 10; ++round) {
      HloInstruction* p0 = Binary(HloOpcode::kMultiply, Convert(x[0], kU64),
                                  ConstantLike(Convert(x[0], kU64), 0xD2511F53u));
      HloInstruction* p1 = Binary(HloOpcode::kMultiply, Convert(x[2], kU64),
                                  ConstantLike(Convert(x[2], kU64), 0xCD9E8D57u));
      x = {Xor(Xor(Convert(ShiftRight(p1, 32), kU32), x[1]), key[0]), Convert(p1, kU32),
           Xor(Xor(Convert(ShiftRight(p0, 32), kU32), x[3]), key[1]), Convert(p0, kU32)};
      key = {AddOp(key[0], ConstantLike(key[0], 0x9E3779B9u)),
             AddOp(key[1], ConstantLike(key[1], 0xBB67AE85u))};
    }
    return x;
  }

  std::array<HloInstruction*, 2> ThreeFry(std::array<HloInstruction*, 2> x,
                                          std::array<HloInstruction*, 2> key) {
    constexpr int kRotations[8] = {13, 15, 26, 6, 17, 29, 16, 24};
    HloInstruction* ks[3] = {key[0], key[1],
                             Xor(Xor(ConstantLike(key[0], 0x1BD11BDAu), key[0]), key[1])};
    x = {AddOp(x[0], ks[0]), AddOp(x[1], ks[1])};
    for (int group = 0; group < 5; ++group) {
      for (int r = 0; r < 4; ++r) {
        const int rotation = kRotations[(group % 2) * 4 + r];
        x[0] = AddOp(x[0], x[1]);
        x[1] = Binary(HloOpcode::kOr, ShiftLeft(x[1], rotation), ShiftRight(x[1], 32 - rotation));
        x[1] = Xor(x[1], x[0]);
      }
      x[0] = AddOp(x[0], ks[(group + 1) % 3]);
      x[1] = AddOp(AddOp(x[1], ks[(group + 2) % 3]), ConstantLike(x[1], group + 1));
    }
    return x;
  }

  HloInstruction* ExpandPhilox(HloInstruction* state, const Shape& values) {
    const int64_t n = state->shape().dimensions(0);
    const int64_t count = values.num_elements();
    const bool wide = ByteWidth(values.element_type()) == 8;
    const int64_t per_block = wide ? 2 : 4;
    const int64_t blocks = (count + per_block - 1) / per_block;
    HloInstruction* key = StateWord(state, 0);
    HloInstruction* low = StateWord(state, 1);
    HloInstruction* high = n >= 3 ? StateWord(state, 2) : key;
    std::array<HloInstruction*, 2> key_words = Split(key);
    for (HloInstruction*& word : key_words) word = Broadcast(word, {blocks});
    auto [block_low, block_high] =
        AddWithCarry(Broadcast(low, {blocks}), Iota(blocks), Broadcast(high, {blocks}));
    auto l = Split(block_low);
    auto h = Split(block_high);
    std::array<HloInstruction*, 4> words = Philox({l[0], l[1], h[0], h[1]}, key_words);
    std::vector<HloInstruction*> columns;
    if (wide) {
      columns = {Join(words[0], words[1]), Join(words[2], words[3])};
    } else {
      columns.assign(words.begin(), words.end());
    }
    for (HloInstruction*& column : columns) column = Reshape(column, {blocks, 1});
    HloInstruction* bits = Reshape(Concatenate(columns, 1), {blocks * per_block});
    if (blocks * per_block != count) bits = Slice(bits, {0}, {count});
    auto [new_low, new_high] = AddWithCarry(low, Constant(kU64, blocks), high);
    std::vector<HloInstruction*> new_state = {Reshape(key, {1}), Reshape(new_low, {1})};
    if (n >= 3) new_state.push_back(Reshape(new_high, {1}));
    return Replace(Concatenate(new_state, 0), Finish(bits, values));
  }

  HloInstruction* ExpandThreeFry(HloInstruction* state, const Shape& values) {
    const std::vector<int64_t>& dims = values.dimensions();
    const bool wide = ByteWidth(values.element_type()) == 8;
    HloInstruction* key = StateWord(state, 0);
    HloInstruction* counter = StateWord(state, 1);
    std::array<HloInstruction*, 2> key_words = Split(key);
    // The runs: one per element (64-bit values) or per element of the halved shape.
    int64_t split = -1;
    std::vector<int64_t> half = dims;
    if (!wide && !dims.empty()) {
      for (size_t d = 0; d < dims.size() && split < 0; ++d) {
        if (dims[d] % 2 == 0) split = static_cast<int64_t>(d);
      }
      if (split < 0) {
        for (size_t d = 0; d < dims.size(); ++d) {
          if (split < 0 || dims[d] > dims[split]) split = static_cast<int64_t>(d);
        }
      }
      half[split] = (dims[split] + 1) / 2;
    }
    int64_t runs = 1;
    for (int64_t d : half) runs *= d;
    for (HloInstruction*& word : key_words) word = Broadcast(word, {runs});
    HloInstruction* inputs = AddOp(Broadcast(counter, {runs}), Iota(runs));
    std::array<HloInstruction*, 2> words = ThreeFry(Split(inputs), key_words);
    HloInstruction* bits;
    if (wide) {
      bits = Join(words[0], words[1]);
    } else if (dims.empty()) {
      bits = words[0];
    } else {
      // [.., ceil(d/2), 1, ..] twice, side by side, then [.., 2 ceil(d/2), ..], cut to d.
      std::vector<int64_t> pair_dims = half;
      pair_dims.insert(pair_dims.begin() + split + 1, 1);
      HloInstruction* joined = Concatenate(
          {Reshape(words[0], pair_dims), Reshape(words[1], pair_dims)}, split + 1);
      std::vector<int64_t> even = dims;
      even[split] = half[split] * 2;
      bits = Reshape(joined, even);
      if (even[split] != dims[split]) {
        bits = Slice(bits, std::vector<int64_t>(dims.size(), 0), dims);
      }
      bits = Reshape(bits, {values.num_elements()});
    }
    HloInstruction* new_counter = AddOp(counter, Constant(kU64, runs));
    HloInstruction* new_state = Concatenate({Reshape(key, {1}), Reshape(new_counter, {1})}, 0);
    return Replace(new_state, Finish(bits, values));
  }

 private:
  HloComputation* computation_;
  HloInstruction* rng_;
  bool with_layout_;
};

bool Expandable(const HloInstruction& rng, std::string_view algorithm) {
  if (rng.operand_count() != 1) return false;
  const Shape& state = rng.operand(0)->shape();
  const Shape& shape = rng.shape();
  if ((shape.IsTuple() && shape.tuple_shapes_size() != 2) || !shape.is_static()) return false;
  if (!state.IsArray() || state.element_type() != kU64 || state.rank() != 1) return false;
  const int64_t n = state.dimensions(0);
  const bool philox = algorithm == "rng_philox" || algorithm == "rng_default";
  if (philox ? (n < 2 || n > 3) : (algorithm != "rng_three_fry" || n != 2)) return false;
  const Shape& values = Expansion::ValuesShape(rng);
  if (!values.IsArray()) return false;
  switch (values.element_type()) {
    case PrimitiveType::U8: case PrimitiveType::S8: case PrimitiveType::U16:
    case PrimitiveType::S16: case PrimitiveType::F16: case PrimitiveType::BF16:
    case PrimitiveType::U32: case PrimitiveType::S32: case PrimitiveType::F32:
    case PrimitiveType::U64: case PrimitiveType::S64: case PrimitiveType::F64:
      return true;
    default:
      return false;
  }
}

}  // namespace

StatusOr<bool> RngBitGeneratorExpander::Run(HloModule& module) {
  bool changed = false;
  for (HloComputation* computation : module.computations()) {
    if (computation->IsFusionComputation()) continue;
    for (HloInstruction* instruction : computation->MakeInstructionPostOrder()) {
      if (instruction->opcode() != HloOpcode::kRngBitGenerator) continue;
      const std::string* text = instruction->raw_attribute("algorithm");
      const std::string algorithm = text ? *text : "rng_default";
      if (!Expandable(*instruction, algorithm)) continue;
      Expansion expansion(computation, instruction);
      const Shape values = Expansion::ValuesShape(*instruction);
      HloInstruction* state = instruction->operand(0);
      HloInstruction* replacement = algorithm == "rng_three_fry"
                                        ? expansion.ExpandThreeFry(state, values)
                                        : expansion.ExpandPhilox(state, values);
      const std::string name = instruction->name();
      RETURN_IF_ERROR(computation->ReplaceInstruction(instruction, replacement).WithContext(name));
      changed = true;
    }
  }
  return changed;
}

}  // namespace xlens
