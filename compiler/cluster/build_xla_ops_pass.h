// TensorFlow's BuildXlaOpsPass (jit/build_xla_ops_pass.cc): every call node encapsulate_subgraphs
// made (`_XlaCompiledKernel = true`) is replaced by the ops that compile and launch its function,
// under a name scope `<call>_<k>` made unique among the graph's names (`cluster_0_1`):
//
//   xla_compile                 _XlaCompile(constants, args, resources) -> key, compiled?
//   predicated_compilation_key  Switch(key, compiled?)
//   xla_run                     _XlaRun(args, resources, key if compiled)
//   merge_oidx_<i>              _XlaMerge(fallback:i, xla_run:i), one per output that is used
//   data_as_ctrl                Identity(key if not compiled), a control input of the fallback
//   stateful_partitioned_call   StatefulPartitionedCall of the function: the op-by-op fallback
//   int32_id_n                  IdentityN of the fallback's int32 arguments held in device memory
//                               (all but the shape ops' outputs), dead when the fallback is
//
// That is TensorFlow's lazy compilation for auto-clustering (`must_compile: false`): a signature
// seen for the first time may run the fallback while the cluster is compiled later. With lazy
// compilation off (jit_compile, or a device that must compile), `must_compile: true` and the
// outputs come from xla_run alone. The call's control inputs move to xla_compile; its control
// outputs wait for whichever of xla_run and the fallback ran (TensorFlow's ctrl_merge).
#pragma once

#include <memory>

#include "compiler/cluster/function_library_registry.h"
#include "compiler/cluster/graph_dumper.h"
#include "compiler/graph/graph.h"
#include "compiler/support/status.h"

namespace xlens::cluster {

struct BuildXlaOpsOptions {
  // TensorFlow's --tf_xla_enable_lazy_compilation (on by default).
  bool lazy_compilation = true;
  // The `config_proto` the fallback call carries (a serialized ConfigProto; TensorFlow writes the
  // session's).
  std::string config_proto;
};

class BuildXlaOpsPass {
 public:
  explicit BuildXlaOpsPass(BuildXlaOpsOptions options = {}, GraphDumper* dumper = nullptr)
      : options_(std::move(options)), dumper_(dumper) {}

  // The rewritten graph (a new one; `graph` is left as it was; calls of library functions other
  // than clusters stay, hence the registry beside it). When a dumper is set, the result is dumped
  // as `build_xla_ops`; a dump that fails is noted in dump_errors(), never the pass's error.
  StatusOr<GraphWithFunctions> Run(const graph::Graph& graph);

  const std::vector<std::string>& dump_errors() const { return dump_errors_; }

 private:
  BuildXlaOpsOptions options_;
  GraphDumper* dumper_;
  std::vector<std::string> dump_errors_;
};

}  // namespace xlens::cluster
