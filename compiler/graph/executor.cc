#include "compiler/graph/executor.h"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <set>

#include "compiler/support/thread_pool.h"
#include "profiler/host_tracer.h"

namespace xlens::graph {
namespace {

// A value flowing along an edge: a tensor, or the mark that it is dead (on an untaken branch).
struct Entry {
  Tensor value;
  bool has_value = false;
  bool is_dead = false;
};

struct FrameState;

// One iteration of one frame: for every node of the frame, what has arrived.
struct IterationState {
  std::vector<int> pending;           // inputs (data and control) still to arrive
  std::vector<int> dead_inputs;       // data or control inputs that arrived dead
  std::vector<char> fired;            // the node has been scheduled in this iteration
  std::vector<std::vector<Entry>> inputs;
  int outstanding = 0;                // nodes of this iteration scheduled and not yet finished
  int live_children = 0;              // frames entered from this iteration, not yet finished
  int64_t held = 0;                   // entries of `inputs` that hold a tensor
};

struct FrameState {
  std::string name;
  FrameState* parent = nullptr;
  int64_t parent_iter = 0;
  int frame_index = 0;  // into Impl::frames_ (static frame info)
  // The live iterations: an iteration is freed once it is done (nothing scheduled, no child frame
  // running) and every older one is, as TensorFlow's CleanupFramesIterations does.
  std::map<int64_t, std::unique_ptr<IterationState>> iterations;
  IterationState* hot = nullptr;  // the iteration GetIteration found last, and its number
  int64_t hot_iter = -1;
  int64_t last_iteration = 0;
  // At most this many iterations are alive at once (the Enters' parallel_iterations, as in
  // TensorFlow): a NextIteration that would start one more waits in `deferred` until the oldest
  // is freed, so a loop counter cannot run ahead of the loop's work without bound.
  int64_t max_parallel_iterations = 10;
  std::vector<std::pair<const Node*, Entry>> deferred;
  int pending_enters = 0;  // Enter nodes of this frame that have not fired yet
  int outstanding = 0;     // scheduled ops in every iteration of this frame
  // Values of constant Enters, delivered to every iteration.
  std::vector<std::pair<const Node*, Entry>> loop_invariants;
  // Exits that produced a dead value in the last iteration: their deadness reaches the parent
  // when the frame is done.
  std::set<const Node*> dead_exits;
  std::set<const Node*> live_exits;  // Exits that produced their value (once, at the end)
  std::map<std::pair<int64_t, std::string>, std::unique_ptr<FrameState>> children;
};

struct ReadyNode {
  const Node* node;
  FrameState* frame;
  int64_t iter;
};

std::string FrameNameOf(const Node& enter) {
  const AttrValue* v = FindAttr(enter.attrs(), "frame_name");
  return v ? v->s() : "";
}

bool IsConstantEnter(const Node& enter) {
  const AttrValue* v = FindAttr(enter.attrs(), "is_constant");
  return v && v->kind() == AttrValue::Kind::kBool && v->b();
}

}  // namespace

struct Executor::Impl {
  const Graph* graph;
  ExecutorOptions options;

  // Static control-flow info: the frame every node runs in, as TensorFlow's BuildControlFlowInfo
  // computes it. frames_[0] is the root frame.
  struct StaticFrame {
    std::string name;
    std::vector<const Node*> nodes;
    int num_enters = 0;
  };
  std::vector<StaticFrame> frames;
  std::vector<int> frame_of;     // node id -> static frame index
  std::vector<int> local_index;  // node id -> index within its frame
  std::vector<int> num_in_edges;
  std::vector<char> is_loop_merge;  // a Merge fed by a NextIteration
  // What each _Retval index returns ("node:1"), for messages; its size is the number of results.
  std::vector<std::string> retval_names;
  // Per node id: its state across runs (null: a fresh one per run), looked up once here rather
  // than by name on every run.
  std::vector<KernelState*> kernel_state;

  // Constant folding, as grappler's does before TensorFlow's executor runs: the root-frame nodes
  // whose value cannot change between runs (Consts, and stateless kernels of constants only) are
  // computed by the first run that succeeds and remembered; later runs deliver the remembered
  // values along `constant_frontier`, the edges from them to the rest, and skip them.
  std::vector<char> is_constant;        // per node id
  std::vector<std::vector<Entry>> constant_values;  // per node id, once computed
  std::vector<const Edge*> constant_frontier;
  bool constants_ready = false;
  std::vector<const Node*> topological_order;
  void RememberConstants();

  // Per run.
  std::deque<ReadyNode> ready;
  std::unique_ptr<FrameState> root;
  std::vector<Entry> retvals;
  const std::vector<Tensor>* args = nullptr;
  Status status;
  ExecutorRunStats stats;
  int64_t live_iterations = 0, live_frames = 0, held_values = 0;

  Status Build();
  Status RunLoop();
  IterationState* GetIteration(FrameState* frame, int64_t iter);
  void Deliver(const Edge* e, const Entry& entry, FrameState* frame, int64_t iter);
  // Returns the frame an Enter entered (null for any other node).
  FrameState* Propagate(const Node* n, FrameState* frame, int64_t iter, std::vector<Entry>& outputs,
                        bool node_is_dead);
  void Activate(const Node* n, FrameState* frame, int64_t iter);
  Status Process(const ReadyNode& r);
  bool MaybeFinishFrame(FrameState* frame);
  void CleanupIterations(FrameState* frame);
  void FreeIteration(FrameState* frame, std::map<int64_t, std::unique_ptr<IterationState>>::iterator it);
  void ReleaseInputs(IterationState* it, int li);
  FrameState* ChildFrame(FrameState* parent, int64_t iter, const Node* enter);
  std::string DescribeStuckNodes() const;
};

Executor::Executor(const Graph* graph, ExecutorOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->graph = graph;
  impl_->options = options;
}

Executor::~Executor() = default;

StatusOr<std::unique_ptr<Executor>> Executor::Create(const Graph* graph, ExecutorOptions options) {
  std::unique_ptr<Executor> executor(new Executor(graph, options));
  RETURN_IF_ERROR(executor->impl_->Build());
  return executor;
}

bool IsFoldableKernel(const Node& node) {
  if (!node.registration().kernel || node.is_stateful() || node.IsControlFlow()) return false;
  const std::string& op = node.type_string();
  if (op == "_Arg" || op == "_Retval" || op == "Placeholder" || op == "PlaceholderWithDefault") {
    return false;
  }
  for (const auto& [name, value] : node.attrs()) {
    if (value.kind() == AttrValue::Kind::kFunc) return false;
  }
  for (int i = 0; i < node.num_outputs(); ++i) {
    const DataType t = node.output_type(i);
    if (IsRefType(t) || t == DT_RESOURCE || t == DT_VARIANT) return false;
  }
  return true;
}

Status Executor::Impl::Build() {
  ASSIGN_OR_RETURN(std::vector<Node*> order, graph->TopologicalOrder());
  topological_order.assign(order.begin(), order.end());
  int n = graph->num_node_ids();
  frame_of.assign(n, -1);
  local_index.assign(n, -1);
  num_in_edges.assign(n, 0);
  is_loop_merge.assign(n, 0);
  frames.push_back({"", {}, 0});
  std::map<std::pair<int, std::string>, int> frame_ids;  // (parent frame, name) -> frame
  std::vector<int> parent_of{-1};

  // Breadth-first from the nodes without inputs, as TensorFlow does: an Enter's consumers are in
  // the frame it names, an Exit's consumers in the parent of its frame.
  std::deque<const Node*> queue;
  for (Node* node : graph->op_nodes()) {
    int data_and_control = 0;
    for (const Edge* e : node->in_edges()) data_and_control += e->src->IsOp() ? 1 : 0;
    num_in_edges[node->id()] = data_and_control;
    if (data_and_control == 0) {
      frame_of[node->id()] = 0;
      queue.push_back(node);
    }
    for (const Edge* e : node->in_edges()) {
      if (node->IsMerge() && e->src->IsNextIteration()) is_loop_merge[node->id()] = 1;
    }
  }
  while (!queue.empty()) {
    const Node* node = queue.front();
    queue.pop_front();
    int frame = frame_of[node->id()];
    int out_frame = frame;
    if (node->IsEnter()) {
      auto key = std::make_pair(frame, FrameNameOf(*node));
      auto it = frame_ids.find(key);
      if (it == frame_ids.end()) {
        it = frame_ids.emplace(key, static_cast<int>(frames.size())).first;
        frames.push_back({key.second, {}, 0});
        parent_of.push_back(frame);
      }
      out_frame = it->second;
      ++frames[out_frame].num_enters;
    } else if (node->IsExit()) {
      out_frame = parent_of[frame];
      if (out_frame < 0) {
        return Status::Error("node '" + node->name() + "' (Exit) is not inside a loop frame");
      }
    }
    for (const Edge* e : node->out_edges()) {
      const Node* dst = e->dst;
      if (!dst->IsOp()) continue;
      if (frame_of[dst->id()] < 0) {
        frame_of[dst->id()] = out_frame;
        queue.push_back(dst);
      } else if (frame_of[dst->id()] != out_frame) {
        return Status::Error("node '" + dst->name() + "' (" + dst->type_string() +
                             ") has inputs from two different loop frames ('" +
                             frames[frame_of[dst->id()]].name + "' and '" + frames[out_frame].name +
                             "')");
      }
    }
  }
  for (Node* node : graph->op_nodes()) {
    int f = frame_of[node->id()];
    if (f < 0) f = frame_of[node->id()] = 0;  // unreachable from any root: never runs
    local_index[node->id()] = static_cast<int>(frames[f].nodes.size());
    frames[f].nodes.push_back(node);
    const std::string& op = node->type_string();
    if (op == "_Retval") {
      int64_t index = node->attrs().at("index").i();
      if (index >= static_cast<int64_t>(retval_names.size())) retval_names.resize(index + 1);
      auto [src, idx] = node->input_node(0);
      retval_names[index] = src ? TensorId{src->name(), idx}.ToString() : node->name();
    }
    if (!node->registration().kernel && op != "_Arg" && op != "_Retval" && !node->IsControlFlow() &&
        op != "NoOp" && op != "ControlTrigger") {
      if (node->op_def().name.empty() || (!graph->registry().Find(op))) {
        return Status::Error("node '" + node->name() + "': unknown op '" + op +
                             "' cannot be executed");
      }
      // Kept: the error is reported only if the node is actually reached.
    }
  }
  kernel_state.assign(n, nullptr);
  if (options.kernel_state != nullptr) {
    for (Node* node : graph->op_nodes()) {
      if (node->registration().kernel) kernel_state[node->id()] = &(*options.kernel_state)[node->name()];
    }
  }
  // The constants: every input (data or control) from a constant, in the root frame.
  is_constant.assign(n, 0);
  for (const Node* node : order) {
    if (!node->IsOp() || frame_of[node->id()] != 0) continue;
    bool constant = node->type_string() == "Const" ? true : num_in_edges[node->id()] > 0 && IsFoldableKernel(*node);
    for (const Edge* e : node->in_edges()) {
      if (e->src->IsOp() && !is_constant[e->src->id()]) constant = false;
    }
    is_constant[node->id()] = constant;
  }
  constant_values.assign(n, {});
  return OkStatus();
}

IterationState* Executor::Impl::GetIteration(FrameState* frame, int64_t iter) {
  // The iteration asked for last (every node of a loop-free graph asks for the root's one).
  if (frame->hot != nullptr && frame->hot_iter == iter) return frame->hot;
  auto& slot = frame->iterations[iter];
  if (!slot) {
    slot = std::make_unique<IterationState>();
    const StaticFrame& sf = frames[frame->frame_index];
    size_t count = sf.nodes.size();
    slot->pending.resize(count);
    slot->dead_inputs.assign(count, 0);
    slot->fired.assign(count, 0);
    slot->inputs.resize(count);
    for (size_t i = 0; i < count; ++i) {
      const Node* node = sf.nodes[i];
      slot->pending[i] = num_in_edges[node->id()];
      slot->inputs[i].resize(node->num_inputs());
    }
    if (iter > frame->last_iteration) frame->last_iteration = iter;
    ++stats.iterations_started;
    stats.peak_live_iterations = std::max(stats.peak_live_iterations, ++live_iterations);
    frame->hot = slot.get();
    frame->hot_iter = iter;
    if (iter > 0) {
      // A new iteration sees every loop invariant.
      auto invariants = frame->loop_invariants;
      for (auto& [enter, entry] : invariants) {
        for (const Edge* e : enter->out_edges()) {
          if (e->dst->IsOp()) Deliver(e, entry, frame, iter);
        }
      }
    }
  }
  frame->hot = slot.get();
  frame->hot_iter = iter;
  return slot.get();
}

FrameState* Executor::Impl::ChildFrame(FrameState* parent, int64_t iter, const Node* enter) {
  auto key = std::make_pair(iter, FrameNameOf(*enter));
  auto& slot = parent->children[key];
  if (!slot) {
    slot = std::make_unique<FrameState>();
    slot->name = key.second;
    slot->parent = parent;
    slot->parent_iter = iter;
    // The static frame of the Enter's consumers.
    int f = -1;
    for (const Edge* e : enter->out_edges()) {
      if (e->dst->IsOp()) f = frame_of[e->dst->id()];
    }
    slot->frame_index = f < 0 ? 0 : f;
    slot->pending_enters = frames[slot->frame_index].num_enters;
    if (const AttrValue* v = FindAttr(enter->attrs(), "parallel_iterations");
        v && v->kind() == AttrValue::Kind::kInt) {
      slot->max_parallel_iterations = std::max<int64_t>(1, v->i());
    }
    ++GetIteration(parent, iter)->live_children;
    stats.peak_live_frames = std::max(stats.peak_live_frames, ++live_frames);
  }
  return slot.get();
}

// An input (data or control) of e->dst arrives in (frame, iter).
void Executor::Impl::Deliver(const Edge* e, const Entry& entry, FrameState* frame, int64_t iter) {
  const Node* dst = e->dst;
  IterationState* it = GetIteration(frame, iter);
  int li = local_index[dst->id()];
  if (it->fired[li]) return;  // a Merge that already fired with a live input
  if (!e->IsControlEdge()) {
    Entry& slot = it->inputs[li][e->dst_input];
    int64_t change = (entry.has_value ? 1 : 0) - (slot.has_value ? 1 : 0);
    slot = entry;
    it->held += change;
    held_values += change;
    stats.peak_held_values = std::max(stats.peak_held_values, held_values);
  }
  --it->pending[li];
  if (entry.is_dead) ++it->dead_inputs[li];

  if (dst->IsMerge()) {
    // Merge fires on its first live data input once its control inputs are in, or dead when
    // every input is dead. In a loop the back edge does not exist in iteration 0, nor the
    // entry edge in later iterations: those count as arrived dead.
    int controls_pending = 0, data_total = 0, data_dead = 0, data_live = 0;
    for (const Edge* in : dst->in_edges()) {
      if (!in->src->IsOp()) continue;
      if (in->IsControlEdge()) continue;
      ++data_total;
      const Entry& got = it->inputs[li][in->dst_input];
      bool absent_here = is_loop_merge[dst->id()] &&
                         ((iter == 0 && in->src->IsNextIteration()) ||
                          (iter > 0 && !in->src->IsNextIteration()));
      if (absent_here || got.is_dead) {
        ++data_dead;
      } else if (got.has_value) {
        ++data_live;
      }
    }
    int arrived_controls = 0, total_controls = 0;
    for (const Edge* in : dst->in_edges()) {
      if (in->IsControlEdge() && in->src->IsOp()) ++total_controls;
    }
    // Control arrivals = all arrivals minus data arrivals (live or dead).
    int arrivals = num_in_edges[dst->id()] - it->pending[li];
    int data_arrivals = 0;
    for (const Entry& got : it->inputs[li]) data_arrivals += got.has_value || got.is_dead;
    arrived_controls = arrivals - data_arrivals;
    controls_pending = total_controls - arrived_controls;
    if (controls_pending > 0) return;
    if (data_live > 0 || data_dead == data_total) Activate(dst, frame, iter);
    return;
  }
  if (it->pending[li] == 0) Activate(dst, frame, iter);
}

void Executor::Impl::Activate(const Node* n, FrameState* frame, int64_t iter) {
  IterationState* it = GetIteration(frame, iter);
  int li = local_index[n->id()];
  if (it->fired[li]) return;
  it->fired[li] = 1;
  ++it->outstanding;
  ++frame->outstanding;
  ready.push_back({n, frame, iter});
}

// `node_is_dead`: the node did not run because an input was dead (a Merge: every input was).
// Its control edges then carry deadness; a Switch that ran sends live control edges even though
// one of its outputs is dead, as in TensorFlow.
FrameState* Executor::Impl::Propagate(const Node* n, FrameState* frame, int64_t iter,
                                      std::vector<Entry>& outputs, bool node_is_dead) {
  FrameState* dst_frame = frame;
  int64_t dst_iter = iter;
  const bool node_dead = node_is_dead;

  if (n->IsEnter()) {
    dst_frame = ChildFrame(frame, iter, n);
    dst_iter = 0;
    --dst_frame->pending_enters;
    if (IsConstantEnter(*n)) {
      dst_frame->loop_invariants.emplace_back(n, outputs[0]);
      // Iterations that already started see it too.
      for (auto& [i, state] : dst_frame->iterations) {
        if (i == 0) continue;
        for (const Edge* e : n->out_edges()) {
          if (e->dst->IsOp()) {
            Deliver(e, e->IsControlEdge() ? Entry{{}, false, node_dead} : outputs[0], dst_frame, i);
          }
        }
      }
    }
  } else if (n->IsExit()) {
    if (outputs[0].is_dead) {
      frame->dead_exits.insert(n);
      return nullptr;
    }
    frame->live_exits.insert(n);
    dst_frame = frame->parent;
    dst_iter = frame->parent_iter;
  } else if (n->IsNextIteration()) {
    if (outputs[0].is_dead) return nullptr;  // a dead NextIteration ends the loop's deadness here
    if (iter + 1 > options.max_loop_iterations) {
      if (status.ok()) {
        status = Status::Error("loop frame '" + frame->name + "' ran more than " +
                               std::to_string(options.max_loop_iterations) + " iterations");
      }
      return nullptr;
    }
    if (iter == frame->last_iteration &&
        static_cast<int64_t>(frame->iterations.size()) >= frame->max_parallel_iterations) {
      frame->deferred.emplace_back(n, outputs[0]);
      return nullptr;
    }
    dst_iter = iter + 1;
  }
  for (const Edge* e : n->out_edges()) {
    if (!e->dst->IsOp()) continue;
    if (e->IsControlEdge()) {
      Deliver(e, Entry{{}, false, node_dead}, dst_frame, dst_iter);
    } else {
      Deliver(e, outputs[e->src_output], dst_frame, dst_iter);
    }
  }
  return n->IsEnter() ? dst_frame : nullptr;
}

void Executor::Impl::FreeIteration(
    FrameState* frame, std::map<int64_t, std::unique_ptr<IterationState>>::iterator it) {
  held_values -= it->second->held;
  --live_iterations;
  if (frame->hot == it->second.get()) frame->hot = nullptr;
  frame->iterations.erase(it);
}

void Executor::Impl::CleanupIterations(FrameState* frame) {
  if (frame == root.get()) return;  // the root's one iteration lives for the run
  // Only the oldest iteration can be freed: a younger one still receives what the older ones'
  // NextIteration nodes send. Iteration 0 also waits for the frame's Enters.
  while (!frame->iterations.empty()) {
    auto oldest = frame->iterations.begin();
    const IterationState& state = *oldest->second;
    if (state.outstanding != 0 || state.live_children != 0) break;
    if (oldest->first == 0 && frame->pending_enters != 0) break;
    FreeIteration(frame, oldest);
    if (!frame->deferred.empty()) {
      // The iteration held back by parallel_iterations starts now.
      int64_t next = frame->last_iteration + 1;
      GetIteration(frame, next);
      std::vector<std::pair<const Node*, Entry>> roots;
      roots.swap(frame->deferred);
      for (auto& [node, entry] : roots) {
        for (const Edge* e : node->out_edges()) {
          if (!e->dst->IsOp()) continue;
          Deliver(e, e->IsControlEdge() ? Entry{} : entry, frame, next);
        }
      }
    }
  }
}

// A node's inputs are not needed once it has run (a Merge that fired ignores later ones).
void Executor::Impl::ReleaseInputs(IterationState* it, int li) {
  std::vector<Entry>& in = it->inputs[li];
  int64_t held = 0;
  for (const Entry& e : in) held += e.has_value ? 1 : 0;
  it->held -= held;
  held_values -= held;
  in.clear();
  in.shrink_to_fit();
}

bool Executor::Impl::MaybeFinishFrame(FrameState* frame) {
  bool finished = false;
  while (frame && frame != root.get() && frame->outstanding == 0 && frame->pending_enters == 0 &&
         frame->children.empty() && frame->deferred.empty()) {
    FrameState* parent = frame->parent;
    int64_t parent_iter = frame->parent_iter;
    // An Exit that never produced a value (the whole loop was dead) carries its deadness to
    // the parent once the frame is done.
    for (const Node* exit : frame->dead_exits) {
      if (frame->live_exits.count(exit)) continue;
      for (const Edge* e : exit->out_edges()) {
        if (e->dst->IsOp()) Deliver(e, Entry{{}, false, true}, parent, parent_iter);
      }
    }
    frame->dead_exits.clear();
    // The frame is finished; its memory goes with it (its parent may finish next).
    while (!frame->iterations.empty()) FreeIteration(frame, frame->iterations.begin());
    if (auto it = parent->iterations.find(parent_iter); it != parent->iterations.end()) {
      --it->second->live_children;
    }
    parent->children.erase(std::make_pair(parent_iter, frame->name));
    --live_frames;
    finished = true;
    frame = parent;
    CleanupIterations(frame);
  }
  return finished;
}

Status Executor::Impl::Process(const ReadyNode& r) {
  const Node* n = r.node;
  IterationState* it = GetIteration(r.frame, r.iter);
  int li = local_index[n->id()];
  std::vector<Entry>& in = it->inputs[li];
  std::vector<Entry> outputs(n->num_outputs());
  const std::string& op = n->type_string();

  const bool any_dead_input = it->dead_inputs[li] > 0;
  bool node_is_dead = false;
  if (n->IsMerge()) {
    // Output 0: the live input; output 1: its index. Dead when every input is dead.
    int chosen = -1;
    for (int i = 0; i < static_cast<int>(in.size()); ++i) {
      if (in[i].has_value && !in[i].is_dead) {
        chosen = i;
        break;
      }
    }
    if (chosen < 0) {
      for (Entry& o : outputs) o.is_dead = true;
      node_is_dead = true;
    } else {
      outputs[0] = in[chosen];
      if (outputs.size() > 1) {
        outputs[1].value = Tensor::Scalar<int32_t>(DT_INT32, chosen);
        outputs[1].has_value = true;
      }
    }
  } else if (any_dead_input && op != "ControlTrigger") {
    // (A ControlTrigger runs, live, whatever its inputs: TensorFlow's v1 gradients of loops
    // synchronise on it.)
    for (Entry& o : outputs) o.is_dead = true;
    node_is_dead = true;
    if (op == "_Retval") {
      int64_t index = n->attrs().at("index").i();
      if (index >= 0 && index < static_cast<int64_t>(retvals.size())) retvals[index].is_dead = true;
    }
  } else if (n->IsSwitch()) {
    // Switch(data, pred): output 0 on false, output 1 on true; the other is dead.
    bool pred = in[1].value.GetAsInt64(0) != 0;
    outputs[pred ? 1 : 0] = in[0];
    outputs[pred ? 0 : 1].is_dead = true;
  } else if (n->IsEnter() || n->IsExit() || n->IsNextIteration() || n->IsLoopCond()) {
    outputs[0] = in[0];
  } else if (op == "_Arg") {
    int64_t index = n->attrs().at("index").i();
    if (!args || index < 0 || index >= static_cast<int64_t>(args->size())) {
      return Status::Error("node '" + n->name() + "' (_Arg): no argument " + std::to_string(index) +
                           " was given");
    }
    outputs[0].value = (*args)[index];
    outputs[0].has_value = true;
  } else if (op == "_Retval") {
    int64_t index = n->attrs().at("index").i();
    if (index >= 0 && index < static_cast<int64_t>(retvals.size())) retvals[index] = in[0];
  } else if ((op == "NoOp" || op == "ControlTrigger") && !n->registration().kernel) {
    // Nothing to do: it exists for its control edges.
  } else {
    if (!n->registration().kernel) {
      return Status::Error("node '" + n->name() + "' (" + op + "): no CPU kernel for this op");
    }
    std::vector<Tensor> inputs;
    inputs.reserve(in.size());
    // Moved, so the kernel may reuse an input's buffer; ReleaseInputs drops the entries.
    for (Entry& e : in) inputs.push_back(std::move(e.value));
    KernelState scratch;
    KernelState* state = kernel_state[n->id()] ? kernel_state[n->id()] : &scratch;
    OpKernelContext ctx(*n, std::move(inputs), {}, options.resources, state,
                        options.pool ? options.pool : &ThreadPool::Default());
    ctx.set_max_tensor_bytes(options.max_tensor_bytes);
    ctx.set_graph(options.function_library ? options.function_library : graph);
    {
      profiler::TraceSpan span(n->name(), kTfOpCategory);
      if (span.active()) {
        span.AddArg("op", op);
        std::string shapes;
        for (int i = 0; i < ctx.num_inputs(); ++i) {
          if (i) shapes += ";";
          shapes += DimsToString(ctx.input(i).dims());
        }
        span.AddArg("input_shapes", shapes);
      }
      RETURN_IF_ERROR(n->registration().kernel(ctx));
    }
    for (int i = 0; i < n->num_outputs(); ++i) {
      if (ctx.output_is_dead(i)) {
        outputs[i].is_dead = true;
        continue;
      }
      if (!ctx.output(i).IsInitialized()) {
        return Status::Error("node '" + n->name() + "' (" + op + "): the kernel did not set output " +
                             std::to_string(i));
      }
      outputs[i].value = std::move(ctx.output(i));
      outputs[i].has_value = true;
    }
  }
  if (!n->IsMerge() && !any_dead_input) {
    for (Entry& o : outputs) {
      if (!o.is_dead) o.has_value = true;
    }
  }
  if (is_constant[n->id()] && !constants_ready) constant_values[n->id()] = outputs;
  ReleaseInputs(it, li);
  FrameState* entered = Propagate(n, r.frame, r.iter, outputs, node_is_dead);
  --it->outstanding;
  --r.frame->outstanding;
  // Free what is done: the oldest iterations with nothing outstanding, then finished frames. An
  // Enter may have finished the frame it entered (every consumer waits), and with it this one.
  if (entered && MaybeFinishFrame(entered)) return OkStatus();
  CleanupIterations(r.frame);
  MaybeFinishFrame(r.frame);
  return OkStatus();
}

std::string Executor::Impl::DescribeStuckNodes() const {
  std::string out;
  int shown = 0;
  std::function<void(const FrameState*)> walk = [&](const FrameState* f) {
    for (const auto& [iter, state] : f->iterations) {
      const StaticFrame& sf = frames[f->frame_index];
      for (size_t i = 0; i < sf.nodes.size() && shown < 5; ++i) {
        if (!state->fired[i] && state->pending[i] < num_in_edges[sf.nodes[i]->id()] &&
            state->pending[i] > 0) {
          const Node* n = sf.nodes[i];
          std::string waits;
          for (const Edge* e : n->in_edges()) {
            if (!e->src->IsOp()) continue;
            bool got = !e->IsControlEdge() && state->inputs[i][e->dst_input].has_value;
            if (!got && !e->IsControlEdge() && !state->inputs[i][e->dst_input].is_dead) {
              waits = e->src->name();
              break;
            }
          }
          out += (shown ? "; " : "") + ("'" + n->name() + "'") +
                 (waits.empty() ? "" : " waits for '" + waits + "'");
          ++shown;
        }
      }
    }
    for (const auto& [key, child] : f->children) walk(child.get());
  };
  walk(root.get());
  return out;
}

// After the first run that succeeds: the constants whose values it holds (up to a size, so a
// folded Fill cannot pin a huge tensor) are kept; the others, and what depends on them, run
// every time.
void Executor::Impl::RememberConstants() {
  constexpr size_t kMaxFoldedBytes = size_t{64} << 20;
  for (const Node* node : topological_order) {
    const int id = node->id();
    if (!is_constant[id]) continue;
    bool keep = constant_values[id].size() == static_cast<size_t>(node->num_outputs());
    for (const Entry& e : constant_values[id]) {
      keep = keep && (e.has_value || e.is_dead) && e.value.byte_size() <= kMaxFoldedBytes;
    }
    for (const Edge* e : node->in_edges()) keep = keep && (!e->src->IsOp() || is_constant[e->src->id()]);
    if (!keep) {
      is_constant[id] = 0;
      constant_values[id].clear();
    }
  }
  constant_frontier.clear();
  for (const Node* node : topological_order) {
    if (!is_constant[node->id()]) continue;
    for (const Edge* e : node->out_edges()) {
      if (e->dst->IsOp() && !is_constant[e->dst->id()]) constant_frontier.push_back(e);
    }
  }
  constants_ready = true;
}

const ExecutorRunStats& Executor::last_run_stats() const { return impl_->stats; }

StatusOr<std::vector<Tensor>> Executor::Run(const std::vector<Tensor>& args) {
  Impl& s = *impl_;
  s.ready.clear();
  s.status = OkStatus();
  s.args = &args;
  const int num_retvals = static_cast<int>(s.retval_names.size());
  s.retvals.assign(num_retvals, Entry{});
  s.stats = ExecutorRunStats{};
  s.live_iterations = s.live_frames = s.held_values = 0;
  s.root = std::make_unique<FrameState>();
  s.root->frame_index = 0;
  s.GetIteration(s.root.get(), 0);
  for (const Node* n : s.frames[0].nodes) {
    if (s.num_in_edges[n->id()] == 0 && !(s.constants_ready && s.is_constant[n->id()])) {
      s.Activate(n, s.root.get(), 0);
    }
  }
  if (s.constants_ready) {
    for (const Edge* e : s.constant_frontier) {
      if (e->IsControlEdge()) {
        s.Deliver(e, Entry{}, s.root.get(), 0);
      } else {
        s.Deliver(e, s.constant_values[e->src->id()][e->src_output], s.root.get(), 0);
      }
    }
  }
  while (!s.ready.empty()) {
    ReadyNode r = s.ready.front();
    s.ready.pop_front();
    Status st = s.Process(r);
    if (!st.ok()) {
      s.ready.clear();
      s.root.reset();
      return st;
    }
    if (!s.status.ok()) {
      s.ready.clear();
      s.root.reset();
      return s.status;
    }
  }
  std::vector<Tensor> out;
  out.reserve(num_retvals);
  for (int i = 0; i < num_retvals; ++i) {
    const Entry& e = s.retvals[i];
    const std::string& name = s.retval_names[i];
    if (e.is_dead) {
      s.root.reset();
      return Status::Error("fetch '" + name +
                           "' is dead: it is on a branch of a Switch that was not taken");
    }
    if (!e.has_value) {
      std::string stuck = s.DescribeStuckNodes();
      s.root.reset();
      return Status::Error("fetch '" + name + "' was never computed" +
                           (stuck.empty() ? std::string()
                                          : ": the run stopped with nodes waiting for inputs: " + stuck));
    }
    out.push_back(e.value);
  }
  s.root.reset();
  if (!s.constants_ready) s.RememberConstants();
  return out;
}

}  // namespace xlens::graph
