#include "compiler/graph/tensor.h"

#include <cstring>

#include "compiler/hlo/shape.h"

namespace xlens::graph {
namespace {

int64_t CountElements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

}  // namespace

Tensor::Tensor(DataType dtype, std::vector<int64_t> dims)
    : dtype_(RemoveRefType(dtype)), dims_(std::move(dims)), num_elements_(CountElements(dims_)) {
  if (dtype_ == DT_STRING) {
    strings_ = std::make_shared<std::vector<std::string>>(num_elements_);
  } else if (dtype_ == DT_RESOURCE) {
    handles_ = std::make_shared<std::vector<ResourceHandle>>(num_elements_);
  } else if (dtype_ == DT_VARIANT) {
    variants_ = std::make_shared<std::vector<std::shared_ptr<VariantValue>>>(num_elements_);
  } else {
    literal_ = std::make_shared<Literal>(Shape(ToPrimitiveType(dtype_), dims_));
  }
}

StatusOr<Tensor> Tensor::Create(DataType dtype, std::vector<int64_t> dims, int64_t max_bytes) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return Status::Error("negative dimension in shape " + DimsToString(dims));
    if (d != 0 && n > INT64_MAX / d) {
      return Status::Error("shape " + DimsToString(dims) + " has more elements than fit in 64 bits");
    }
    n *= d;
  }
  dtype = RemoveRefType(dtype);
  if (dtype != DT_STRING && dtype != DT_RESOURCE && dtype != DT_VARIANT &&
      ToPrimitiveType(dtype) == PrimitiveType::PRIMITIVE_TYPE_INVALID) {
    return Status::Error("tensors of type " + DataTypeName(dtype) + " are not supported");
  }
  int64_t element_size = DataTypeSize(dtype);
  if (element_size == 0) element_size = 32;  // strings and handles: at least their header
  if (n > max_bytes / element_size) {
    return Status::Error("a " + DataTypeName(dtype) + " tensor of shape " + DimsToString(dims) +
                         " would need more than the limit of " + std::to_string(max_bytes) +
                         " bytes");
  }
  return Tensor(dtype, std::move(dims));
}

StatusOr<Tensor> Tensor::FromLiteral(Literal literal) {
  if (!literal.shape().IsArray()) return Status::Error("a tensor must be an array, not a tuple");
  std::optional<DataType> dtype = FromPrimitiveType(literal.shape().element_type());
  if (!dtype) {
    return Status::Error(std::string("no TensorFlow type for element type ") +
                         std::string(PrimitiveTypeName(literal.shape().element_type())));
  }
  if (literal.is_elided() || literal.is_text_only()) {
    return Status::Error("the literal holds no data");
  }
  Tensor t;
  t.dtype_ = *dtype;
  t.dims_ = literal.shape().dimensions();
  t.num_elements_ = CountElements(t.dims_);
  t.literal_ = std::make_shared<Literal>(std::move(literal));
  return t;
}

Tensor Tensor::StringScalar(std::string value) {
  Tensor t(DT_STRING, {});
  t.strings()[0] = std::move(value);
  return t;
}

Tensor Tensor::ResourceScalar(ResourceHandle handle) {
  Tensor t(DT_RESOURCE, {});
  t.handles()[0] = std::move(handle);
  return t;
}

std::vector<int64_t> Tensor::AsInt64Vector() const {
  std::vector<int64_t> out(num_elements_);
  for (int64_t i = 0; i < num_elements_; ++i) out[i] = literal_->GetAsInt64(i);
  return out;
}

StatusOr<Literal> Tensor::ToLiteral() const {
  if (!literal_) {
    return Status::Error("a " + DataTypeName(dtype_) + " tensor has no array form");
  }
  if (literal_->shape().dimensions() == dims_) return *literal_;
  Literal lit(Shape(literal_->shape().element_type(), dims_));
  std::memcpy(lit.untyped_data(), literal_->untyped_data(), literal_->size_bytes());
  return lit;
}

Tensor Tensor::Reshaped(std::vector<int64_t> dims) const {
  // The elements are shared: only dims_ changes (the literal's own shape is not consulted for
  // element access, and ToLiteral gives a literal of the tensor's dims).
  Tensor t = *this;
  t.dims_ = std::move(dims);
  return t;
}

void Tensor::MakeUnique() {
  if (literal_ && literal_.use_count() > 1) literal_ = std::make_shared<Literal>(*literal_);
  if (strings_ && strings_.use_count() > 1) {
    strings_ = std::make_shared<std::vector<std::string>>(*strings_);
  }
  if (handles_ && handles_.use_count() > 1) {
    handles_ = std::make_shared<std::vector<ResourceHandle>>(*handles_);
  }
  if (variants_ && variants_.use_count() > 1) {
    variants_ = std::make_shared<std::vector<std::shared_ptr<VariantValue>>>(*variants_);
  }
}

Tensor Tensor::Clone() const {
  Tensor t = *this;
  if (literal_) t.literal_ = std::make_shared<Literal>(*literal_);
  if (strings_) t.strings_ = std::make_shared<std::vector<std::string>>(*strings_);
  if (handles_) t.handles_ = std::make_shared<std::vector<ResourceHandle>>(*handles_);
  if (variants_) {
    t.variants_ = std::make_shared<std::vector<std::shared_ptr<VariantValue>>>(*variants_);
    for (auto& v : *t.variants_) {
      if (v) v = v->Clone();
    }
  }
  return t;
}

bool Tensor::SharesBufferWith(const Tensor& other) const {
  return (literal_ && literal_ == other.literal_) || (strings_ && strings_ == other.strings_) ||
         (handles_ && handles_ == other.handles_) || (variants_ && variants_ == other.variants_);
}

std::string Tensor::DebugString(int64_t max_elements) const {
  if (!IsInitialized()) return "<uninitialized tensor>";
  std::string out = DataTypeName(dtype_) + " " + DimsToString(dims_) + " [";
  int64_t shown = std::min(num_elements_, max_elements);
  for (int64_t i = 0; i < shown; ++i) {
    if (i) out += ", ";
    if (strings_) {
      out += "\"" + (*strings_)[i] + "\"";
    } else if (handles_) {
      out += (*handles_)[i].container + "/" + (*handles_)[i].name;
    } else if (variants_) {
      out += (*variants_)[i] ? (*variants_)[i]->DebugString() : "<empty variant>";
    } else {
      out += literal_->ElementToString(i);
    }
  }
  if (shown < num_elements_) out += ", ...";
  return out + "]";
}

bool Tensor::Identical(const Tensor& other) const {
  if (dtype_ != other.dtype_ || dims_ != other.dims_) return false;
  if (strings_) return *strings_ == *other.strings_;
  if (handles_) return *handles_ == *other.handles_;
  if (variants_) {
    for (int64_t i = 0; i < num_elements_; ++i) {
      const auto& a = (*variants_)[i];
      const auto& b = (*other.variants_)[i];
      if (a != b && (!a || !b || !a->Identical(*b))) return false;
    }
    return true;
  }
  if (!literal_ || !other.literal_) return literal_ == other.literal_;
  return literal_->size_bytes() == other.literal_->size_bytes() &&
         std::memcmp(literal_->untyped_data(), other.literal_->untyped_data(),
                     literal_->size_bytes()) == 0;
}

}  // namespace xlens::graph
