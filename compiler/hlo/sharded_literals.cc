#include "compiler/hlo/sharded_literals.h"

#include <cstring>
#include <functional>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/hlo/computation.h"
#include "compiler/hlo/instruction.h"
#include "compiler/hlo/primitive_type.h"

namespace xlens {
namespace {

std::string DimsText(const std::vector<int64_t>& dims) { return fmt::format("[{}]", fmt::join(dims, ",")); }

// Copies the box of `sizes` elements at `src_offsets` in a row-major array of `src_dims` to
// `dst_offsets` in one of `dst_dims` (bytes of `width` per element), a row at a time.
void CopyBox(const uint8_t* src, const std::vector<int64_t>& src_dims,
             const std::vector<int64_t>& src_offsets, uint8_t* dst,
             const std::vector<int64_t>& dst_dims, const std::vector<int64_t>& dst_offsets,
             const std::vector<int64_t>& sizes, int64_t width) {
  const size_t rank = sizes.size();
  for (int64_t s : sizes) {
    if (s == 0) return;
  }
  if (rank == 0) {
    std::memcpy(dst, src, static_cast<size_t>(width));
    return;
  }
  std::vector<int64_t> index(rank, 0);  // within the box; the last dim is copied whole
  const size_t row_bytes = static_cast<size_t>(sizes[rank - 1] * width);
  while (true) {
    int64_t src_linear = 0;
    int64_t dst_linear = 0;
    for (size_t i = 0; i < rank; ++i) {
      src_linear = src_linear * src_dims[i] + src_offsets[i] + index[i];
      dst_linear = dst_linear * dst_dims[i] + dst_offsets[i] + index[i];
    }
    std::memcpy(dst + dst_linear * width, src + src_linear * width, row_bytes);
    size_t d = rank - 1;
    while (d-- > 0) {
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
    }
    if (d == static_cast<size_t>(-1)) return;
  }
}

Status CheckCopyable(const Literal& literal, std::string_view what) {
  if (literal.is_elided() || literal.is_text_only()) {
    return Error(fmt::format("{} has no data (an elided or text-only literal)", what));
  }
  if (literal.shape().IsArray() && !literal.shape().is_static()) {
    return Error(fmt::format("{} has a dynamic shape {}", what, literal.shape().ToString(false)));
  }
  return OkStatus();
}

Status CheckSplittable(const HloSharding& sharding) {
  if (sharding.IsManual() || sharding.kind() == HloSharding::Kind::kUnknown) {
    return Error(fmt::format("sharding {} gives each device a value of its own: there is no "
                             "global value to split or assemble", sharding.ToString()));
  }
  for (HloSharding::Subgroup s : sharding.subgroups()) {
    if (s == HloSharding::Subgroup::kManual) {
      return Error(fmt::format("sharding {} has a manual subgroup: its devices hold values of "
                               "their own, not parts of one global value", sharding.ToString()));
    }
  }
  return OkStatus();
}

StatusOr<std::vector<Literal>> SplitArray(const Literal& global, const HloSharding& sharding,
                                          int64_t num_devices, TilePadding pad) {
  RETURN_IF_ERROR(CheckSplittable(sharding));
  const Shape& shape = global.shape();
  const std::vector<int64_t>& dims = shape.dimensions();
  const int64_t width = ByteWidth(shape.element_type());
  const std::vector<int64_t> tile = sharding.TileDims(dims);
  std::vector<Literal> out;
  for (int64_t device = 0; device < num_devices; ++device) {
    std::optional<HloSharding::Extent> extent = sharding.DeviceExtent(dims, device);
    if (!extent) {
      return Error(fmt::format("sharding {} places no tile on device {} of {}",
                               sharding.ToString(), device, num_devices));
    }
    std::vector<int64_t> sizes(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) sizes[i] = extent->limits[i] - extent->offsets[i];
    Literal piece(Shape(shape.element_type(), pad == TilePadding::kExact ? sizes : tile));
    CopyBox(global.untyped_data(), dims, extent->offsets, piece.untyped_data(),
            piece.shape().dimensions(), std::vector<int64_t>(dims.size(), 0), sizes, width);
    out.push_back(std::move(piece));
  }
  return out;
}

StatusOr<Literal> AssembleArray(const std::vector<Literal>& per_device, const HloSharding& sharding,
                                const Shape& shape, std::string_view what) {
  RETURN_IF_ERROR(CheckSplittable(sharding));
  const std::vector<int64_t>& dims = shape.dimensions();
  const int64_t width = ByteWidth(shape.element_type());
  const std::vector<int64_t> tile = sharding.TileDims(dims);
  Literal global(Shape(shape.element_type(), dims));
  // The first device that gave each box; later copies of the same box must match it.
  std::map<std::vector<int64_t>, int64_t> first_holder;
  for (size_t d = 0; d < per_device.size(); ++d) {
    const int64_t device = static_cast<int64_t>(d);
    if (sharding.IsMaximal() && device != sharding.device()) continue;
    const Literal& piece = per_device[d];
    const std::string name = fmt::format("device {}'s {}", device, what);
    RETURN_IF_ERROR(CheckCopyable(piece, name));
    std::optional<HloSharding::Extent> extent = sharding.DeviceExtent(dims, device);
    if (!extent) {
      return Error(fmt::format("sharding {} places no tile on device {}", sharding.ToString(),
                               device));
    }
    std::vector<int64_t> sizes(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) sizes[i] = extent->limits[i] - extent->offsets[i];
    const Shape& got = piece.shape();
    if (!got.IsArray() || got.element_type() != shape.element_type() ||
        (got.dimensions() != tile && got.dimensions() != sizes)) {
      return Error(fmt::format("{} has shape {}; expected {}{} (its tile of {} under {})", name,
                               got.ToString(false), PrimitiveTypeName(shape.element_type()),
                               DimsText(tile), shape.ToString(false), sharding.ToString()));
    }
    auto [it, first] = first_holder.emplace(extent->offsets, device);
    if (first) {
      CopyBox(piece.untyped_data(), got.dimensions(), std::vector<int64_t>(dims.size(), 0),
              global.untyped_data(), dims, extent->offsets, sizes, width);
      continue;
    }
    // A replica: its box must equal what the first holder wrote.
    Literal mine(Shape(shape.element_type(), sizes));
    Literal theirs(Shape(shape.element_type(), sizes));
    const std::vector<int64_t> zeros(dims.size(), 0);
    CopyBox(piece.untyped_data(), got.dimensions(), zeros, mine.untyped_data(), sizes, zeros, sizes,
            width);
    CopyBox(global.untyped_data(), dims, extent->offsets, theirs.untyped_data(), sizes, zeros,
            sizes, width);
    if (mine.size_bytes() != 0 &&
        std::memcmp(mine.untyped_data(), theirs.untyped_data(), mine.size_bytes()) != 0) {
      return Error(fmt::format("devices {} and {} disagree on the {} at offset {} although "
                               "sharding {} replicates it", it->second, device, what,
                               DimsText(extent->offsets), sharding.ToString()));
    }
  }
  if (sharding.IsMaximal() && sharding.device() >= static_cast<int64_t>(per_device.size())) {
    return Error(fmt::format("sharding {} names device {} but only {} devices gave a {}",
                             sharding.ToString(), sharding.device(), per_device.size(), what));
  }
  return global;
}

}  // namespace

StatusOr<std::vector<Literal>> SplitLiteral(const Literal& global, const HloSharding& sharding,
                                            int64_t num_devices, TilePadding pad) {
  if (num_devices < 1) return Error(fmt::format("cannot split over {} devices", num_devices));
  RETURN_IF_ERROR(CheckCopyable(global, "the global value"));
  RETURN_IF_ERROR(sharding.Validate(global.shape(), num_devices));
  if (!global.shape().IsTuple()) {
    if (!global.shape().IsArray()) return std::vector<Literal>(static_cast<size_t>(num_devices), global);
    return SplitArray(global, sharding, num_devices, pad);
  }
  // Leaf by leaf; per device, the leaves go back into the tuple's nesting.
  std::vector<std::vector<Literal>> leaves;  // [leaf][device]
  int64_t leaf = 0;
  Status status;
  std::function<void(const Literal&)> visit = [&](const Literal& value) {
    if (!status.ok()) return;
    if (value.shape().IsTuple()) {
      for (const Literal& e : value.tuple_elements()) visit(e);
      return;
    }
    const HloSharding& s = sharding.LeafSharding(leaf++);
    if (!value.shape().IsArray()) {
      leaves.emplace_back(static_cast<size_t>(num_devices), value);
      return;
    }
    auto split = SplitArray(value, s, num_devices, pad);
    if (!split.ok()) {
      status = split.status().WithContext(fmt::format("tuple leaf {}", leaf - 1));
      return;
    }
    leaves.push_back(std::move(*split));
  };
  visit(global);
  RETURN_IF_ERROR(status);
  std::vector<Literal> out;
  for (int64_t device = 0; device < num_devices; ++device) {
    int64_t next = 0;
    std::function<Literal(const Literal&)> rebuild = [&](const Literal& value) -> Literal {
      if (!value.shape().IsTuple()) return std::move(leaves[static_cast<size_t>(next++)][static_cast<size_t>(device)]);
      std::vector<Literal> elements;
      for (const Literal& e : value.tuple_elements()) elements.push_back(rebuild(e));
      return Literal::MakeTuple(std::move(elements));
    };
    out.push_back(rebuild(global));
  }
  return out;
}

StatusOr<Literal> AssembleLiteral(const std::vector<Literal>& per_device,
                                  const HloSharding& sharding, const Shape& shape) {
  if (per_device.empty()) return Error("no device gave a value to assemble");
  const int64_t num_devices = static_cast<int64_t>(per_device.size());
  RETURN_IF_ERROR(sharding.Validate(shape, num_devices));
  if (!shape.IsTuple()) {
    if (!shape.IsArray()) return per_device[0];
    return AssembleArray(per_device, sharding, shape, "value");
  }
  // Leaf by leaf: the per-device tuples must nest as the shape does.
  int64_t leaf = 0;
  std::function<StatusOr<Literal>(const Shape&, std::vector<const Literal*>)> build =
      [&](const Shape& s, std::vector<const Literal*> pieces) -> StatusOr<Literal> {
    for (size_t d = 0; d < pieces.size(); ++d) {
      if (s.IsTuple() != pieces[d]->shape().IsTuple() ||
          (s.IsTuple() && pieces[d]->tuple_size() != s.tuple_shapes_size())) {
        return Error(fmt::format("device {}'s value has shape {}; expected the nesting of {}", d,
                                 pieces[d]->shape().ToString(false), shape.ToString(false)));
      }
    }
    if (!s.IsTuple()) {
      const int64_t index = leaf++;
      if (!s.IsArray()) return *pieces[0];
      std::vector<Literal> copies;
      for (const Literal* p : pieces) copies.push_back(*p);
      return AssembleArray(copies, sharding.LeafSharding(index), s,
                           fmt::format("tuple leaf {}", index));
    }
    std::vector<Literal> elements;
    for (int64_t i = 0; i < s.tuple_shapes_size(); ++i) {
      std::vector<const Literal*> parts;
      for (const Literal* p : pieces) parts.push_back(&p->tuple_element(i));
      ASSIGN_OR_RETURN(Literal e, build(s.tuple_shapes(i), parts));
      elements.push_back(std::move(e));
    }
    return Literal::MakeTuple(std::move(elements));
  };
  std::vector<const Literal*> pieces;
  for (const Literal& p : per_device) pieces.push_back(&p);
  return build(shape, pieces);
}

namespace {

StatusOr<HloSharding> InstructionSharding(const HloInstruction& instr) {
  const std::string* text = instr.raw_attribute("sharding");
  if (text == nullptr) return HloSharding::Replicated();
  auto parsed = HloSharding::Parse(*text, "sharding of %" + instr.name());
  if (!parsed.ok()) return parsed.status();
  return parsed;
}

Status NoEntry(const HloModule& module) {
  return Error(fmt::format("module {} has no entry computation", module.name()));
}

}  // namespace

StatusOr<std::vector<HloSharding>> EntryParameterShardings(const HloModule& module) {
  const HloComputation* entry = module.entry_computation();
  if (entry == nullptr) return NoEntry(module);
  std::vector<HloSharding> out;
  for (const HloInstruction* p : entry->parameter_instructions()) {
    ASSIGN_OR_RETURN(HloSharding s, InstructionSharding(*p));
    out.push_back(std::move(s));
  }
  return out;
}

StatusOr<HloSharding> EntryRootSharding(const HloModule& module) {
  const HloComputation* entry = module.entry_computation();
  if (entry == nullptr || entry->root_instruction() == nullptr) return NoEntry(module);
  return InstructionSharding(*entry->root_instruction());
}

}  // namespace xlens
