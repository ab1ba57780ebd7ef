// HloBuilder: what XLA's XlaBuilder is to tf2xla, reduced to what the op lowerings need. It adds
// instructions to one computation of a module, infers each result shape with the HLO shape
// inference (so a lowering that builds an ill-typed instruction fails at once with a message, not
// later in the verifier), gives every array shape its default layout, and stamps every
// instruction with the metadata of the TensorFlow node being lowered.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/hlo/attributes.h"
#include "compiler/hlo/module.h"
#include "compiler/support/status.h"

namespace xlens::cluster {

class HloBuilder {
 public:
  // Builds into `computation` (owned by `module`).
  HloBuilder(HloModule* module, HloComputation* computation);

  HloModule* module() const { return module_; }
  HloComputation* computation() const { return computation_; }

  // Metadata stamped on every instruction added from now on; `name` is the prefix of the
  // instruction names (XLA names them after the last component of the node's name).
  void SetMetadata(OpMetadata metadata, std::string name);
  const OpMetadata& metadata() const { return metadata_; }

  // Infers the shape of `instruction` (declared shape used where the opcode needs one: broadcast,
  // reshape, convert, iota, parameter), sets default layouts, adds it.
  StatusOr<HloInstruction*> Add(std::unique_ptr<HloInstruction> instruction);

  StatusOr<HloInstruction*> Parameter(int64_t number, const Shape& shape, std::string name);
  StatusOr<HloInstruction*> Constant(Literal literal);
  // A scalar of `type` holding `value` (converted as a C++ cast would).
  StatusOr<HloInstruction*> ScalarConstant(PrimitiveType type, double value);
  // `value` broadcast to `dims` with the element type of `type`.
  StatusOr<HloInstruction*> FullConstant(PrimitiveType type, double value,
                                         const std::vector<int64_t>& dims);
  StatusOr<HloInstruction*> Unary(HloOpcode opcode, HloInstruction* operand);
  // Elementwise binary op on operands of identical dimensions.
  StatusOr<HloInstruction*> Binary(HloOpcode opcode, HloInstruction* lhs, HloInstruction* rhs);
  StatusOr<HloInstruction*> Compare(HloInstruction* lhs, HloInstruction* rhs,
                                    ComparisonDirection direction);
  StatusOr<HloInstruction*> Select(HloInstruction* pred, HloInstruction* on_true,
                                   HloInstruction* on_false);
  StatusOr<HloInstruction*> Convert(HloInstruction* operand, PrimitiveType type);
  // The operand's bits read as `type` (of the same width), its dimensions kept.
  StatusOr<HloInstruction*> BitcastConvert(HloInstruction* operand, PrimitiveType type);
  StatusOr<HloInstruction*> Reshape(HloInstruction* operand, const std::vector<int64_t>& dims);
  // XLA's broadcast: operand dimension i becomes result dimension `dimensions[i]`.
  StatusOr<HloInstruction*> Broadcast(HloInstruction* operand, const std::vector<int64_t>& dims,
                                      const std::vector<int64_t>& dimensions);
  // NumPy broadcasting of `operand` to `dims` (its dimensions aligned to the right; size-1
  // dimensions stretched). Returns the operand itself when it already has `dims`.
  StatusOr<HloInstruction*> BroadcastTo(HloInstruction* operand, const std::vector<int64_t>& dims);
  StatusOr<HloInstruction*> Transpose(HloInstruction* operand, const std::vector<int64_t>& perm);
  StatusOr<HloInstruction*> Reverse(HloInstruction* operand, const std::vector<int64_t>& dims);
  StatusOr<HloInstruction*> Slice(HloInstruction* operand, const std::vector<int64_t>& starts,
                                  const std::vector<int64_t>& limits,
                                  const std::vector<int64_t>& strides);
  StatusOr<HloInstruction*> Concatenate(const std::vector<HloInstruction*>& operands,
                                        int64_t dimension);
  StatusOr<HloInstruction*> Pad(HloInstruction* operand, HloInstruction* padding_value,
                                const PaddingConfig& config);
  StatusOr<HloInstruction*> Iota(PrimitiveType type, const std::vector<int64_t>& dims,
                                 int64_t iota_dimension);
  StatusOr<HloInstruction*> Dot(HloInstruction* lhs, HloInstruction* rhs,
                                const DotDimensionNumbers& dnums);
  StatusOr<HloInstruction*> Gather(HloInstruction* operand, HloInstruction* indices,
                                   const GatherDimensionNumbers& dnums,
                                   const std::vector<int64_t>& slice_sizes);
  // Reduces `dimensions` of `operand` with the scalar computation `combiner` (add, multiply,
  // maximum, minimum, and, or) applied from `init`.
  StatusOr<HloInstruction*> Reduce(HloInstruction* operand, HloInstruction* init,
                                   const std::vector<int64_t>& dimensions, HloOpcode combiner);
  // The index of the maximum (`is_max`) or minimum along `dimension`, the first index winning
  // ties: a reduce to the extreme value, then a reduce to the smallest index holding it.
  StatusOr<HloInstruction*> ArgMinMax(HloInstruction* operand, int64_t dimension,
                                      PrimitiveType index_type, bool is_max);
  // Reduces each window of `operand` with `combiner` from `init` (pooling, cumulative sums).
  StatusOr<HloInstruction*> ReduceWindow(HloInstruction* operand, HloInstruction* init,
                                         const Window& window, HloOpcode combiner);
  // Scatters `source` onto the positions of `operand` that a `select` comparison (GE: the first
  // maximum of each window) picks, adding where windows overlap (max-pool gradients).
  StatusOr<HloInstruction*> SelectAndScatter(HloInstruction* operand, HloInstruction* source,
                                             HloInstruction* init, const Window& window);
  StatusOr<HloInstruction*> Convolution(HloInstruction* lhs, HloInstruction* rhs,
                                        const Window& window,
                                        const ConvolutionDimensionNumbers& dnums,
                                        int64_t feature_group_count);
  // Scatters `updates` into `operand` at `indices`, combining with `combiner` (add for sums).
  StatusOr<HloInstruction*> Scatter(HloInstruction* operand, HloInstruction* indices,
                                    HloInstruction* updates, const ScatterDimensionNumbers& dnums,
                                    HloOpcode combiner);
  StatusOr<HloInstruction*> Tuple(const std::vector<HloInstruction*>& elements);
  StatusOr<HloInstruction*> GetTupleElement(HloInstruction* tuple, int64_t index);
  StatusOr<HloInstruction*> Copy(HloInstruction* operand);

 private:
  // A computation `(x, y) -> combiner(x, y)` of scalars of `type`, added to the module before
  // the computation being built; one per (combiner, type), reused.
  HloComputation* ScalarComputation(HloOpcode combiner, PrimitiveType type);
  // `(x, y) -> compare(x, y, direction)` on scalars of `type` (select-and-scatter's select).
  HloComputation* ComparatorComputation(ComparisonDirection direction, PrimitiveType type);

  HloModule* module_;
  HloComputation* computation_;
  OpMetadata metadata_;
  // Gives the instructions of a computation just added module-unique names.
  void UniquifyNames(HloComputation& computation);
  std::string name_;
  std::map<std::pair<HloOpcode, PrimitiveType>, HloComputation*> scalar_computations_;
};

}  // namespace xlens::cluster
