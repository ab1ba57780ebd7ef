#include "compiler/graph/op_registry.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "compiler/graph/ops/register_ops.h"

namespace xlens::graph {

const OpRegistry& OpRegistry::Global() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry;
    RegisterArrayOps(*r);
    RegisterMathOps(*r);
    RegisterNnOps(*r);
    RegisterDepthwiseConvOps(*r);
    RegisterConv3DOps(*r);
    RegisterPooling3DOps(*r);
    RegisterStateOps(*r);
    RegisterRandomOps(*r);
    RegisterStringOps(*r);
    RegisterControlFlowOps(*r);
    RegisterFunctionOps(*r);
    RegisterTrainingOps(*r);
    RegisterSpecialMathOps(*r);
    RegisterShapeHelperOps(*r);
    RegisterEinsumOps(*r);
    RegisterImageOps(*r);
    RegisterFusedOps(*r);
    RegisterXlaOps(*r);
    RegisterListOps(*r);
    RegisterTensorArrayOps(*r);
    RegisterGradients(*r);
    return r;
  }();
  return *registry;
}

const OpRegistration* OpRegistry::Find(const std::string& op) const {
  auto it = ops_.find(op);
  return it == ops_.end() ? nullptr : it->second.get();
}

namespace {

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t prev = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cur = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1,
                         prev + (std::tolower(a[i - 1]) == std::tolower(b[j - 1]) ? 0 : 1)});
      prev = cur;
    }
  }
  return row[b.size()];
}

}  // namespace

StatusOr<const OpRegistration*> OpRegistry::LookUp(const std::string& op) const {
  if (const OpRegistration* r = Find(op)) return r;
  std::string best;
  size_t best_distance = 3;
  if (op.size() < 200) {
    for (const auto& [name, reg] : ops_) {
      size_t d = EditDistance(op, name);
      if (d < best_distance) {
        best_distance = d;
        best = name;
      }
    }
  }
  std::string message = "unknown op '" + op + "'";
  if (!best.empty()) message += " (did you mean '" + best + "'?)";
  return Status::Error(message);
}

std::vector<std::string> OpRegistry::OpNames() const {
  std::vector<std::string> names;
  for (const auto& [name, reg] : ops_) names.push_back(name);
  return names;
}

void OpRegistry::Register(OpRegistration registration) {
  std::string name = registration.op_def.name;
  ops_[name] = std::make_unique<OpRegistration>(std::move(registration));
}

OpRegistrationBuilder::OpRegistrationBuilder(OpRegistry& registry, std::string name)
    : registry_(registry), def_(std::move(name)) {}

OpRegistrationBuilder::~OpRegistrationBuilder() noexcept(false) {
  auto def = def_.Finalize();
  if (!def.ok()) {
    // A malformed registration is a bug in the op library, found by every test run.
    std::fprintf(stderr, "xlens: bad op registration: %s\n", def.status().message().c_str());
    std::abort();
  }
  reg_.op_def = std::move(*def);
  registry_.Register(std::move(reg_));
}

OpRegistrationBuilder& OpRegistrationBuilder::Input(std::string spec) {
  def_.Input(std::move(spec));
  return *this;
}
OpRegistrationBuilder& OpRegistrationBuilder::Output(std::string spec) {
  def_.Output(std::move(spec));
  return *this;
}
OpRegistrationBuilder& OpRegistrationBuilder::Attr(std::string spec) {
  def_.Attr(std::move(spec));
  return *this;
}
OpRegistrationBuilder& OpRegistrationBuilder::SetIsStateful() {
  def_.SetIsStateful();
  return *this;
}
OpRegistrationBuilder& OpRegistrationBuilder::SetIsCommutative() {
  def_.SetIsCommutative();
  return *this;
}
OpRegistrationBuilder& OpRegistrationBuilder::SetIsAggregate() {
  def_.SetIsAggregate();
  return *this;
}
OpRegistrationBuilder& OpRegistrationBuilder::SetAllowsUninitializedInput() {
  def_.SetAllowsUninitializedInput();
  return *this;
}
OpRegistrationBuilder& OpRegistrationBuilder::SetShapeFn(ShapeFn fn) {
  reg_.shape_fn = std::move(fn);
  return *this;
}
OpRegistrationBuilder& OpRegistrationBuilder::SetKernel(KernelFn fn) {
  reg_.kernel = std::move(fn);
  return *this;
}
OpRegistrationBuilder& OpRegistrationBuilder::SetGradient(GradFn fn) {
  reg_.gradient = std::move(fn);
  return *this;
}
OpRegistrationBuilder& OpRegistrationBuilder::CompileTimeConstInput(std::string arg) {
  reg_.compile_time_const_inputs.push_back(std::move(arg));
  return *this;
}
OpRegistrationBuilder& OpRegistrationBuilder::NoXlaKernel() {
  reg_.has_xla_kernel = false;
  return *this;
}

void SetGradient(OpRegistry& registry, const std::string& op, GradFn fn) {
  OpRegistration* reg = const_cast<OpRegistration*>(registry.Find(op));
  if (!reg) {
    std::fprintf(stderr, "xlens: gradient for unregistered op %s\n", op.c_str());
    std::abort();
  }
  reg->gradient = std::move(fn);
}

void SetKernel(const OpRegistry& registry, const std::string& op, KernelFn fn) {
  OpRegistration* reg = const_cast<OpRegistration*>(registry.Find(op));
  if (!reg) {
    std::fprintf(stderr, "xlens: kernel for unregistered op %s\n", op.c_str());
    std::abort();
  }
  reg->kernel = std::move(fn);
}

}  // namespace xlens::graph
