// A tensor shape as TensorFlow's shape inference knows it: the rank may be unknown, and each
// dimension may be unknown (-1), as in TensorShapeProto (`unknown_rank`, `dim { size: -1 }`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace xlens::graph {

class PartialShape {
 public:
  static constexpr int64_t kUnknownDim = -1;

  PartialShape() : unknown_rank_(true) {}  // unknown rank
  explicit PartialShape(std::vector<int64_t> dims) : unknown_rank_(false), dims_(std::move(dims)) {}
  static PartialShape UnknownRank() { return PartialShape(); }
  static PartialShape UnknownOfRank(int64_t rank) {
    return PartialShape(std::vector<int64_t>(rank, kUnknownDim));
  }
  static PartialShape Scalar() { return PartialShape(std::vector<int64_t>{}); }

  bool unknown_rank() const { return unknown_rank_; }
  // -1 when the rank is unknown.
  int64_t rank() const { return unknown_rank_ ? -1 : static_cast<int64_t>(dims_.size()); }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t dim(int64_t i) const { return dims_[i]; }
  void set_dim(int64_t i, int64_t size) { dims_[i] = size; }
  bool IsFullyDefined() const;
  // Product of the dimensions, -1 when any is unknown.
  int64_t num_elements() const;
  // Whether a tensor of `dims` has this shape.
  bool IsCompatibleWith(const std::vector<int64_t>& dims) const;
  bool IsCompatibleWith(const PartialShape& other) const;
  // The more specific of two compatible shapes (`this` where they disagree).
  PartialShape Merge(const PartialShape& other) const;

  // "[2,?,3]", "<unknown>", "[]" (TensorFlow's DebugString style).
  std::string ToString() const;

  bool operator==(const PartialShape& other) const {
    return unknown_rank_ == other.unknown_rank_ && dims_ == other.dims_;
  }

 private:
  bool unknown_rank_;
  std::vector<int64_t> dims_;
};

std::string DimsToString(const std::vector<int64_t>& dims);  // "[2,3]"

}  // namespace xlens::graph
