#include "compiler/runtime/gpu_collectives.h"

#include <algorithm>
#include <cstring>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/hlo/collective_attributes.h"
#include "compiler/runtime/collective_thunk.h"
#include "compiler/runtime/gpu_collective_model.h"
#include "compiler/runtime/gpu_sim_device.h"
#include "profiler/host_tracer.h"

namespace xlens::runtime {

namespace {

// The group `device` belongs to in `hlo` on `topology` ({device} when it meets no one).
std::vector<int64_t> GroupOf(const HloInstruction& hlo, const DeviceTopology& topology, int64_t device) {
  if (auto groups = ParticipatingDeviceGroups(hlo, topology); groups.ok()) {
    for (const std::vector<int64_t>& g : *groups) {
      if (std::find(g.begin(), g.end(), device) != g.end()) return g;
    }
  }
  return {device};
}

int64_t RankIn(const std::vector<int64_t>& group, int64_t device) {
  return std::find(group.begin(), group.end(), device) - group.begin();
}

int64_t LeafBytes(const Shape& shape, std::vector<int64_t>& out) {
  int64_t total = 0;
  shape.ForEachLeaf([&](const Shape& s, const std::vector<int64_t>&) {
    if (!s.IsArray()) return;
    out.push_back(shape_util::ByteSizeOf(s));
    total += out.back();
  });
  return total;
}

}  // namespace

// --- NcclCliques ---------------------------------------------------------------------------------

StatusOr<std::unique_ptr<NcclCliques>> NcclCliques::Create(const NcclLibrary& library,
                                                            const HloModule& module,
                                                            const DeviceTopology& topology,
                                                            const std::vector<int>& gpu_of_device,
                                                            bool groups_of_one) {
  std::unique_ptr<NcclCliques> cliques(new NcclCliques(library));
  std::set<std::vector<int64_t>> groups;
  for (const HloComputation* computation : module.computations()) {
    for (const HloInstruction* hlo : computation->instructions()) {
      if (!PlanNcclCollective(*hlo).ok()) continue;
      ASSIGN_OR_RETURN(auto all, ParticipatingDeviceGroups(*hlo, topology));
      for (std::vector<int64_t>& g : all) {
        if (g.size() > 1 || groups_of_one) groups.insert(std::move(g));
      }
    }
  }
  for (const std::vector<int64_t>& group : groups) {
    std::vector<int> gpus;
    for (int64_t d : group) gpus.push_back(gpu_of_device.at(static_cast<size_t>(d)));
    std::vector<NcclComm> comms(group.size(), nullptr);
    RETURN_IF_ERROR(CheckNccl(library, library.ncclCommInitAll(comms.data(), static_cast<int>(gpus.size()),
                                                               gpus.data()),
                              "ncclCommInitAll")
                        .WithContext(fmt::format("the communicator of devices {} on GPUs {}",
                                                 fmt::join(group, ","), fmt::join(gpus, ","))));
    cliques->comms_.emplace(group, std::move(comms));
  }
  return cliques;
}

NcclCliques::~NcclCliques() {
  for (auto& [group, comms] : comms_) {
    for (NcclComm comm : comms) {
      if (comm != nullptr) library_.ncclCommDestroy(comm);
    }
  }
}

NcclComm NcclCliques::Comm(const std::vector<int64_t>& group, int64_t device) const {
  auto it = comms_.find(group);
  if (it == comms_.end()) return nullptr;
  const int64_t rank = RankIn(group, device);
  return rank < static_cast<int64_t>(it->second.size()) ? it->second[static_cast<size_t>(rank)] : nullptr;
}

// --- GpuCollective -------------------------------------------------------------------------------

GpuCollective::GpuCollective(const HloInstruction& hlo, std::vector<std::vector<int64_t>> operand_slots,
                             std::vector<int64_t> output_slots)
    : hlo_(&hlo),
      thunk_(std::make_unique<CollectiveThunk>(hlo.name(), hlo, operand_slots, output_slots)),
      operand_slots_(std::move(operand_slots)),
      output_slots_(std::move(output_slots)) {
  for (size_t i = 0; i < operand_slots_.size(); ++i) {
    std::vector<int64_t> bytes;
    LeafBytes(hlo.operand(static_cast<int64_t>(i))->shape(), bytes);
    for (size_t k = 0; k < operand_slots_[i].size() && k < bytes.size(); ++k) {
      if (operand_slots_[i][k] >= 0) slot_bytes_[operand_slots_[i][k]] = bytes[k];
    }
  }
  std::vector<int64_t> bytes;
  LeafBytes(hlo.shape(), bytes);
  for (size_t k = 0; k < output_slots_.size() && k < bytes.size(); ++k) {
    if (output_slots_[k] >= 0) slot_bytes_[output_slots_[k]] = bytes[k];
  }
  auto plan = PlanNcclCollective(hlo);
  if (plan.ok()) {
    nccl_ = std::move(*plan);
  } else {
    why_not_nccl_ = plan.status().message();
  }
}

GpuCollective::~GpuCollective() = default;

void GpuCollective::Prepare(const GpuCollectiveContext& context) {
  const DeviceTopology single;
  const DeviceTopology& topology = context.devices != nullptr ? context.devices->topology() : single;
  const int64_t device = context.devices != nullptr ? context.devices->device_id() : 0;
  modelled_ns_ = 0;
  std::vector<profiler::TraceArg> args = {{"hlo_op", hlo_->name()},
                                          {"backend", std::string(context.nccl != nullptr ? "nccl" : "host")}};
  if (context.target != nullptr) {
    std::vector<int64_t> leaves;
    int64_t operand_bytes = 0;
    for (const HloInstruction* operand : hlo_->operands()) operand_bytes += LeafBytes(operand->shape(), leaves);
    const int64_t result_bytes = LeafBytes(hlo_->shape(), leaves);
    const int64_t members = static_cast<int64_t>(GroupOf(*hlo_, topology, device).size());
    const CollectivePrediction p =
        PredictCollectiveTime(*context.target, hlo_->opcode(), operand_bytes, result_bytes, members);
    modelled_ns_ = p.ns;
    args.push_back({"modelled_ns", static_cast<int64_t>(p.ns)});
    args.push_back({"bus_bytes", static_cast<int64_t>(p.bus_bytes)});
    args.push_back({"link", fmt::format("NVLink, {:.0f} GB/s bus bandwidth, {:.1f} us a ring step ({})",
                                        context.target->nvlink_bus_gbps,
                                        context.target->collective_step_ns / 1000, context.target->name)});
  }
  nccl_span_args_ = args;
  auto span = std::make_shared<profiler::SpanInfo>();
  span->name = hlo_->name();
  span->category = profiler::category::kCollective;
  span->args = std::move(args);
  ThunkTraceInfo info;
  info.span = std::move(span);
  info.kind = "collective";
  thunk_->set_trace_info(std::move(info));
}

Status GpuCollective::Run(GpuDevice& device, const std::vector<DevicePointer>& frame,
                          const GpuCollectiveContext& context) const {
  const bool meets = hlo_->opcode() != HloOpcode::kReplicaId && hlo_->opcode() != HloOpcode::kPartitionId;
  if (meets && context.nccl != nullptr && nccl_.has_value() && context.devices != nullptr &&
      device.runs_cuda_libraries()) {
    return RunNccl(device, frame, context);
  }
  return RunThroughHost(device, frame, context);
}

Status GpuCollective::RunThroughHost(GpuDevice& device, const std::vector<DevicePointer>& frame,
                                     const GpuCollectiveContext& context) const {
  ExecuteContext execute;
  execute.device = context.devices;
  std::vector<char*> host(frame.size(), nullptr);
  // The simulator's device memory is host memory: the thunk works on the device buffers (and,
  // for an all-reduce, on the other devices' buffers too, as peers on NVLink would).
  if (dynamic_cast<GpuSimDevice*>(&device) != nullptr) {
    for (size_t s = 0; s < frame.size(); ++s) host[s] = reinterpret_cast<char*>(frame[s]);
    return thunk_->Execute(host.data(), execute);
  }
  // A real GPU without NCCL for this collective: through host copies.
  std::map<int64_t, std::vector<char>> staged;
  for (const auto& [slot, bytes] : slot_bytes_) {
    std::vector<char>& buffer = staged[slot];
    buffer.resize(static_cast<size_t>(std::max<int64_t>(bytes, 1)));
    host[static_cast<size_t>(slot)] = buffer.data();
  }
  for (const std::vector<int64_t>& leaves : operand_slots_) {
    for (int64_t slot : leaves) {
      if (slot < 0) continue;
      RETURN_IF_ERROR(device.CopyFromDevice(host[static_cast<size_t>(slot)], frame[static_cast<size_t>(slot)],
                                            slot_bytes_.at(slot)));
    }
  }
  RETURN_IF_ERROR(thunk_->Execute(host.data(), execute));
  for (int64_t slot : output_slots_) {
    if (slot < 0) continue;
    RETURN_IF_ERROR(device.CopyToDevice(frame[static_cast<size_t>(slot)], host[static_cast<size_t>(slot)],
                                        slot_bytes_.at(slot)));
  }
  return OkStatus();
}

Status GpuCollective::RunNccl(GpuDevice& device, const std::vector<DevicePointer>& frame,
                              const GpuCollectiveContext& context) const {
  const NcclLibrary& nccl = context.nccl->library();
  const DeviceTopology& topology = context.devices->topology();
  const int64_t me = context.devices->device_id();
  const std::vector<int64_t> group = GroupOf(*hlo_, topology, me);
  const int64_t members = static_cast<int64_t>(group.size());
  const int64_t rank = RankIn(group, me);
  const NcclPlan& plan = *nccl_;
  const int type = static_cast<int>(plan.type);
  const int op = static_cast<int>(plan.op);
  auto in = [&](size_t i) { return reinterpret_cast<const void*>(frame[static_cast<size_t>(operand_slots_[i][0])]); };
  auto out = [&](size_t i) { return reinterpret_cast<void*>(frame[static_cast<size_t>(output_slots_[i])]); };
  auto out_bytes = [&](size_t i) { return slot_bytes_.at(output_slots_[i]); };
  for (const auto& leaves : operand_slots_) {
    if (leaves.size() != 1 || leaves[0] < 0) return RunThroughHost(device, frame, context);
  }
  for (int64_t s : output_slots_) {
    if (s < 0) return RunThroughHost(device, frame, context);
  }
  const bool tracing = profiler::TracingEnabled();
  const int64_t start_ns = tracing ? profiler::NowNs() : 0;
  int64_t bytes = 0;
  for (const auto& leaves : operand_slots_) bytes += slot_bytes_.at(leaves[0]);
  NcclComm comm = context.nccl->Comm(group, me);
  // A device alone in its group without a communicator of its own: the host's way (copies).
  if (members == 1 && comm == nullptr) return RunThroughHost(device, frame, context);
  if (comm == nullptr) {
    return Error(fmt::format("%{}: no NCCL communicator for devices {}", hlo_->name(), fmt::join(group, ",")));
  }
  const CudaStream stream = nullptr;  // the context's null stream, where this device's kernels run
  RETURN_IF_ERROR(CheckNccl(nccl, nccl.ncclGroupStart(), "ncclGroupStart"));
  Status issued = OkStatus();
  auto call = [&](int result, const char* name) {
    if (issued.ok()) issued = CheckNccl(nccl, result, name);
  };
  switch (plan.kind) {
    case NcclPlan::Kind::kAllReduce:
      for (size_t i = 0; i < operand_slots_.size(); ++i) {
        call(nccl.ncclAllReduce(in(i), out(i), static_cast<size_t>(plan.counts[i]), type, op, comm, stream),
             "ncclAllReduce");
      }
      break;
    case NcclPlan::Kind::kAllGather:
      call(nccl.ncclAllGather(in(0), out(0), static_cast<size_t>(plan.counts[0]), static_cast<int>(NcclType::kUint8),
                              comm, stream), "ncclAllGather");
      break;
    case NcclPlan::Kind::kReduceScatter:
      call(nccl.ncclReduceScatter(in(0), out(0), static_cast<size_t>(plan.counts[0] / members), type, op, comm,
                                  stream), "ncclReduceScatter");
      break;
    case NcclPlan::Kind::kAllToAll: {
      const int u8 = static_cast<int>(NcclType::kUint8);
      if (hlo_->dimensions_attr) {
        // One operand split into `members` pieces along its major dimension: piece k to rank k.
        const size_t piece = static_cast<size_t>(plan.counts[0] / members);
        for (int64_t peer = 0; peer < members; ++peer) {
          call(nccl.ncclSend(static_cast<const char*>(in(0)) + peer * piece, piece, u8, static_cast<int>(peer), comm,
                             stream), "ncclSend");
          call(nccl.ncclRecv(static_cast<char*>(out(0)) + peer * piece, piece, u8, static_cast<int>(peer), comm,
                             stream), "ncclRecv");
        }
      } else {
        // Operand k to rank k; result k from rank k.
        for (int64_t peer = 0; peer < members; ++peer) {
          call(nccl.ncclSend(in(static_cast<size_t>(peer)), static_cast<size_t>(plan.counts[static_cast<size_t>(peer)]),
                             u8, static_cast<int>(peer), comm, stream), "ncclSend");
          call(nccl.ncclRecv(out(static_cast<size_t>(peer)), static_cast<size_t>(out_bytes(static_cast<size_t>(peer))),
                             u8, static_cast<int>(peer), comm, stream), "ncclRecv");
        }
      }
      break;
    }
    case NcclPlan::Kind::kPermute: {
      ASSIGN_OR_RETURN(std::vector<int64_t> sources, PermuteSources(*hlo_, topology));
      const int u8 = static_cast<int>(NcclType::kUint8);
      for (int64_t target = 0; target < static_cast<int64_t>(sources.size()); ++target) {
        if (sources[static_cast<size_t>(target)] == me && RankIn(group, target) < members) {
          call(nccl.ncclSend(in(0), static_cast<size_t>(plan.counts[0]), u8, static_cast<int>(RankIn(group, target)),
                             comm, stream), "ncclSend");
        }
      }
      const int64_t source = sources[static_cast<size_t>(me)];
      if (source >= 0 && RankIn(group, source) < members) {
        call(nccl.ncclRecv(out(0), static_cast<size_t>(out_bytes(0)), u8, static_cast<int>(RankIn(group, source)),
                           comm, stream), "ncclRecv");
      }
      break;
    }
    case NcclPlan::Kind::kBroadcast:
      for (size_t i = 0; i < operand_slots_.size(); ++i) {
        call(nccl.ncclBroadcast(in(i), out(i), static_cast<size_t>(plan.counts[i]),
                                static_cast<int>(NcclType::kUint8), 0, comm, stream), "ncclBroadcast");
      }
      break;
  }
  RETURN_IF_ERROR(CheckNccl(nccl, nccl.ncclGroupEnd(), "ncclGroupEnd"));
  RETURN_IF_ERROR(issued.WithContext(hlo_->name()));
  if (plan.kind == NcclPlan::Kind::kPermute) {
    ASSIGN_OR_RETURN(std::vector<int64_t> sources, PermuteSources(*hlo_, topology));
    if (sources[static_cast<size_t>(me)] < 0) {
      // No pair targets this device: zeros, as XLA gives.
      std::vector<char> zeros(static_cast<size_t>(out_bytes(0)), 0);
      RETURN_IF_ERROR(device.CopyToDevice(frame[static_cast<size_t>(output_slots_[0])], zeros.data(),
                                          out_bytes(0)));
    }
  }
  if (tracing) {
    // The calls were queued on the stream: the span ends when they are done.
    RETURN_IF_ERROR(device.Synchronize());
    std::vector<profiler::TraceArg> args = nccl_span_args_;
    args.push_back({"device", me});
    args.push_back({"group", fmt::format("{}", fmt::join(group, ","))});
    args.push_back({"rank", rank});
    args.push_back({"bytes", bytes});
    args.push_back({"arrived_ns", int64_t{0}});
    profiler::RecordSpan(hlo_->name(), profiler::category::kCollective, start_ns, profiler::NowNs(), args);
  }
  return OkStatus();
}

}  // namespace xlens::runtime
