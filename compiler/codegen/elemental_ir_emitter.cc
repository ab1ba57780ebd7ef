#include "compiler/codegen/elemental_ir_emitter.h"

#include <algorithm>

#include <fmt/format.h>
#include <llvm/IR/Module.h>

#include "compiler/passes/erfc_expansion.h"
#include "compiler/codegen/fast_math.h"
#include "compiler/codegen/llvm_ir_util.h"
#include "compiler/codegen/scalar_ops.h"

namespace xlens::codegen {

using llvm::Value;

int64_t LeafCount(const Shape& shape) {
  if (!shape.IsTuple()) return 1;
  int64_t n = 0;
  for (const Shape& s : shape.tuple_shapes()) n += LeafCount(s);
  return n;
}

void ElementalIrEmitter::BindArray(const HloInstruction* hlo, std::vector<int64_t> shape_index,
                                   IrArray array) {
  arrays_[{hlo, std::move(shape_index)}] = std::move(array);
}

void ElementalIrEmitter::BindValues(const HloInstruction* hlo, std::vector<Value*> leaves) {
  values_[hlo] = std::move(leaves);
}

void ElementalIrEmitter::UnbindValues(const HloInstruction* hlo) { values_.erase(hlo); }

bool ElementalIrEmitter::IsBound(const HloInstruction* hlo) const {
  if (values_.count(hlo)) return true;
  auto it = arrays_.lower_bound({hlo, {}});
  return it != arrays_.end() && it->first.first == hlo;
}

StatusOr<Value*> ElementalIrEmitter::EmitElement(const HloInstruction* hlo, const IrIndex& index) {
  ASSIGN_OR_RETURN(Leaves leaves, EmitLeaves(hlo, index));
  if (leaves.size() != 1) {
    return Error(fmt::format("{} is a tuple where an array was expected", hlo->name()));
  }
  return leaves[0];
}

StatusOr<ElementalIrEmitter::Leaves> ElementalIrEmitter::EmitLeaves(const HloInstruction* hlo,
                                                                    const IrIndex& index) {
  if (auto it = values_.find(hlo); it != values_.end()) return it->second;
  CacheKey key{hlo, index};
  for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope) {
    if (auto it = scope->find(key); it != scope->end()) return it->second;
  }
  ASSIGN_OR_RETURN(Leaves leaves, EmitUncached(hlo, index));
  scopes_.back()[key] = leaves;
  return leaves;
}

StatusOr<Value*> ElementalIrEmitter::EmitOperand(const HloInstruction* hlo, int64_t i,
                                                 const IrIndex& index) {
  return EmitElement(hlo->operand(i), index);
}

Status ElementalIrEmitter::EmitLoop(Value* start, Value* end, std::string_view name,
                                    const std::function<Status(Value*)>& body,
                                    llvm::MDNode* parallel_access_group) {
  return EmitForLoop(b_, start, end, name, [&](Value* iv) {
    scopes_.emplace_back();
    Status status = body(iv);
    scopes_.pop_back();
    return status;
  }, parallel_access_group);
}

Status ElementalIrEmitter::EmitIf(Value* condition, std::string_view name,
                                  const std::function<Status()>& then) {
  llvm::Function* f = b_.GetInsertBlock()->getParent();
  auto* then_block = llvm::BasicBlock::Create(b_.getContext(), fmt::format("{}.then", name), f);
  auto* after = llvm::BasicBlock::Create(b_.getContext(), fmt::format("{}.after", name), f);
  b_.CreateCondBr(condition, then_block, after);
  b_.SetInsertPoint(then_block);
  scopes_.emplace_back();
  Status status = then();
  scopes_.pop_back();
  RETURN_IF_ERROR(status);
  b_.CreateBr(after);
  b_.SetInsertPoint(after);
  return OkStatus();
}

Status ElementalIrEmitter::EmitLoopNest(const std::vector<int64_t>& sizes, std::string_view name,
                                        const std::function<Status(const IrIndex&)>& body) {
  IrIndex ivs;
  std::function<Status(size_t)> level = [&](size_t d) -> Status {
    if (d == sizes.size()) return body(ivs);
    return EmitLoop(b_.getInt64(0), b_.getInt64(sizes[d]), fmt::format("{}.{}", name, d),
                    [&](Value* iv) {
                      ivs.push_back(iv);
                      Status s = level(d + 1);
                      ivs.pop_back();
                      return s;
                    });
  };
  return level(0);
}

StatusOr<std::vector<Value*>> ElementalIrEmitter::EmitScalarComputation(
    const HloComputation& computation, const std::vector<Value*>& arguments) {
  // A fresh emitter: the computation's parameters are bound to the arguments and nothing of the
  // caller's bindings leaks in.
  ElementalIrEmitter inner(b_);
  size_t next = 0;
  for (const HloInstruction* p : computation.parameter_instructions()) {
    const int64_t n = LeafCount(p->shape());
    if (next + n > arguments.size()) return Error("scalar computation given too few arguments");
    inner.BindValues(p, Leaves(arguments.begin() + next, arguments.begin() + next + n));
    next += n;
  }
  return inner.EmitLeaves(computation.root_instruction(), {});
}

StatusOr<ElementalIrEmitter::Leaves> ElementalIrEmitter::EmitUncached(const HloInstruction* hlo,
                                                                      const IrIndex& index) {
  const Shape& shape = hlo->shape();
  // Bound arrays (per leaf).
  if (auto it = arrays_.find({hlo, {}}); it != arrays_.end()) {
    const IrArray& array = it->second;
    if (auto d = delinearized_.find(index);
        d != delinearized_.end() && d->second.second == array.shape().dimensions() &&
        LayoutStrides(array.shape()) == LayoutStrides(Shape(array.shape().element_type(), array.shape().dimensions()))) {
      IrArray flat(array.base(), Shape(array.shape().element_type(), {array.shape().num_elements()}));
      flat.set_access_group(array.access_group());
      ASSIGN_OR_RETURN(Value * v, flat.EmitRead(b_, {d->second.first}));
      return Leaves{v};
    }
    ASSIGN_OR_RETURN(Value * v, array.EmitRead(b_, index));
    return Leaves{v};
  }
  if (shape.IsTuple() && IsBound(hlo)) {
    Leaves leaves;
    Status status = OkStatus();
    shape.ForEachLeaf([&](const Shape&, const std::vector<int64_t>& leaf) {
      if (!status.ok()) return;
      auto it = arrays_.find({hlo, leaf});
      if (it == arrays_.end()) {
        status = Error(fmt::format("no buffer for a leaf of {}", hlo->name()));
        return;
      }
      auto v = it->second.EmitRead(b_, index);
      if (!v.ok()) { status = v.status(); return; }
      leaves.push_back(*v);
    });
    RETURN_IF_ERROR(status);
    return leaves;
  }
  if (shape.IsArray() && !IsCodegenSupportedType(shape.element_type())) {
    return Error(fmt::format("{}: element type {} is not supported by code generation",
                             hlo->name(), PrimitiveTypeName(shape.element_type())));
  }

  const HloOpcode op = hlo->opcode();
  auto one = [](StatusOr<Value*> v) -> StatusOr<Leaves> {
    if (!v.ok()) return v.status();
    return Leaves{*v};
  };
  if ((op == HloOpcode::kAdd || op == HloOpcode::kSubtract) && UseInlineTranscendentals(b_)) {
    // 1 +- erf(u) as erfc(-+u) (passes/erfc_expansion.h).
    bool negated = false;
    if (const HloInstruction* u = MatchOnePlusOrMinusErfF32(*hlo, &negated); u != nullptr) {
      ASSIGN_OR_RETURN(Value * x, EmitElement(u, index));
      return Leaves{EmitFastErfcF32(b_, negated ? b_.CreateFNeg(x) : x)};
    }
  }
  if (hlo->IsElementwise() && op != HloOpcode::kMap && op != HloOpcode::kSelect &&
      op != HloOpcode::kClamp) {
    if (hlo->operand_count() == 1) {
      ASSIGN_OR_RETURN(Value * x, EmitOperand(hlo, 0, index));
      return one(EmitUnaryOp(b_, *hlo, x));
    }
    ASSIGN_OR_RETURN(Value * x, EmitOperand(hlo, 0, index));
    ASSIGN_OR_RETURN(Value * y, EmitOperand(hlo, 1, index));
    return one(EmitBinaryOp(b_, *hlo, x, y));
  }
  switch (op) {
    case HloOpcode::kParameter:
      return Error(fmt::format("parameter {} has no buffer bound", hlo->name()));
    case HloOpcode::kConstant:
      return one(EmitConstant(hlo, index));
    case HloOpcode::kIota:
      return one(EmitIota(hlo, index));
    case HloOpcode::kSelect: {
      // JAX's erfc, spelled out in some forty instructions (passes/erfc_expansion.h), in one form.
      if (UseInlineTranscendentals(b_)) {
        if (const HloInstruction* z = MatchErfcExpansionF32(*hlo); z != nullptr) {
          ASSIGN_OR_RETURN(Value * x, EmitElement(z, index));
          return Leaves{EmitFastErfcF32(b_, x)};
        }
      }
      ASSIGN_OR_RETURN(Value * p, EmitOperand(hlo, 0, hlo->operand(0)->shape().rank() == 0 ? IrIndex{} : index));
      ASSIGN_OR_RETURN(Value * t, EmitOperand(hlo, 1, index));
      ASSIGN_OR_RETURN(Value * f, EmitOperand(hlo, 2, index));
      return Leaves{b_.CreateSelect(p, t, f)};
    }
    case HloOpcode::kClamp: {
      const PrimitiveType type = shape.element_type();
      auto bound = [&](int64_t i) {
        return EmitOperand(hlo, i, hlo->operand(i)->shape().rank() == 0 ? IrIndex{} : index);
      };
      ASSIGN_OR_RETURN(Value * lo, bound(0));
      ASSIGN_OR_RETURN(Value * x, EmitOperand(hlo, 1, index));
      ASSIGN_OR_RETURN(Value * hi, bound(2));
      ASSIGN_OR_RETURN(Value * m, EmitBinaryOpcode(b_, HloOpcode::kMaximum, type, x, lo));
      return one(EmitBinaryOpcode(b_, HloOpcode::kMinimum, type, m, hi));
    }
    case HloOpcode::kMap: {
      Leaves args;
      for (int64_t i = 0; i < hlo->operand_count(); ++i) {
        ASSIGN_OR_RETURN(Value * v, EmitOperand(hlo, i, index));
        args.push_back(v);
      }
      return EmitScalarComputation(*hlo->to_apply(), args);
    }
    case HloOpcode::kCopy:
    case HloOpcode::kOptimizationBarrier:
    case HloOpcode::kAddDependency:
      return EmitLeaves(hlo->operand(0), index);
    case HloOpcode::kBroadcast: {
      IrIndex operand_index;
      for (int64_t d : hlo->dimensions()) operand_index.push_back(index[d]);
      return EmitLeaves(hlo->operand(0), operand_index);
    }
    case HloOpcode::kReshape: {
      const Shape& in = hlo->operand(0)->shape();
      if (in.rank() == 0) return EmitLeaves(hlo->operand(0), {});
      Value* linear = LinearizeRowMajor(b_, index, shape.dimensions());
      IrIndex operand_index = DelinearizeRowMajor(b_, linear, in.dimensions());
      delinearized_[operand_index] = {linear, in.dimensions()};
      return EmitLeaves(hlo->operand(0), operand_index);
    }
    case HloOpcode::kBitcast: {
      const Shape& in = hlo->operand(0)->shape();
      if (in.element_type() != shape.element_type()) {
        return Error(fmt::format("{}: a bitcast that changes the element type is not supported",
                                 hlo->name()));
      }
      if (in.rank() == 0) return EmitLeaves(hlo->operand(0), {});
      IrArray out_view(nullptr, shape);
      Value* linear = out_view.EmitLinearIndex(b_, index);
      return EmitLeaves(hlo->operand(0), DelinearizePhysical(b_, linear, in));
    }
    case HloOpcode::kTranspose: {
      IrIndex operand_index(index.size());
      for (size_t i = 0; i < index.size(); ++i) operand_index[hlo->dimensions(i)] = index[i];
      return EmitLeaves(hlo->operand(0), operand_index);
    }
    case HloOpcode::kReverse: {
      IrIndex operand_index = index;
      for (int64_t d : hlo->dimensions()) {
        operand_index[d] = b_.CreateSub(b_.getInt64(shape.dimensions(d) - 1), index[d]);
      }
      return EmitLeaves(hlo->operand(0), operand_index);
    }
    case HloOpcode::kSlice: {
      IrIndex operand_index(index.size());
      for (size_t d = 0; d < index.size(); ++d) {
        operand_index[d] = b_.CreateAdd(b_.CreateMul(index[d], b_.getInt64(hlo->slice_strides[d])),
                                        b_.getInt64(hlo->slice_starts[d]));
      }
      return EmitLeaves(hlo->operand(0), operand_index);
    }
    case HloOpcode::kPad:
      return one(EmitPad(hlo, index));
    case HloOpcode::kConcatenate:
      return one(EmitConcatenate(hlo, index));
    case HloOpcode::kDynamicSlice:
      return one(EmitDynamicSlice(hlo, index));
    case HloOpcode::kDynamicUpdateSlice:
      return one(EmitDynamicUpdateSlice(hlo, index));
    case HloOpcode::kGather:
      return one(EmitGather(hlo, index));
    case HloOpcode::kReduce:
      return EmitReduce(hlo, index);
    case HloOpcode::kReduceWindow:
      return EmitReduceWindow(hlo, index);
    case HloOpcode::kDot:
      return one(EmitDot(hlo, index));
    case HloOpcode::kConvolution:
      return one(EmitConvolution(hlo, index));
    case HloOpcode::kTuple: {
      Leaves leaves;
      for (const HloInstruction* operand : hlo->operands()) {
        ASSIGN_OR_RETURN(Leaves l, EmitLeaves(operand, index));
        leaves.insert(leaves.end(), l.begin(), l.end());
      }
      return leaves;
    }
    case HloOpcode::kGetTupleElement: {
      const HloInstruction* tuple = hlo->operand(0);
      // Only the selected leaves are computed when the operand is bound leaf by leaf.
      std::vector<int64_t> path = {hlo->tuple_index()};
      while (tuple->opcode() == HloOpcode::kGetTupleElement && !IsBound(tuple)) {
        path.insert(path.begin(), tuple->tuple_index());
        tuple = tuple->operand(0);
      }
      if (tuple->opcode() == HloOpcode::kTuple && path.size() == 1) {
        return EmitLeaves(tuple->operand(path[0]), index);
      }
      if (shape.IsArray()) {
        if (auto it = arrays_.find({tuple, path}); it != arrays_.end()) {
          ASSIGN_OR_RETURN(Value * v, it->second.EmitRead(b_, index));
          return Leaves{v};
        }
      }
      ASSIGN_OR_RETURN(Leaves all, EmitLeaves(tuple, index));
      const Shape* s = &tuple->shape();
      int64_t offset = 0;
      for (int64_t i : path) {
        for (int64_t j = 0; j < i; ++j) offset += LeafCount(s->tuple_shapes(j));
        s = &s->tuple_shapes(i);
      }
      const int64_t count = LeafCount(*s);
      return Leaves(all.begin() + offset, all.begin() + offset + count);
    }
    default:
      return Error(fmt::format("{} ({}) cannot be computed element by element",
                               hlo->name(), HloOpcodeString(op)));
  }
}

StatusOr<Value*> ElementalIrEmitter::EmitConstant(const HloInstruction* hlo, const IrIndex& index) {
  const Literal& literal = hlo->literal();
  if (literal.is_elided() || literal.is_text_only()) {
    return Error(fmt::format("constant {} has no value in the text (elided)", hlo->name()));
  }
  if (literal.element_count() == 1) return EmitLiteralElement(b_, literal, 0);
  // A private global holding the literal's row-major bytes.
  llvm::Module& module = *b_.GetInsertBlock()->getModule();
  const std::string name = fmt::format("constant.{}", hlo->name());
  llvm::GlobalVariable* global = module.getGlobalVariable(name, true);
  if (global == nullptr) {
    llvm::StringRef bytes(reinterpret_cast<const char*>(literal.untyped_data()),
                          literal.size_bytes());
    llvm::Constant* data = llvm::ConstantDataArray::getRaw(bytes, literal.size_bytes(),
                                                           b_.getInt8Ty());
    global = new llvm::GlobalVariable(module, data->getType(), true,
                                      llvm::GlobalValue::PrivateLinkage, data, name);
    global->setAlignment(llvm::Align(64));
  }
  Shape row_major = hlo->shape();
  row_major.SetDefaultLayout();
  return IrArray(global, row_major).EmitRead(b_, index);
}

StatusOr<Value*> ElementalIrEmitter::EmitIota(const HloInstruction* hlo, const IrIndex& index) {
  const int64_t d = hlo->iota_dimension_attr.value_or(0);
  return EmitFromInt64(b_, hlo->shape().element_type(), index[d]);
}

StatusOr<Value*> ElementalIrEmitter::EmitPad(const HloInstruction* hlo, const IrIndex& index) {
  const Shape& in = hlo->operand(0)->shape();
  const PaddingConfig& config = *hlo->padding_config;
  Value* valid = b_.getTrue();
  IrIndex operand_index(index.size());
  for (size_t d = 0; d < index.size(); ++d) {
    const PaddingDimension& p = config.dimensions[d];
    Value* pos = b_.CreateSub(index[d], b_.getInt64(p.edge_padding_low));
    Value* step = b_.getInt64(p.interior_padding + 1);
    Value* in_range = b_.CreateICmpSGE(pos, b_.getInt64(0));
    Value* q = pos;
    if (p.interior_padding != 0) {
      in_range = b_.CreateAnd(in_range, b_.CreateICmpEQ(b_.CreateSRem(pos, step), b_.getInt64(0)));
      q = b_.CreateSDiv(pos, step);
    }
    in_range = b_.CreateAnd(in_range, b_.CreateICmpSLT(q, b_.getInt64(in.dimensions(d))));
    valid = b_.CreateAnd(valid, in_range);
    operand_index[d] = q;
  }
  // The operand is read at a clamped index everywhere (no branch, so the loop vectorizes) and
  // the padding value selected where the position is padding.
  for (size_t d = 0; d < index.size(); ++d) {
    operand_index[d] = b_.CreateSelect(valid, operand_index[d], b_.getInt64(0));
  }
  ASSIGN_OR_RETURN(Value * x, EmitOperand(hlo, 0, operand_index));
  ASSIGN_OR_RETURN(Value * pad, EmitOperand(hlo, 1, {}));
  return b_.CreateSelect(valid, x, pad);
}

StatusOr<Value*> ElementalIrEmitter::EmitConcatenate(const HloInstruction* hlo,
                                                     const IrIndex& index) {
  const int64_t dim = hlo->dimensions(0);
  ASSIGN_OR_RETURN(llvm::Type * type, ValueType(hlo->shape().element_type(), b_.getContext()));
  llvm::AllocaInst* result = EmitEntryAlloca(b_, type, "concat.value");
  int64_t offset = 0;
  llvm::Function* f = b_.GetInsertBlock()->getParent();
  auto* done = llvm::BasicBlock::Create(b_.getContext(), "concat.done", f);
  for (int64_t i = 0; i < hlo->operand_count(); ++i) {
    const int64_t size = hlo->operand(i)->shape().dimensions(dim);
    auto* take = llvm::BasicBlock::Create(b_.getContext(), "concat.take", f);
    auto* next = llvm::BasicBlock::Create(b_.getContext(), "concat.next", f);
    Value* inside = b_.CreateICmpSLT(index[dim], b_.getInt64(offset + size));
    if (i + 1 == hlo->operand_count()) inside = b_.getTrue();
    b_.CreateCondBr(inside, take, next);
    b_.SetInsertPoint(take);
    scopes_.emplace_back();
    IrIndex operand_index = index;
    operand_index[dim] = b_.CreateSub(index[dim], b_.getInt64(offset));
    auto v = EmitOperand(hlo, i, operand_index);
    scopes_.pop_back();
    RETURN_IF_ERROR(v.status());
    b_.CreateStore(*v, result);
    b_.CreateBr(done);
    b_.SetInsertPoint(next);
    offset += size;
  }
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
  return b_.CreateLoad(type, result);
}

StatusOr<IrIndex> ElementalIrEmitter::EmitClampedStarts(const HloInstruction* hlo,
                                                        int64_t first_operand,
                                                        const Shape& window) {
  const Shape& operand = hlo->operand(0)->shape();
  IrIndex starts;
  for (int64_t d = 0; d < operand.rank(); ++d) {
    const HloInstruction* start_hlo = hlo->operand(first_operand + d);
    ASSIGN_OR_RETURN(Value * s, EmitElement(start_hlo, {}));
    ASSIGN_OR_RETURN(Value * s64, EmitIndexToInt64(b_, start_hlo->shape().element_type(), s));
    Value* limit = b_.getInt64(operand.dimensions(d) - window.dimensions(d));
    s64 = b_.CreateSelect(b_.CreateICmpSLT(s64, b_.getInt64(0)), b_.getInt64(0), s64);
    s64 = b_.CreateSelect(b_.CreateICmpSGT(s64, limit), limit, s64);
    starts.push_back(s64);
  }
  return starts;
}

StatusOr<Value*> ElementalIrEmitter::EmitDynamicSlice(const HloInstruction* hlo,
                                                      const IrIndex& index) {
  ASSIGN_OR_RETURN(IrIndex starts, EmitClampedStarts(hlo, 1, hlo->shape()));
  IrIndex operand_index(index.size());
  for (size_t d = 0; d < index.size(); ++d) operand_index[d] = b_.CreateAdd(starts[d], index[d]);
  return EmitOperand(hlo, 0, operand_index);
}

StatusOr<Value*> ElementalIrEmitter::EmitDynamicUpdateSlice(const HloInstruction* hlo,
                                                            const IrIndex& index) {
  const Shape& update = hlo->operand(1)->shape();
  ASSIGN_OR_RETURN(IrIndex starts, EmitClampedStarts(hlo, 2, update));
  Value* inside = b_.getTrue();
  IrIndex update_index(index.size());
  for (size_t d = 0; d < index.size(); ++d) {
    Value* u = b_.CreateSub(index[d], starts[d]);
    inside = b_.CreateAnd(inside, b_.CreateAnd(b_.CreateICmpSGE(u, b_.getInt64(0)),
                                               b_.CreateICmpSLT(u, b_.getInt64(update.dimensions(d)))));
    update_index[d] = u;
  }
  for (size_t d = 0; d < index.size(); ++d) {
    update_index[d] = b_.CreateSelect(inside, update_index[d], b_.getInt64(0));
  }
  ASSIGN_OR_RETURN(Value * x, EmitOperand(hlo, 0, index));
  if (update.num_elements() == 0) return x;
  ASSIGN_OR_RETURN(Value * u, EmitOperand(hlo, 1, update_index));
  return b_.CreateSelect(inside, u, x);
}

StatusOr<Value*> ElementalIrEmitter::EmitGather(const HloInstruction* hlo, const IrIndex& index) {
  const GatherDimensionNumbers& g = *hlo->gather_dimension_numbers;
  const HloInstruction* operand = hlo->operand(0);
  const HloInstruction* indices = hlo->operand(1);
  const Shape& operand_shape = operand->shape();
  const Shape& indices_shape = indices->shape();
  const std::vector<int64_t>& slice_sizes = *hlo->slice_sizes_attr;
  const int64_t rank = hlo->shape().rank();
  auto contains = [](const std::vector<int64_t>& v, int64_t x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  // The batch part of the output index, in order: a position in start_indices without its
  // index vector dimension.
  IrIndex batch;
  for (int64_t d = 0; d < rank; ++d) {
    if (!contains(g.offset_dims, d)) batch.push_back(index[d]);
  }
  IrIndex indices_index;
  size_t next_batch = 0;
  const bool explicit_vector = g.index_vector_dim < indices_shape.rank();
  std::vector<int64_t> indices_dim_of_batch;  // indices dimension of each batch position
  for (int64_t d = 0; d < indices_shape.rank(); ++d) {
    if (explicit_vector && d == g.index_vector_dim) {
      indices_index.push_back(b_.getInt64(0));
    } else {
      indices_dim_of_batch.push_back(d);
      indices_index.push_back(batch[next_batch++]);
    }
  }
  IrIndex start(operand_shape.rank(), b_.getInt64(0));
  for (size_t k = 0; k < g.start_index_map.size(); ++k) {
    if (explicit_vector) indices_index[g.index_vector_dim] = b_.getInt64(k);
    ASSIGN_OR_RETURN(Value * s, EmitElement(indices, indices_index));
    ASSIGN_OR_RETURN(Value * s64, EmitIndexToInt64(b_, indices_shape.element_type(), s));
    const int64_t od = g.start_index_map[k];
    Value* limit = b_.getInt64(operand_shape.dimensions(od) - slice_sizes[od]);
    s64 = b_.CreateSelect(b_.CreateICmpSLT(s64, b_.getInt64(0)), b_.getInt64(0), s64);
    s64 = b_.CreateSelect(b_.CreateICmpSGT(s64, limit), limit, s64);
    start[od] = s64;
  }
  for (size_t i = 0; i < g.operand_batching_dims.size(); ++i) {
    const int64_t indices_dim = g.start_indices_batching_dims[i];
    for (size_t j = 0; j < indices_dim_of_batch.size(); ++j) {
      if (indices_dim_of_batch[j] == indices_dim) start[g.operand_batching_dims[i]] = batch[j];
    }
  }
  IrIndex operand_index = start;
  size_t next_offset = 0;
  for (int64_t d = 0; d < operand_shape.rank(); ++d) {
    if (contains(g.collapsed_slice_dims, d) || contains(g.operand_batching_dims, d)) continue;
    operand_index[d] = b_.CreateAdd(start[d], index[g.offset_dims[next_offset++]]);
  }
  return EmitElement(operand, operand_index);
}

StatusOr<std::vector<llvm::AllocaInst*>> ElementalIrEmitter::EmitInitialAccumulators(
    const HloInstruction* hlo, int64_t n) {
  std::vector<llvm::AllocaInst*> accumulators;
  for (int64_t i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(Value * init, EmitOperand(hlo, n + i, {}));
    llvm::AllocaInst* acc = EmitEntryAlloca(b_, init->getType(), "acc");
    b_.CreateStore(init, acc);
    accumulators.push_back(acc);
  }
  return accumulators;
}

ElementalIrEmitter::Leaves ElementalIrEmitter::LoadAccumulators(
    const std::vector<llvm::AllocaInst*>& accumulators) {
  Leaves values;
  for (llvm::AllocaInst* acc : accumulators) values.push_back(b_.CreateLoad(acc->getAllocatedType(), acc));
  return values;
}

StatusOr<ElementalIrEmitter::Leaves> ElementalIrEmitter::EmitReduce(const HloInstruction* hlo,
                                                                    const IrIndex& index) {
  const int64_t n = hlo->operand_count() / 2;
  const Shape& in = hlo->operand(0)->shape();
  const std::vector<int64_t>& reduced = hlo->dimensions();
  ASSIGN_OR_RETURN(std::vector<llvm::AllocaInst*> accumulators, EmitInitialAccumulators(hlo, n));
  // Reduced dimensions in the operand's physical order, the minor-most innermost, so that a
  // row reduction walks memory contiguously.
  std::vector<int64_t> loop_dims;
  for (int64_t d : MajorToMinor(in)) {
    if (std::find(reduced.begin(), reduced.end(), d) != reduced.end()) loop_dims.push_back(d);
  }
  std::vector<int64_t> sizes;
  for (int64_t d : loop_dims) sizes.push_back(in.dimensions(d));
  RETURN_IF_ERROR(EmitLoopNest(sizes, "reduce", [&](const IrIndex& ivs) -> Status {
    IrIndex operand_index(in.rank(), nullptr);
    for (size_t i = 0; i < loop_dims.size(); ++i) operand_index[loop_dims[i]] = ivs[i];
    size_t next = 0;
    for (int64_t d = 0; d < in.rank(); ++d) {
      if (operand_index[d] == nullptr) operand_index[d] = index[next++];
    }
    Leaves args = LoadAccumulators(accumulators);
    for (int64_t i = 0; i < n; ++i) {
      ASSIGN_OR_RETURN(Value * x, EmitOperand(hlo, i, operand_index));
      args.push_back(x);
    }
    // Float reductions may be reassociated, as XLA's CPU backend does, so that LLVM vectorizes
    // them; the order of a sum is not part of reduce's semantics.
    llvm::IRBuilder<>::FastMathFlagGuard guard(b_);
    llvm::FastMathFlags flags;
    flags.setAllowReassoc();
    b_.setFastMathFlags(flags);
    ASSIGN_OR_RETURN(Leaves results, EmitScalarComputation(*hlo->to_apply(), args));
    for (int64_t i = 0; i < n; ++i) b_.CreateStore(results[i], accumulators[i]);
    return OkStatus();
  }));
  return LoadAccumulators(accumulators);
}

StatusOr<ElementalIrEmitter::Leaves> ElementalIrEmitter::EmitReduceWindow(
    const HloInstruction* hlo, const IrIndex& index) {
  const int64_t n = hlo->operand_count() / 2;
  const Shape& in = hlo->operand(0)->shape();
  const Window& window = *hlo->window;
  ASSIGN_OR_RETURN(std::vector<llvm::AllocaInst*> accumulators, EmitInitialAccumulators(hlo, n));
  std::vector<int64_t> sizes;
  for (const WindowDimension& w : window.dimensions) sizes.push_back(w.size);
  RETURN_IF_ERROR(EmitLoopNest(sizes, "window", [&](const IrIndex& ivs) -> Status {
    Value* inside = b_.getTrue();
    IrIndex operand_index(in.rank());
    for (int64_t d = 0; d < in.rank(); ++d) {
      const WindowDimension& w = window.dimensions[d];
      Value* dilated = b_.CreateSub(
          b_.CreateAdd(b_.CreateMul(index[d], b_.getInt64(w.stride)),
                       b_.CreateMul(ivs[d], b_.getInt64(w.window_dilation))),
          b_.getInt64(w.padding_low));
      Value* ok = b_.CreateICmpSGE(dilated, b_.getInt64(0));
      Value* pos = dilated;
      if (w.base_dilation != 1) {
        ok = b_.CreateAnd(ok, b_.CreateICmpEQ(b_.CreateSRem(dilated, b_.getInt64(w.base_dilation)),
                                              b_.getInt64(0)));
        pos = b_.CreateSDiv(dilated, b_.getInt64(w.base_dilation));
      }
      ok = b_.CreateAnd(ok, b_.CreateICmpSLT(pos, b_.getInt64(in.dimensions(d))));
      inside = b_.CreateAnd(inside, ok);
      operand_index[d] = pos;
    }
    return EmitIf(inside, "window.inside", [&]() -> Status {
      Leaves args = LoadAccumulators(accumulators);
      for (int64_t i = 0; i < n; ++i) {
        ASSIGN_OR_RETURN(Value * x, EmitOperand(hlo, i, operand_index));
        args.push_back(x);
      }
      ASSIGN_OR_RETURN(Leaves results, EmitScalarComputation(*hlo->to_apply(), args));
      for (int64_t i = 0; i < n; ++i) b_.CreateStore(results[i], accumulators[i]);
      return OkStatus();
    });
  }));
  return LoadAccumulators(accumulators);
}

namespace {

// Dot and convolution accumulate as the evaluator does: integers in the result type, floats in
// f32 (f64 when an f64 is involved), complex in c64 or c128.
PrimitiveType AccumulationType(PrimitiveType lhs, PrimitiveType rhs, PrimitiveType result) {
  const PrimitiveType types[] = {lhs, rhs, result};
  bool has_f64 = false, has_complex = false, has_float = false;
  for (PrimitiveType t : types) {
    has_f64 |= t == PrimitiveType::F64 || t == PrimitiveType::C128;
    has_complex |= IsComplexType(t);
    has_float |= IsFloatingPointType(t);
  }
  if (has_complex) return has_f64 ? PrimitiveType::C128 : PrimitiveType::C64;
  if (has_float) return has_f64 ? PrimitiveType::F64 : PrimitiveType::F32;
  return result;
}

}  // namespace

StatusOr<llvm::AllocaInst*> ElementalIrEmitter::EmitZeroAccumulator(PrimitiveType type,
                                                                    std::string_view name) {
  ASSIGN_OR_RETURN(llvm::Type * llvm_type, ValueType(type, b_.getContext()));
  ASSIGN_OR_RETURN(Value * zero, EmitConvert(b_, PrimitiveType::S32, type, b_.getInt32(0)));
  llvm::AllocaInst* acc = EmitEntryAlloca(b_, llvm_type, name);
  b_.CreateStore(zero, acc);
  return acc;
}

Status ElementalIrEmitter::EmitMultiplyAccumulate(const HloInstruction* hlo, const IrIndex& lhs_index,
                                                  const IrIndex& rhs_index, PrimitiveType acc_type,
                                                  llvm::AllocaInst* acc) {
  ASSIGN_OR_RETURN(Value * a, EmitOperand(hlo, 0, lhs_index));
  ASSIGN_OR_RETURN(Value * c, EmitOperand(hlo, 1, rhs_index));
  ASSIGN_OR_RETURN(a, EmitConvert(b_, hlo->operand(0)->shape().element_type(), acc_type, a));
  ASSIGN_OR_RETURN(c, EmitConvert(b_, hlo->operand(1)->shape().element_type(), acc_type, c));
  ASSIGN_OR_RETURN(Value * product, EmitBinaryOpcode(b_, HloOpcode::kMultiply, acc_type, a, c));
  ASSIGN_OR_RETURN(Value * sum, EmitBinaryOpcode(b_, HloOpcode::kAdd, acc_type,
                                                 b_.CreateLoad(acc->getAllocatedType(), acc), product));
  b_.CreateStore(sum, acc);
  return OkStatus();
}

StatusOr<Value*> ElementalIrEmitter::EmitDot(const HloInstruction* hlo, const IrIndex& index) {
  const DotDimensionNumbers& dn = *hlo->dot_dimension_numbers;
  const Shape& lhs = hlo->operand(0)->shape();
  const Shape& rhs = hlo->operand(1)->shape();
  const PrimitiveType acc_type = AccumulationType(lhs.element_type(), rhs.element_type(),
                                                  hlo->shape().element_type());
  ASSIGN_OR_RETURN(llvm::AllocaInst * acc, EmitZeroAccumulator(acc_type, "dot.acc"));
  auto contains = [](const std::vector<int64_t>& v, int64_t x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  // Output: batch dims, lhs free dims, rhs free dims.
  IrIndex lhs_index(lhs.rank(), nullptr), rhs_index(rhs.rank(), nullptr);
  size_t next = 0;
  for (size_t i = 0; i < dn.lhs_batch_dimensions.size(); ++i) {
    lhs_index[dn.lhs_batch_dimensions[i]] = index[next];
    rhs_index[dn.rhs_batch_dimensions[i]] = index[next];
    ++next;
  }
  for (int64_t d = 0; d < lhs.rank(); ++d) {
    if (!contains(dn.lhs_batch_dimensions, d) && !contains(dn.lhs_contracting_dimensions, d)) {
      lhs_index[d] = index[next++];
    }
  }
  for (int64_t d = 0; d < rhs.rank(); ++d) {
    if (!contains(dn.rhs_batch_dimensions, d) && !contains(dn.rhs_contracting_dimensions, d)) {
      rhs_index[d] = index[next++];
    }
  }
  std::vector<int64_t> sizes;
  for (int64_t d : dn.lhs_contracting_dimensions) sizes.push_back(lhs.dimensions(d));
  RETURN_IF_ERROR(EmitLoopNest(sizes, "dot", [&](const IrIndex& ivs) -> Status {
    for (size_t i = 0; i < ivs.size(); ++i) {
      lhs_index[dn.lhs_contracting_dimensions[i]] = ivs[i];
      rhs_index[dn.rhs_contracting_dimensions[i]] = ivs[i];
    }
    return EmitMultiplyAccumulate(hlo, lhs_index, rhs_index, acc_type, acc);
  }));
  return EmitConvert(b_, acc_type, hlo->shape().element_type(), b_.CreateLoad(acc->getAllocatedType(), acc));
}

StatusOr<Value*> ElementalIrEmitter::EmitConvolution(const HloInstruction* hlo,
                                                     const IrIndex& index) {
  const ConvolutionDimensionNumbers& dn = *hlo->convolution_dimension_numbers;
  const Window& window = *hlo->window;
  const Shape& lhs = hlo->operand(0)->shape();
  const Shape& rhs = hlo->operand(1)->shape();
  const Shape& shape = hlo->shape();
  const PrimitiveType acc_type = AccumulationType(lhs.element_type(), rhs.element_type(),
                                                  shape.element_type());
  ASSIGN_OR_RETURN(llvm::AllocaInst * acc, EmitZeroAccumulator(acc_type, "conv.acc"));

  const int64_t feature_groups = hlo->feature_group_count();
  const int64_t batch_groups = hlo->batch_group_count();
  const int64_t input_features = lhs.dimensions(dn.input_feature_dimension);
  const int64_t output_features = shape.dimensions(dn.output_feature_dimension);
  const int64_t input_group_size = input_features / feature_groups;
  const int64_t output_feature_group_size = output_features / feature_groups;
  const int64_t output_batch_group_size = output_features / batch_groups;
  const int64_t output_batch = lhs.dimensions(dn.input_batch_dimension) / batch_groups;
  Value* feature = index[dn.output_feature_dimension];
  Value* feature_group = b_.CreateUDiv(feature, b_.getInt64(output_feature_group_size));
  Value* batch = b_.CreateAdd(
      b_.CreateMul(b_.CreateUDiv(feature, b_.getInt64(output_batch_group_size)),
                   b_.getInt64(output_batch)),
      index[dn.output_batch_dimension]);
  const int64_t spatial = static_cast<int64_t>(dn.input_spatial_dimensions.size());
  std::vector<int64_t> sizes;
  for (int64_t i = 0; i < spatial; ++i) sizes.push_back(window.dimensions[i].size);
  sizes.push_back(input_group_size);
  RETURN_IF_ERROR(EmitLoopNest(sizes, "conv", [&](const IrIndex& ivs) -> Status {
    IrIndex lhs_index(lhs.rank()), rhs_index(rhs.rank());
    lhs_index[dn.input_batch_dimension] = batch;
    rhs_index[dn.kernel_output_feature_dimension] = feature;
    Value* inside = b_.getTrue();
    for (int64_t i = 0; i < spatial; ++i) {
      const WindowDimension& w = window.dimensions[i];
      Value* k = ivs[i];
      Value* dilated = b_.CreateAdd(
          b_.CreateSub(b_.CreateMul(index[dn.output_spatial_dimensions[i]], b_.getInt64(w.stride)),
                       b_.getInt64(w.padding_low)),
          b_.CreateMul(k, b_.getInt64(w.window_dilation)));
      Value* ok = b_.CreateICmpSGE(dilated, b_.getInt64(0));
      Value* pos = dilated;
      if (w.base_dilation != 1) {
        ok = b_.CreateAnd(ok, b_.CreateICmpEQ(b_.CreateSRem(dilated, b_.getInt64(w.base_dilation)),
                                              b_.getInt64(0)));
        pos = b_.CreateSDiv(dilated, b_.getInt64(w.base_dilation));
      }
      ok = b_.CreateAnd(ok, b_.CreateICmpSLT(pos, b_.getInt64(lhs.dimensions(dn.input_spatial_dimensions[i]))));
      inside = b_.CreateAnd(inside, ok);
      lhs_index[dn.input_spatial_dimensions[i]] = pos;
      rhs_index[dn.kernel_spatial_dimensions[i]] =
          w.window_reversal ? b_.CreateSub(b_.getInt64(w.size - 1), k) : k;
    }
    Value* iz = ivs[spatial];
    lhs_index[dn.input_feature_dimension] =
        b_.CreateAdd(b_.CreateMul(feature_group, b_.getInt64(input_group_size)), iz);
    rhs_index[dn.kernel_input_feature_dimension] = iz;
    return EmitIf(inside, "conv.inside", [&]() -> Status {
      return EmitMultiplyAccumulate(hlo, lhs_index, rhs_index, acc_type, acc);
    });
  }));
  return EmitConvert(b_, acc_type, shape.element_type(), b_.CreateLoad(acc->getAllocatedType(), acc));
}

}  // namespace xlens::codegen
