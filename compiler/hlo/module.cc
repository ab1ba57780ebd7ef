#include "compiler/hlo/module.h"

#include <algorithm>

#include <fmt/format.h>

namespace xlens {

std::string ComputationLayout::ToString() const {
  std::vector<std::string> params;
  for (const Shape& s : parameters) params.push_back(s.ToString());
  return fmt::format("({})->{}", fmt::join(params, ", "), result.ToString());
}

namespace {

// The slot of `computation` in `list`, searched from the back: the computations passes add and
// remove (fused ones) sit just before their caller, usually the entry, which comes last.
template <typename List>
auto FindFromBack(List& list, const HloComputation* computation) {
  for (auto it = list.end(); it != list.begin();) {
    --it;
    if (it->get() == computation) return it;
  }
  return list.end();
}

}  // namespace

void HloComputation::set_name(std::string name) {
  if (parent_ != nullptr) parent_->OnComputationRenamed(name_, name);
  name_ = std::move(name);
}

void HloModule::OnComputationRenamed(const std::string& old_name, const std::string& new_name) {
  auto it = computation_names_.find(old_name);
  if (it != computation_names_.end() && --it->second == 0) computation_names_.erase(it);
  ++computation_names_[new_name];
}

HloComputation* HloModule::AddComputation(std::unique_ptr<HloComputation> computation,
                                          bool is_entry) {
  HloComputation* c = computation.get();
  c->set_parent(this);
  ++computation_names_[c->name()];
  computations_.push_back(std::move(computation));
  if (is_entry) entry_ = c;
  return c;
}

HloComputation* HloModule::AddComputationBefore(std::unique_ptr<HloComputation> computation,
                                                const HloComputation* before) {
  HloComputation* c = computation.get();
  c->set_name(UniqueComputationName(c->name()));
  c->set_parent(this);
  ++computation_names_[c->name()];
  computations_.insert(FindFromBack(computations_, before), std::move(computation));
  return c;
}

void HloModule::RemoveComputation(HloComputation* computation) {
  auto it = FindFromBack(computations_, computation);
  if (it == computations_.end()) return;
  auto name = computation_names_.find(computation->name());
  if (name != computation_names_.end() && --name->second == 0) computation_names_.erase(name);
  computations_.erase(it);
}

void HloModule::MoveComputationBefore(HloComputation* computation, const HloComputation* before) {
  auto to = FindFromBack(computations_, before);
  if (to != computations_.begin() && to != computations_.end() && (to - 1)->get() == computation) {
    return;  // already there: the usual case of a fusion growing again
  }
  auto from = FindFromBack(computations_, computation);
  if (from == computations_.end()) return;
  std::unique_ptr<HloComputation> owned = std::move(*from);
  computations_.erase(from);
  computations_.insert(FindFromBack(computations_, before), std::move(owned));
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
  if (!computation_names_.count(base)) return base;
  // Counting on from the last suffix handed out keeps a pass that creates thousands of fused
  // computations linear in their number.
  for (int64_t& i = next_computation_suffix_[base];;) {
    std::string candidate = fmt::format("{}.{}", base, ++i);
    if (!computation_names_.count(candidate)) return candidate;
  }
}

}  // namespace xlens
