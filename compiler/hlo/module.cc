#include "compiler/hlo/module.h"

#include <algorithm>

#include <fmt/format.h>

namespace xlens {

std::string ComputationLayout::ToString() const {
  std::vector<std::string> params;
  for (const Shape& s : parameters) params.push_back(s.ToString());
  return fmt::format("({})->{}", fmt::join(params, ", "), result.ToString());
}

HloComputation* HloModule::AddComputation(std::unique_ptr<HloComputation> computation,
                                          bool is_entry) {
  HloComputation* c = computation.get();
  c->set_parent(this);
  computations_.push_back(std::move(computation));
  if (is_entry) entry_ = c;
  return c;
}

HloComputation* HloModule::AddComputationBefore(std::unique_ptr<HloComputation> computation,
                                                const HloComputation* before) {
  HloComputation* c = computation.get();
  c->set_parent(this);
  c->set_name(UniqueComputationName(c->name()));
  auto it = std::find_if(computations_.begin(), computations_.end(),
                         [&](const auto& p) { return p.get() == before; });
  computations_.insert(it, std::move(computation));
  return c;
}

void HloModule::RemoveComputation(HloComputation* computation) {
  computations_.erase(std::remove_if(computations_.begin(), computations_.end(),
                                     [&](const auto& p) { return p.get() == computation; }),
                      computations_.end());
}

std::vector<HloComputation*> HloModule::computations() const {
  std::vector<HloComputation*> out;
  for (const auto& c : computations_) out.push_back(c.get());
  return out;
}

HloComputation* HloModule::GetComputationWithName(std::string_view name) const {
  for (const auto& c : computations_) {
    if (c->name() == name) return c.get();
  }
  return nullptr;
}

int64_t HloModule::instruction_count() const {
  int64_t n = 0;
  for (const auto& c : computations_) n += c->instruction_count();
  return n;
}

std::string HloModule::UniqueInstructionName(std::string_view prefix) {
  std::string base(prefix);
  if (instruction_names_.insert(base).second) return base;
  // Strip an existing numeric suffix so "add.3" grows as "add.4", not "add.3.1".
  auto dot = base.rfind('.');
  if (dot != std::string::npos && dot + 1 < base.size() &&
      std::all_of(base.begin() + dot + 1, base.end(), ::isdigit)) {
    base = base.substr(0, dot);
  }
  for (int64_t& i = next_name_suffix_[base];;) {
    std::string candidate = fmt::format("{}.{}", base, ++i);
    if (instruction_names_.insert(candidate).second) return candidate;
  }
}

std::string HloModule::UniqueComputationName(std::string_view prefix) {
  std::string base(prefix);
  if (GetComputationWithName(base) == nullptr) return base;
  // Counting on from the last suffix handed out keeps a pass that creates thousands of fused
  // computations linear in their number.
  for (int64_t& i = next_computation_suffix_[base];;) {
    std::string candidate = fmt::format("{}.{}", base, ++i);
    if (GetComputationWithName(candidate) == nullptr) return candidate;
  }
}

}  // namespace xlens
