#include "compiler/graph/partial_shape.h"

namespace xlens::graph {

bool PartialShape::IsFullyDefined() const {
  if (unknown_rank_) return false;
  for (int64_t d : dims_) {
    if (d < 0) return false;
  }
  return true;
}

int64_t PartialShape::num_elements() const {
  if (!IsFullyDefined()) return -1;
  int64_t n = 1;
  for (int64_t d : dims_) {
    if (d != 0 && n > INT64_MAX / d) return INT64_MAX;
    n *= d;
  }
  return n;
}

bool PartialShape::IsCompatibleWith(const std::vector<int64_t>& dims) const {
  if (unknown_rank_) return true;
  if (dims.size() != dims_.size()) return false;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims_[i] >= 0 && dims_[i] != dims[i]) return false;
  }
  return true;
}

bool PartialShape::IsCompatibleWith(const PartialShape& other) const {
  if (unknown_rank_ || other.unknown_rank_) return true;
  if (dims_.size() != other.dims_.size()) return false;
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (dims_[i] >= 0 && other.dims_[i] >= 0 && dims_[i] != other.dims_[i]) return false;
  }
  return true;
}

PartialShape PartialShape::Merge(const PartialShape& other) const {
  if (unknown_rank_) return other;
  if (other.unknown_rank_ || other.dims_.size() != dims_.size()) return *this;
  PartialShape out = *this;
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (out.dims_[i] < 0) out.dims_[i] = other.dims_[i];
  }
  return out;
}

std::string PartialShape::ToString() const {
  if (unknown_rank_) return "<unknown>";
  std::string out = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) out += ",";
    out += dims_[i] < 0 ? "?" : std::to_string(dims_[i]);
  }
  return out + "]";
}

std::string DimsToString(const std::vector<int64_t>& dims) {
  return PartialShape(dims).ToString();
}

}  // namespace xlens::graph
