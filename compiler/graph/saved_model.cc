#include "compiler/graph/saved_model.h"

#include <algorithm>
#include <climits>
#include <deque>
#include <map>
#include <set>

#include <fmt/format.h>
#include <google/protobuf/io/coded_stream.h>

#include "compiler/graph/graph_def_io.h"
#include "compiler/graph/placeholder_shape.h"
#include "compiler/graph/proto/saved_model.pb.h"
#include "compiler/graph/tensor_bundle.h"
#include "compiler/graph/variable_nodes.h"
#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"

namespace xlens::graph {
namespace {

namespace tfp = ::xlens::tfproto;

// The object graph's root holds the variables under child names; a key is their escaped path.
constexpr char kVariableValue[] = "VARIABLE_VALUE";
constexpr char kObjectGraphKey[] = "_CHECKPOINTABLE_OBJECT_GRAPH";

std::string Q(std::string_view name) { return "'" + EscapeForTerminal(TruncateUtf8(name, 200)) + "'"; }

template <typename Message>
bool ParseBinary(std::string_view bytes, Message* message) {
  if (bytes.size() > static_cast<size_t>(INT_MAX)) return false;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  in.SetRecursionLimit(kMaxGraphDefNesting);
  return message->ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
}

PartialShape ShapeFromProto(const tfp::TensorShapeProto& proto) {
  if (proto.unknown_rank()) return PartialShape::UnknownRank();
  std::vector<int64_t> dims;
  for (const auto& d : proto.dim()) dims.push_back(d.size() < 0 ? PartialShape::kUnknownDim : d.size());
  return PartialShape(std::move(dims));
}

std::string NodeOfTensor(const std::string& tensor) {
  std::string name = tensor;
  if (!name.empty() && name[0] == '^') name.erase(0, 1);
  const size_t colon = name.rfind(':');
  if (colon != std::string::npos && colon + 1 < name.size() &&
      name.find_first_not_of("0123456789", colon + 1) == std::string::npos) {
    name.resize(colon);
  }
  return name;
}

// TensorFlow's _escape_local_name (trackable/base.py): '.' -> "..", '/' -> ".S".
std::string EscapeLocalName(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c == '.') {
      out += "..";
    } else if (c == '/') {
      out += ".S";
    } else {
      out += c;
    }
  }
  return out;
}

// Each node's checkpoint key by its shortest path of child names from the root, as TensorFlow's
// ObjectGraphView names objects (breadth first, children in order).
std::map<int, std::string> ObjectPaths(const tfp::SavedObjectGraph& graph) {
  std::map<int, std::string> paths;
  if (graph.nodes_size() == 0) return paths;
  paths[0] = "";
  std::deque<int> queue = {0};
  while (!queue.empty()) {
    const int id = queue.front();
    queue.pop_front();
    for (const auto& child : graph.nodes(id).children()) {
      const int c = child.node_id();
      if (c < 0 || c >= graph.nodes_size() || paths.count(c)) continue;
      const std::string& base = paths[id];
      paths[c] = (base.empty() ? "" : base + "/") + EscapeLocalName(child.local_name());
      queue.push_back(c);
    }
  }
  return paths;
}

// The function names a node's attrs refer to (func attrs and lists of them).
void FunctionsOfAttrs(const AttrMap& attrs, std::vector<std::string>* out) {
  for (const auto& [name, value] : attrs) {
    if (value.kind() == AttrValue::Kind::kFunc) {
      out->push_back(value.func().name);
    } else if (value.kind() == AttrValue::Kind::kList) {
      for (const NameAttrList& f : value.list().func) out->push_back(f.name);
    }
  }
}

}  // namespace

bool IsSavedModelDirectory(const std::string& path) {
  return GetPathKind(path) == PathKind::kDirectory &&
         GetPathKind(path + "/saved_model.pb") != PathKind::kMissing;
}

StatusOr<SavedModel> ReadSavedModel(const std::string& directory, const SavedModelOptions& options) {
  const std::string pb = directory + "/saved_model.pb";
  if (GetPathKind(pb) == PathKind::kMissing) {
    if (GetPathKind(directory + "/saved_model.pbtxt") != PathKind::kMissing) {
      return Error(fmt::format("{}: a text SavedModel; xlens reads saved_model.pb, as "
                               "tf.saved_model.save writes it",
                               DisplayPath(directory + "/saved_model.pbtxt")));
    }
    return Error(fmt::format("{}: no such file: expected a SavedModel directory holding "
                             "saved_model.pb",
                             DisplayPath(pb)));
  }
  ASSIGN_OR_RETURN(std::string bytes, ReadFile(pb, std::min<int64_t>(MaxInputBytes(), INT_MAX)));
  return ParseSavedModel(bytes, directory, options);
}

StatusOr<SavedModel> ParseSavedModel(std::string_view bytes, const std::string& directory,
                                     const SavedModelOptions& options) {
  const std::string file = DisplayPath(directory + "/saved_model.pb");
  tfp::SavedModel proto;
  if (!ParseBinary(bytes, &proto)) {
    return Error(file + ": not a binary SavedModel: truncated or corrupt, or nested more than " +
                 std::to_string(kMaxGraphDefNesting) + " levels deep");
  }
  if (proto.meta_graphs_size() == 0) return Error(file + ": the SavedModel holds no meta graph");
  // The meta graph tagged "serve" (what TensorFlow Serving loads), else the only one.
  int chosen = -1;
  std::vector<std::string> tag_sets;
  for (int i = 0; i < proto.meta_graphs_size(); ++i) {
    const auto& tags = proto.meta_graphs(i).meta_info_def().tags();
    tag_sets.push_back(fmt::format("[{}]", fmt::join(tags, ",")));
    if (chosen < 0 && std::find(tags.begin(), tags.end(), "serve") != tags.end()) chosen = i;
  }
  if (chosen < 0 && proto.meta_graphs_size() == 1) chosen = 0;
  if (chosen < 0) {
    return Error(fmt::format("{}: no meta graph is tagged 'serve' (tags: {})", file,
                             EscapeForTerminal(fmt::format("{}", fmt::join(tag_sets, " ")))));
  }
  const tfp::MetaGraphDef& meta = proto.meta_graphs(chosen);

  SavedModel model;
  model.directory = directory;
  model.shown = DisplayPath(directory);
  for (const std::string& tag : meta.meta_info_def().tags()) model.tags.push_back(tag);

  // The signature: asked for, else serving_default, else the only one.
  for (const auto& [key, sig] : meta.signature_def()) {
    if (key != "__saved_model_init_op") model.signature_keys.push_back(key);
  }
  std::sort(model.signature_keys.begin(), model.signature_keys.end());
  const std::string keys = EscapeForTerminal(fmt::format("{}", fmt::join(model.signature_keys, ", ")));
  std::string key = options.signature;
  if (key.empty()) {
    if (meta.signature_def().count("serving_default")) {
      key = "serving_default";
    } else if (model.signature_keys.size() == 1) {
      key = model.signature_keys[0];
    } else if (model.signature_keys.empty()) {
      return Error(file + ": the SavedModel has no signatures (save it with signatures=..., or a "
                          "tf.function with an input_signature)");
    } else {
      return Error(fmt::format("{}: several signatures ({}): choose one with --signature", file, keys));
    }
  }
  auto sig_it = meta.signature_def().find(key);
  if (sig_it == meta.signature_def().end()) {
    return Error(fmt::format("{}: no signature {} (signatures: {})", file, Q(key),
                             model.signature_keys.empty() ? "none" : keys));
  }
  model.signature.key = key;
  auto tensors = [&](const auto& map, const char* what,
                     std::vector<SavedModelTensor>* out) -> Status {
    for (const auto& [name, info] : map) {
      if (info.encoding_case() != tfp::TensorInfo::kName) {
        return Error(fmt::format("{}: signature {} {} {} is a sparse or composite tensor; xlens "
                                 "reads dense ones",
                                 file, Q(key), what, Q(name)));
      }
      const int dtype = static_cast<int>(info.dtype());
      out->push_back(SavedModelTensor{name, info.name(),
                                      IsValidDataType(dtype) ? static_cast<DataType>(dtype) : DT_INVALID,
                                      ShapeFromProto(info.tensor_shape())});
    }
    std::sort(out->begin(), out->end(),
              [](const SavedModelTensor& a, const SavedModelTensor& b) { return a.key < b.key; });
    return OkStatus();
  };
  RETURN_IF_ERROR(tensors(sig_it->second.inputs(), "input", &model.signature.inputs));
  RETURN_IF_ERROR(tensors(sig_it->second.outputs(), "output", &model.signature.outputs));

  // The meta graph's GraphDef, through the GraphDef reader and its checks.
  ASSIGN_OR_RETURN(GraphDef whole, ParseGraphDef(meta.graph_def(), GraphDefFormat::kBinary, file));

  // Keep what the signature's outputs need, and its inputs.
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < whole.node.size(); ++i) index.emplace(whole.node[i].name, i);
  std::vector<bool> keep(whole.node.size(), false);
  std::vector<size_t> stack;
  auto want = [&](const std::string& tensor, const std::string& what) -> Status {
    auto it = index.find(NodeOfTensor(tensor));
    if (it == index.end()) {
      return Error(fmt::format("{}: signature {} {}: tensor {} names no node of the graph", file,
                               Q(key), what, Q(tensor)));
    }
    if (!keep[it->second]) {
      keep[it->second] = true;
      stack.push_back(it->second);
    }
    return OkStatus();
  };
  for (const SavedModelTensor& t : model.signature.outputs) {
    RETURN_IF_ERROR(want(t.tensor, "output " + Q(t.key)));
  }
  for (const SavedModelTensor& t : model.signature.inputs) {
    RETURN_IF_ERROR(want(t.tensor, "input " + Q(t.key)));
  }
  // The model's init op (TF2's __saved_model_init_op signature: table initializers), which
  // TensorFlow's loader runs once after restoring the variables.
  if (auto init = meta.signature_def().find("__saved_model_init_op"); init != meta.signature_def().end()) {
    for (const auto& [name, info] : init->second.outputs()) {
      if (info.encoding_case() != tfp::TensorInfo::kName) continue;
      RETURN_IF_ERROR(want(info.name(), "__saved_model_init_op"));
      model.init_op = NodeOfTensor(info.name());
    }
  }
  while (!stack.empty()) {
    const NodeDef& n = whole.node[stack.back()];
    stack.pop_back();
    for (const std::string& input : n.input) {
      // The graph was read and checked; an input naming no node is left to the graph builder.
      auto it = index.find(NodeOfTensor(input));
      if (it != index.end() && !keep[it->second]) {
        keep[it->second] = true;
        stack.push_back(it->second);
      }
    }
  }
  // The functions the kept nodes call, and those they call in turn.
  std::set<std::string> functions;
  std::vector<std::string> pending;
  for (size_t i = 0; i < whole.node.size(); ++i) {
    if (!keep[i]) continue;
    FunctionsOfAttrs(whole.node[i].attr, &pending);
    pending.push_back(whole.node[i].op);  // a node may call a function by its name
  }
  while (!pending.empty()) {
    const std::string name = std::move(pending.back());
    pending.pop_back();
    const FunctionDef* f = whole.library.Find(name);
    if (f == nullptr || !functions.insert(name).second) continue;
    for (const NodeDef& n : f->node_def) {
      FunctionsOfAttrs(n.attr, &pending);
      pending.push_back(n.op);
    }
  }
  model.graph.versions = whole.versions;
  model.graph.unmodeled_fields = whole.unmodeled_fields;
  for (size_t i = 0; i < whole.node.size(); ++i) {
    if (keep[i]) model.graph.node.push_back(std::move(whole.node[i]));
  }
  for (FunctionDef& f : whole.library.function) {
    if (functions.count(f.signature.name)) model.graph.library.function.push_back(std::move(f));
  }
  for (GradientDef& g : whole.library.gradient) {
    if (functions.count(g.function_name)) model.graph.library.gradient.push_back(std::move(g));
  }

  // The variables, and which object-graph node each call captures them as.
  const tfp::SavedObjectGraph& objects = meta.object_graph_def();
  const std::map<int, std::string> paths = ObjectPaths(objects);
  std::map<std::string, size_t> variable_of_node;
  for (const NodeDef& n : model.graph.node) {
    if (!IsVariableOp(n.op)) continue;
    SavedModelVariable v;
    v.node = n.name;
    if (const AttrValue* c = FindAttr(n.attr, "container")) v.container = c->s();
    if (const AttrValue* s = FindAttr(n.attr, "shared_name")) v.shared_name = s->s();
    if (v.shared_name.empty()) v.shared_name = n.name;
    if (const AttrValue* t = FindAttr(n.attr, "dtype"); t != nullptr && t->kind() == AttrValue::Kind::kType) {
      v.dtype = RemoveRefType(t->type());
    }
    v.shape = ShapeAttr(n.attr).value_or(PartialShape::UnknownRank());
    variable_of_node[n.name] = model.variables.size();
    model.variables.push_back(std::move(v));
  }
  for (const NodeDef& n : model.graph.node) {
    const AttrValue* f = FindAttr(n.attr, "f");
    if (f == nullptr || f->kind() != AttrValue::Kind::kFunc) continue;
    auto cf = objects.concrete_functions().find(f->func().name);
    if (cf == objects.concrete_functions().end()) continue;
    std::vector<std::string> data_inputs;
    for (const std::string& input : n.input) {
      if (input.empty() || input[0] != '^') data_inputs.push_back(input);
    }
    const int bound = cf->second.bound_inputs_size();
    if (bound > static_cast<int>(data_inputs.size())) {
      return Error(fmt::format("{}: node {} calls {} with {} inputs, fewer than the {} the object "
                               "graph says it captures",
                               file, Q(n.name), Q(f->func().name), data_inputs.size(), bound));
    }
    for (int j = 0; j < bound; ++j) {
      const std::string& input = data_inputs[data_inputs.size() - static_cast<size_t>(bound) + static_cast<size_t>(j)];
      auto it = variable_of_node.find(NodeOfTensor(input));
      if (it == variable_of_node.end()) continue;
      const int id = cf->second.bound_inputs(j);
      if (id < 0 || id >= objects.nodes_size()) {
        return Error(fmt::format("{}: concrete function {} captures object {}, expected 0 to {}",
                                 file, Q(f->func().name), id, objects.nodes_size() - 1));
      }
      SavedModelVariable& v = model.variables[it->second];
      if (v.object_id >= 0) continue;
      v.object_id = id;
      if (auto p = paths.find(id); p != paths.end()) v.object_path = p->second + "/.ATTRIBUTES/" + kVariableValue;
    }
  }
  return model;
}

Status LoadSavedModelVariables(SavedModel& model, ResourceMgr& resources) {
  if (model.variables.empty()) return OkStatus();
  const std::string prefix = model.directory + "/variables/variables";
  ASSIGN_OR_RETURN(TensorBundle bundle, TensorBundle::Open(prefix));
  const std::string& index = bundle.index_name();
  // The checkpoint's own object graph gives each object's keys (the same node ids as the
  // SavedModel's object graph).
  std::vector<std::string> object_keys;
  if (bundle.Find(kObjectGraphKey) != nullptr) {
    ASSIGN_OR_RETURN(Tensor graph_tensor, bundle.Read(kObjectGraphKey));
    tfp::TrackableObjectGraph graph;
    if (graph_tensor.dtype() != DT_STRING || graph_tensor.num_elements() != 1 ||
        !ParseBinary(graph_tensor.strings()[0], &graph)) {
      return Error(fmt::format("{}: key {}: expected a TrackableObjectGraph in a string scalar",
                               index, kObjectGraphKey));
    }
    for (const auto& node : graph.nodes()) {
      std::string key;
      for (const auto& a : node.attributes()) {
        if (a.name() == kVariableValue) key = a.checkpoint_key();
      }
      object_keys.push_back(key);
    }
  }
  for (SavedModelVariable& v : model.variables) {
    std::vector<std::string> candidates;
    if (v.object_id >= 0 && v.object_id < static_cast<int>(object_keys.size()) &&
        !object_keys[static_cast<size_t>(v.object_id)].empty()) {
      candidates.push_back(object_keys[static_cast<size_t>(v.object_id)]);
    }
    if (!v.object_path.empty()) candidates.push_back(v.object_path);
    candidates.push_back(v.shared_name);
    candidates.push_back(v.node);
    for (const std::string& c : candidates) {
      if (bundle.Find(c) != nullptr) {
        v.checkpoint_key = c;
        break;
      }
    }
    if (v.checkpoint_key.empty()) {
      return Error(fmt::format("{}: variable {} (node {}): expected its value under {} in the "
                               "checkpoint, which has no such key",
                               index, Q(v.shared_name), Q(v.node), Q(candidates.front())));
    }
    ASSIGN_OR_RETURN(Tensor value, bundle.Read(v.checkpoint_key));
    if ((v.dtype != DT_INVALID && value.dtype() != v.dtype) || !v.shape.IsCompatibleWith(value.dims())) {
      return Error(fmt::format("{}: key {} holds {}{}, expected {}{} for variable {} (node {})",
                               index, Q(v.checkpoint_key), DataTypeName(value.dtype()),
                               value.shape().ToString(), DataTypeName(v.dtype), v.shape.ToString(),
                               Q(v.shared_name), Q(v.node)));
    }
    auto var = resources.LookupOrCreate(v.container, v.shared_name, value.dtype(), v.shape);
    std::lock_guard<std::mutex> lock(var->mu);
    var->value = std::move(value);
  }
  return OkStatus();
}

}  // namespace xlens::graph
