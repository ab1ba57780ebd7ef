#include "compiler/passes/layout_assignment.h"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>

#include "compiler/hlo/module.h"

namespace xlens {

bool SameLayouts(const Shape& a, const Shape& b) {
  if (a.IsTuple() != b.IsTuple()) return false;
  if (a.IsTuple()) {
    if (a.tuple_shapes_size() != b.tuple_shapes_size()) return false;
    for (int64_t i = 0; i < a.tuple_shapes_size(); ++i) {
      if (!SameLayouts(a.tuple_shapes(i), b.tuple_shapes(i))) return false;
    }
    return true;
  }
  if (!a.IsArray() || !b.IsArray()) return true;
  if (a.has_layout() != b.has_layout()) return false;
  return !a.has_layout() || a.layout().minor_to_major == b.layout().minor_to_major;
}

namespace {

// `shape` with the minor-to-major orders of `source` (same structure). An array whose order does
// not change keeps its layout, suffix included.
Shape WithLayoutsOf(const Shape& shape, const Shape& source) {
  Shape result = shape;
  if (shape.IsTuple()) {
    if (!source.IsTuple() || source.tuple_shapes_size() != shape.tuple_shapes_size()) {
      return result;
    }
    for (int64_t i = 0; i < shape.tuple_shapes_size(); ++i) {
      *result.mutable_tuple_shapes(i) = WithLayoutsOf(shape.tuple_shapes(i), source.tuple_shapes(i));
    }
    return result;
  }
  if (!shape.IsArray() || !source.IsArray() || !source.has_layout() ||
      source.rank() != shape.rank()) {
    return result;
  }
  if (!shape.has_layout() || shape.layout().minor_to_major != source.layout().minor_to_major) {
    result.set_layout(Layout{source.layout().minor_to_major, ""});
  }
  return result;
}

// Arrays without a layout get the default one (the layout-sensitive verifier wants all of them).
Shape WithAllLayouts(Shape shape) {
  if (shape.IsTuple()) {
    for (int64_t i = 0; i < shape.tuple_shapes_size(); ++i) {
      *shape.mutable_tuple_shapes(i) = WithAllLayouts(shape.tuple_shapes(i));
    }
  } else if (shape.IsArray() && !shape.has_layout()) {
    shape.SetDefaultLayout();
  }
  return shape;
}

Shape WithMinorToMajor(const Shape& shape, std::vector<int64_t> minor_to_major) {
  Shape layout_source = shape;
  layout_source.set_layout(Layout{std::move(minor_to_major), ""});
  return WithLayoutsOf(shape, layout_source);
}

Shape RowMajor(const Shape& shape) {
  return WithMinorToMajor(shape, shape_util::DefaultMinorToMajor(shape.rank()));
}

// Physical order batch, spatial..., feature (major to minor), as minor_to_major; falls back to
// row-major when the numbers do not name every dimension once.
std::vector<int64_t> ConvOrder(int64_t rank, int64_t major, const std::vector<int64_t>& spatial,
                               int64_t second_minor, int64_t minor, bool spatial_major) {
  std::vector<int64_t> m2m;
  if (spatial_major) {
    // 01io: spatial dimensions outermost, then input feature, then output feature.
    m2m.push_back(minor);
    m2m.push_back(second_minor);
    for (auto it = spatial.rbegin(); it != spatial.rend(); ++it) m2m.push_back(*it);
  } else {
    m2m.push_back(minor);
    for (auto it = spatial.rbegin(); it != spatial.rend(); ++it) m2m.push_back(*it);
    m2m.push_back(major);
  }
  std::vector<int64_t> sorted = m2m;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < static_cast<int64_t>(sorted.size()); ++i) {
    if (sorted[i] != i) return shape_util::DefaultMinorToMajor(rank);
  }
  if (static_cast<int64_t>(m2m.size()) != rank) return shape_util::DefaultMinorToMajor(rank);
  return m2m;
}

// Instructions whose layouts are not ours to choose: their result keeps its layout and each operand
// must arrive in the layout it had before the pass.
bool IsPinned(const HloInstruction& instr) {
  switch (instr.opcode()) {
    case HloOpcode::kBitcast:
      return true;
    case HloOpcode::kBroadcast: case HloOpcode::kReshape: case HloOpcode::kTranspose:
    case HloOpcode::kSlice: case HloOpcode::kDynamicSlice: case HloOpcode::kPad:
    case HloOpcode::kConcatenate: case HloOpcode::kReverse: case HloOpcode::kGather:
    case HloOpcode::kIota: case HloOpcode::kConstant: case HloOpcode::kRng:
    case HloOpcode::kSelectAndScatter: case HloOpcode::kCopy: case HloOpcode::kDot:
    case HloOpcode::kConvolution: case HloOpcode::kFusion: case HloOpcode::kTuple:
    case HloOpcode::kGetTupleElement: case HloOpcode::kParameter: case HloOpcode::kWhile:
    case HloOpcode::kConditional: case HloOpcode::kCall: case HloOpcode::kDynamicUpdateSlice:
      return false;
    case HloOpcode::kReduce: case HloOpcode::kReduceWindow: case HloOpcode::kScatter:
      return instr.shape().IsTuple();
    default:
      return !instr.IsElementwise();
  }
}

class Assigner {
 public:
  Assigner(HloModule& module, LayoutBackend backend) : module_(module), backend_(backend) {}

  StatusOr<bool> Run() {
    for (HloComputation* comp : module_.computations()) {
      for (HloInstruction* instr : comp->instructions()) {
        if (!IsPinned(*instr)) continue;
        std::vector<Shape>& shapes = pinned_operand_shapes_[instr];
        for (const HloInstruction* operand : instr->operands()) shapes.push_back(operand->shape());
      }
    }
    HloComputation* entry = module_.entry_computation();
    for (HloComputation* comp : module_.computations()) {
      if (comp->IsFusionComputation()) continue;
      std::vector<Shape> params;
      for (const HloInstruction* p : comp->parameter_instructions()) {
        params.push_back(p != nullptr ? p->shape() : Shape());
      }
      if (comp->root_instruction() == nullptr) continue;
      Shape root = comp->root_instruction()->shape();
      const std::optional<ComputationLayout>& entry_layout = module_.entry_computation_layout();
      if (comp == entry && entry_layout &&
          entry_layout->parameters.size() == params.size()) {
        for (size_t i = 0; i < params.size(); ++i) {
          params[i] = WithLayoutsOf(params[i], entry_layout->parameters[i]);
        }
        root = WithLayoutsOf(root, entry_layout->result);
      }
      AssignComputation(comp, params, WithAllLayouts(root));
    }
    return changed_;
  }

 private:
  void SetShape(HloInstruction* instr, const Shape& shape) {
    // Only layouts differ here; a missing layout being filled in counts as a change too.
    if (SameLayouts(instr->shape(), shape)) return;
    instr->set_shape(shape);
    changed_ = true;
  }

  void AssignComputation(HloComputation* comp, const std::vector<Shape>& params,
                         const Shape& root_shape) {
    for (size_t i = 0; i < params.size(); ++i) {
      HloInstruction* p = comp->parameter_instruction(i);
      if (p != nullptr && params[i].IsValid()) SetShape(p, WithAllLayouts(params[i]));
    }
    std::vector<HloInstruction*> order = comp->MakeInstructionPostOrder();
    std::unordered_map<const HloInstruction*, Shape> prefs = BackwardPreferences(comp, order,
                                                                                 root_shape);
    for (HloInstruction* instr : order) {
      if (instr->opcode() == HloOpcode::kParameter) continue;
      auto pref = prefs.find(instr);
      SetShape(instr, WithAllLayouts(Choose(*instr, pref == prefs.end() ? nullptr : &pref->second)));
      for (int64_t i = 0; i < instr->operand_count(); ++i) {
        std::optional<Shape> required = RequiredOperandShape(*instr, &instr->shape(), i);
        if (!required || SameLayouts(instr->operand(i)->shape(), *required)) continue;
        instr->ReplaceOperandWith(i, ConformTo(comp, instr->operand(i), *required));
      }
      if (instr->opcode() == HloOpcode::kTuple) SetShape(instr, TupleOfOperands(*instr));
      if (instr->opcode() == HloOpcode::kFusion && instr->fused_computation() != nullptr) {
        std::vector<Shape> operand_shapes;
        for (const HloInstruction* op : instr->operands()) operand_shapes.push_back(op->shape());
        AssignComputation(instr->fused_computation(), operand_shapes, instr->shape());
      }
    }
    HloInstruction* root = comp->root_instruction();
    if (!SameLayouts(root->shape(), root_shape)) {
      comp->set_root_instruction(ConformTo(comp, root, root_shape));
    }
  }

  // What each instruction's users would like it to be, users first; the root's constraint wins.
  std::unordered_map<const HloInstruction*, Shape> BackwardPreferences(
      HloComputation* comp, const std::vector<HloInstruction*>& order, const Shape& root_shape) {
    std::unordered_map<const HloInstruction*, Shape> prefs;
    prefs[comp->root_instruction()] = root_shape;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const HloInstruction* instr = *it;
      if (prefs.count(instr)) continue;
      for (const HloInstruction* user : instr->users()) {
        if (user->parent() != comp) continue;
        auto user_pref = prefs.find(user);
        const Shape* view = user_pref == prefs.end() ? nullptr : &user_pref->second;
        std::optional<Shape> wanted;
        for (int64_t i = 0; i < user->operand_count() && !wanted; ++i) {
          if (user->operand(i) == instr) wanted = RequiredOperandShape(*user, view, i);
        }
        if (wanted && shape_util::Compatible(*wanted, instr->shape())) {
          prefs[instr] = *wanted;
          break;
        }
      }
    }
    return prefs;
  }

  Shape TupleOfOperands(const HloInstruction& tuple) {
    std::vector<Shape> elements;
    for (const HloInstruction* op : tuple.operands()) elements.push_back(op->shape());
    return Shape::Tuple(std::move(elements));
  }

  // The layout `instr` gets, given what its users prefer (null: no preference).
  Shape Choose(const HloInstruction& instr, const Shape* pref) {
    const Shape& current = instr.shape();
    if (pref != nullptr && !shape_util::Compatible(*pref, current)) pref = nullptr;
    if (IsPinned(instr)) return current;
    switch (instr.opcode()) {
      case HloOpcode::kGetTupleElement: {
        const Shape& tuple = instr.operand(0)->shape();
        if (tuple.IsTuple() && instr.tuple_index() < tuple.tuple_shapes_size()) {
          return WithLayoutsOf(current, tuple.tuple_shapes(instr.tuple_index()));
        }
        return current;
      }
      case HloOpcode::kTuple:
        return pref != nullptr ? WithLayoutsOf(current, *pref)
                               : WithLayoutsOf(current, TupleOfOperands(instr));
      case HloOpcode::kWhile:
        if (HloComputation* body = instr.while_body()) {
          return WithLayoutsOf(current, body->root_instruction()->shape());
        }
        return current;
      case HloOpcode::kConditional: {
        std::vector<HloComputation*> branches = instr.branch_computations();
        if (!branches.empty()) return WithLayoutsOf(current, branches[0]->root_instruction()->shape());
        return current;
      }
      case HloOpcode::kCall:
        if (HloComputation* callee = instr.to_apply()) {
          return WithLayoutsOf(current, callee->root_instruction()->shape());
        }
        return current;
      case HloOpcode::kDot:
        return RowMajor(current);
      case HloOpcode::kConvolution:
        return ConvolutionShape(instr, -1);
      case HloOpcode::kTranspose:
        if (pref != nullptr) return WithLayoutsOf(current, *pref);
        return BitcastFriendlyTranspose(instr);
      case HloOpcode::kDynamicUpdateSlice:
      case HloOpcode::kScatter:
        return ChooseByOperands(instr, pref, {0});
      default:
        break;
    }
    if (instr.IsElementwise() && instr.opcode() != HloOpcode::kCopy) {
      std::vector<int64_t> all(instr.operand_count());
      for (int64_t i = 0; i < instr.operand_count(); ++i) all[i] = i;
      return ChooseByOperands(instr, pref, all);
    }
    return pref != nullptr ? WithLayoutsOf(current, *pref) : current;
  }

  // Among the preference, the listed operands' layouts and the current one, the layout that needs
  // the fewest copies (an operand of another rank never needs one); ties go to the earlier.
  Shape ChooseByOperands(const HloInstruction& instr, const Shape* pref,
                         const std::vector<int64_t>& operands) {
    const Shape& current = instr.shape();
    if (!current.IsArray()) return current;
    std::vector<Shape> candidates;
    if (pref != nullptr) candidates.push_back(WithLayoutsOf(current, *pref));
    for (int64_t i : operands) {
      const Shape& op = instr.operand(i)->shape();
      if (op.IsArray() && op.rank() == current.rank()) candidates.push_back(WithLayoutsOf(current, op));
    }
    candidates.push_back(current);
    const Shape* best = nullptr;
    int64_t best_cost = 0;
    for (const Shape& candidate : candidates) {
      int64_t cost = pref != nullptr && !SameLayouts(candidate, WithLayoutsOf(current, *pref));
      for (int64_t i : operands) {
        const Shape& op = instr.operand(i)->shape();
        if (op.IsArray() && op.rank() == current.rank() &&
            !SameLayouts(WithLayoutsOf(current, op), candidate)) {
          ++cost;
        }
      }
      if (best == nullptr || cost < best_cost) {
        best = &candidate;
        best_cost = cost;
      }
    }
    return *best;
  }

  // The result layout that makes the transpose a pure reinterpretation of its operand's bytes.
  Shape BitcastFriendlyTranspose(const HloInstruction& instr) {
    const Shape& operand = instr.operand(0)->shape();
    const std::vector<int64_t>& perm = instr.dimensions();
    if (!operand.has_layout() || static_cast<int64_t>(perm.size()) != operand.rank()) {
      return instr.shape();
    }
    std::vector<int64_t> inverse(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
    std::vector<int64_t> m2m;
    for (int64_t d : operand.layout().minor_to_major) m2m.push_back(inverse[d]);
    return WithMinorToMajor(instr.shape(), std::move(m2m));
  }

  // Convolution layouts in physical b01f (operand -1: the result, 0: input) and 01io (1: kernel).
  Shape ConvolutionShape(const HloInstruction& conv, int64_t which) {
    const Shape& shape = which < 0 ? conv.shape() : conv.operand(which)->shape();
    if (!conv.convolution_dimension_numbers || !shape.IsArray()) return shape;
    const ConvolutionDimensionNumbers& d = *conv.convolution_dimension_numbers;
    std::vector<int64_t> m2m;
    if (which < 0) {
      m2m = ConvOrder(shape.rank(), d.output_batch_dimension, d.output_spatial_dimensions, -1,
                      d.output_feature_dimension, false);
    } else if (which == 0) {
      m2m = ConvOrder(shape.rank(), d.input_batch_dimension, d.input_spatial_dimensions, -1,
                      d.input_feature_dimension, false);
    } else {
      m2m = ConvOrder(shape.rank(), -1, d.kernel_spatial_dimensions,
                      d.kernel_input_feature_dimension, d.kernel_output_feature_dimension, true);
    }
    return WithMinorToMajor(shape, std::move(m2m));
  }

  // The layout `user` needs operand i in, given the user's own layout (null: not known yet);
  // nullopt when any layout will do.
  std::optional<Shape> RequiredOperandShape(const HloInstruction& user, const Shape* user_shape,
                                            int64_t i) {
    const Shape& operand = user.operand(i)->shape();
    auto pinned = pinned_operand_shapes_.find(&user);
    if (pinned != pinned_operand_shapes_.end()) {
      if (i < static_cast<int64_t>(pinned->second.size())) {
        return WithLayoutsOf(operand, pinned->second[i]);
      }
      return std::nullopt;
    }
    switch (user.opcode()) {
      case HloOpcode::kTuple:
        if (user_shape != nullptr && user_shape->IsTuple() && i < user_shape->tuple_shapes_size()) {
          return WithLayoutsOf(operand, user_shape->tuple_shapes(i));
        }
        return std::nullopt;
      case HloOpcode::kWhile:
        if (HloComputation* body = user.while_body(); body && body->num_parameters() == 1) {
          return WithLayoutsOf(operand, body->parameter_instruction(0)->shape());
        }
        return std::nullopt;
      case HloOpcode::kConditional: {
        std::vector<HloComputation*> branches = user.branch_computations();
        if (i == 0 || i - 1 >= static_cast<int64_t>(branches.size()) ||
            branches[i - 1]->num_parameters() != 1) {
          return std::nullopt;
        }
        return WithLayoutsOf(operand, branches[i - 1]->parameter_instruction(0)->shape());
      }
      case HloOpcode::kCall:
        if (HloComputation* callee = user.to_apply(); callee && i < callee->num_parameters()) {
          return WithLayoutsOf(operand, callee->parameter_instruction(i)->shape());
        }
        return std::nullopt;
      case HloOpcode::kDot:
        return operand.IsArray() ? std::optional<Shape>(RowMajor(operand)) : std::nullopt;
      case HloOpcode::kConvolution:
        return ConvolutionShape(user, i);
      case HloOpcode::kDynamicUpdateSlice:
      case HloOpcode::kScatter:
        if (i != 0) return std::nullopt;
        break;
      case HloOpcode::kCopy:
        return std::nullopt;
      default:
        if (!user.IsElementwise()) return std::nullopt;
        break;
    }
    if (user_shape == nullptr || !user_shape->IsArray() || !operand.IsArray() ||
        operand.rank() != user_shape->rank()) {
      return std::nullopt;
    }
    return WithLayoutsOf(operand, *user_shape);
  }

  // `value` in the layouts of `target`: itself when they agree, else a copy (per array element of
  // a tuple). Copies are shared by users that want the same layout.
  HloInstruction* ConformTo(HloComputation* comp, HloInstruction* value, const Shape& target) {
    if (SameLayouts(value->shape(), target)) return value;
    const Shape& shape = value->shape();
    if (shape.IsArray()) {
      Shape copy_shape = WithAllLayouts(WithLayoutsOf(shape, target));
      auto key = std::make_pair(value, copy_shape.layout().ToString());
      if (auto it = copies_.find(key); it != copies_.end()) return it->second;
      auto copy = HloInstruction::CreateUnary(HloOpcode::kCopy, copy_shape, value);
      copy->metadata = value->metadata;
      HloInstruction* added = comp->AddInstruction(std::move(copy));
      copies_[key] = added;
      changed_ = true;
      return added;
    }
    if (!shape.IsTuple() || !target.IsTuple()) return value;
    std::vector<HloInstruction*> elements;
    for (int64_t i = 0; i < shape.tuple_shapes_size(); ++i) {
      auto gte = std::make_unique<HloInstruction>(HloOpcode::kGetTupleElement,
                                                  shape.tuple_shapes(i));
      gte->AppendOperand(value);
      gte->tuple_index_attr = i;
      HloInstruction* element = comp->AddInstruction(std::move(gte));
      elements.push_back(ConformTo(comp, element, target.tuple_shapes(i)));
    }
    auto tuple = std::make_unique<HloInstruction>(HloOpcode::kTuple, Shape());
    for (HloInstruction* e : elements) tuple->AppendOperand(e);
    tuple->set_shape(TupleOfOperands(*tuple));
    changed_ = true;
    return comp->AddInstruction(std::move(tuple));
  }

  HloModule& module_;
  // The CPU and GPU rules coincide today; the backend is kept so that they can part.
  [[maybe_unused]] LayoutBackend backend_;
  bool changed_ = false;
  std::unordered_map<const HloInstruction*, std::vector<Shape>> pinned_operand_shapes_;
  std::map<std::pair<HloInstruction*, std::string>, HloInstruction*> copies_;
};

}  // namespace

StatusOr<bool> LayoutAssignment::Run(HloModule& module) {
  if (module.entry_computation() == nullptr) return Error("layout-assignment: module has no entry");
  return Assigner(module, backend_).Run();
}

}  // namespace xlens
