#include "compiler/graph/resource_mgr.h"

namespace xlens::graph {

std::shared_ptr<Var> ResourceMgr::LookupOrCreate(const std::string& container,
                                                      const std::string& name, DataType dtype,
                                                      const PartialShape& shape) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = variables_.find(KeyLess::View(container, name));
  if (it == variables_.end()) it = variables_.emplace(std::make_pair(container, name), nullptr).first;
  std::shared_ptr<Var>& slot = it->second;
  if (!slot) {
    slot = std::make_shared<Var>();
    slot->dtype = dtype;
    slot->shape = shape;
  }
  return slot;
}

std::shared_ptr<Var> ResourceMgr::Lookup(const std::string& container,
                                              const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = variables_.find(KeyLess::View(container, name));
  return it == variables_.end() ? nullptr : it->second;
}

std::map<std::string, std::shared_ptr<Var>> ResourceMgr::variables() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, std::shared_ptr<Var>> out;
  for (const auto& [key, var] : variables_) {
    out[key.first.empty() ? key.second : key.first + "/" + key.second] = var;
  }
  return out;
}

void ResourceMgr::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  variables_.clear();
}

std::shared_ptr<ResourceBase> ResourceMgr::LookupOrCreateResource(
    const std::string& name, const std::function<std::shared_ptr<ResourceBase>()>& create) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = resources_[name];
  if (!slot) slot = create();
  return slot;
}

std::shared_ptr<ResourceBase> ResourceMgr::LookupResource(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = resources_.find(name);
  return it == resources_.end() ? nullptr : it->second;
}

}  // namespace xlens::graph
