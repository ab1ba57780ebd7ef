// The resources of a session: its variables, by (container, name), as TensorFlow's ResourceMgr
// holds them for VarHandleOp (resource variables) and VariableV2 (reference variables). A
// variable keeps its tensor between Session::Run calls.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "compiler/graph/tensor.h"

namespace xlens::graph {

// A variable's runtime state (TensorFlow's Var resource).
struct Var {
  std::mutex mu;
  Tensor value;  // not initialised until the first assignment
  DataType dtype = DT_INVALID;
  PartialShape shape;
  bool is_initialized() const { return value.IsInitialized(); }
};

// Any other per-session state a kernel needs (TensorFlow's ResourceBase): the XLA launch keeps
// its compilation cache here, as TensorFlow's device does.
class ResourceBase {
 public:
  virtual ~ResourceBase() = default;
};

class ResourceMgr {
 public:
  // The resource named `name`, made by `create` on first use.
  std::shared_ptr<ResourceBase> LookupOrCreateResource(
      const std::string& name, const std::function<std::shared_ptr<ResourceBase>()>& create);
  std::shared_ptr<ResourceBase> LookupResource(const std::string& name) const;
  // The variable named by the handle, created (uninitialised) on first use.
  std::shared_ptr<Var> LookupOrCreate(const std::string& container, const std::string& name,
                                           DataType dtype, const PartialShape& shape);
  // nullptr when no such variable exists.
  std::shared_ptr<Var> Lookup(const std::string& container, const std::string& name) const;
  // Every variable, by "container/name" (container empty: the name alone).
  std::map<std::string, std::shared_ptr<Var>> variables() const;
  void Clear();

 private:
  // Orders (container, name) keys and compares them with views of the handle's strings, so a
  // lookup copies no strings: a function with hundreds of captured variables looks every one up
  // on each call.
  struct KeyLess {
    using is_transparent = void;
    using View = std::pair<std::string_view, std::string_view>;
    static View AsView(const std::pair<std::string, std::string>& k) { return {k.first, k.second}; }
    static View AsView(const View& k) { return k; }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const { return AsView(a) < AsView(b); }
  };
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<Var>, KeyLess> variables_;
  std::map<std::string, std::shared_ptr<ResourceBase>> resources_;
};

}  // namespace xlens::graph
