// SavedModels, the format models are shipped in (tf.saved_model.save, Keras's model.export()):
// `saved_model.pb` (a SavedModel proto: meta graphs with their GraphDef and function library,
// signatures, and the object graph) and `variables/` (a TensorBundle checkpoint, tensor_bundle.h).
//
// A signature is run the way TensorFlow's C++ loader and TensorFlow Serving run it: the meta
// graph's GraphDef, fed at the signature's input tensors ("serving_default_x:0") and fetched at
// its output tensors ("StatefulPartitionedCall:1"), whose call node runs the signature's function
// with the variables' VarHandleOps as captured inputs (the lowering inlines it, so the executor and
// the clustering see the function's body). ReadSavedModel keeps only the nodes and functions the
// signature and the model's init op need (the save and restore functions hold file ops xlens does
// not run); the init op (table initializers) runs once after the variables are read.
//
// Variables: each VarHandleOp the signature's call captures is tied to a checkpoint key through
// the object graph: the concrete function's bound_inputs name object-graph nodes, and the
// checkpoint's own object graph (_CHECKPOINTABLE_OBJECT_GRAPH) gives each node's VARIABLE_VALUE
// key. A variable no function captures (a TF1 SavedModel) is found under its own name.
// LoadSavedModelVariables reads each value and puts it in the session's resource manager as the
// variable its node opens, checked against the node's dtype and shape.
//
// Input is untrusted; every error is one line naming the file.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "compiler/graph/graph_def.h"
#include "compiler/graph/partial_shape.h"
#include "compiler/graph/resource_mgr.h"
#include "compiler/graph/types.h"
#include "compiler/support/status.h"

namespace xlens::graph {

struct SavedModelTensor {
  std::string key;     // the signature's name for it ("x", "output_0")
  std::string tensor;  // the graph's tensor ("serving_default_x:0")
  DataType dtype = DT_INVALID;
  PartialShape shape;
};

struct SavedModelSignature {
  std::string key;  // "serving_default"
  std::vector<SavedModelTensor> inputs;   // by key
  std::vector<SavedModelTensor> outputs;  // by key
};

struct SavedModelVariable {
  std::string node;  // the VarHandleOp (or VariableV2) in the graph
  std::string container, shared_name;  // the resource it opens
  DataType dtype = DT_INVALID;
  PartialShape shape;
  int object_id = -1;          // its node in the object graph, when a function captures it
  std::string object_path;     // that node's checkpoint key by the object graph's child names
  std::string checkpoint_key;  // set by LoadSavedModelVariables
};

struct SavedModel {
  std::string directory;
  std::string shown;                        // the directory as messages show it
  std::vector<std::string> tags;            // of the meta graph read
  std::vector<std::string> signature_keys;  // every signature of that meta graph
  SavedModelSignature signature;            // the one chosen
  GraphDef graph;                           // the nodes and functions the signature needs
  std::string init_op;  // run once after the variables are read (empty: none)
  std::vector<SavedModelVariable> variables;
};

struct SavedModelOptions {
  // Empty: "serving_default", else the only signature.
  std::string signature;
};

// Whether `path` is a directory holding saved_model.pb.
bool IsSavedModelDirectory(const std::string& path);

// Reads DIR/saved_model.pb (the meta graph tagged "serve", else the only one) and the signature.
StatusOr<SavedModel> ReadSavedModel(const std::string& directory,
                                    const SavedModelOptions& options = {});
// The same from the bytes of saved_model.pb; `directory` is where variables/ would be.
StatusOr<SavedModel> ParseSavedModel(std::string_view bytes, const std::string& directory,
                                     const SavedModelOptions& options = {});

// Reads every variable of `model` from DIR/variables/variables.{index,data-*} into `resources`.
Status LoadSavedModelVariables(SavedModel& model, ResourceMgr& resources);

}  // namespace xlens::graph
