// The rendezvous of runs spread over processes, with the processes played by threads of this test
// over an in-memory transport: collectives crossing "ranks" give what the in-process evaluator
// gives, an all-reduce of every device with one device per rank goes to the transport's reduction,
// and a rank that fails before the run or finishes while the others wait gives every rank the
// same verdict.
#include "compiler/hlo/distributed_rendezvous.h"

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/hlo/multi_device_evaluator.h"
#include "compiler/hlo/parser.h"
#include "evaluator_test_util.h"

namespace xlens {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using xlens::testing::MakeLiteral;
using xlens::testing::Values;

// What the ranks' transports share: an all-gather is a barrier at which each rank leaves its
// bytes and takes everyone's.
class Hub {
 public:
  explicit Hub(int ranks) : ranks_(ranks), slots_(ranks) {}
  std::vector<std::string> AllGather(int rank, std::string_view mine) {
    std::unique_lock<std::mutex> lock(mutex_);
    const int64_t generation = generation_;
    slots_[rank] = std::string(mine);
    if (++arrived_ == ranks_) {
      result_ = slots_;
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
    } else {
      EXPECT_TRUE(changed_.wait_for(lock, std::chrono::seconds(20),
                                    [&] { return generation_ != generation; }))
          << "rank " << rank << " waited 20 s at an all-gather";
    }
    return result_;
  }
  std::atomic<int> reductions{0};
  std::atomic<int> splits{0};

 private:
  const int ranks_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> slots_, result_;
  int arrived_ = 0;
  int64_t generation_ = 0;
};

class FakeTransport : public CollectiveTransport {
 public:
  FakeTransport(Hub* hub, int rank, int ranks) : hub_(hub), rank_(rank), ranks_(ranks) {}
  int rank() const override { return rank_; }
  int num_ranks() const override { return ranks_; }
  std::vector<std::string> AllGather(std::string_view mine, std::string_view, double) override {
    return hub_->AllGather(rank_, mine);
  }
  bool CanReduce(PrimitiveType type) const override {
    return type == PrimitiveType::F32 || type == PrimitiveType::S32;
  }
  // The plain typed calls (over AllGather), counted.
  void AllReduce(int communicator, void* data, int64_t count, PrimitiveType type,
                 TransportReduction op, std::string_view what, double timeout) override {
    ++hub_->reductions;
    CollectiveTransport::AllReduce(communicator, data, count, type, op, what, timeout);
  }
  int Split(int color, int key, std::string_view what, double timeout) override {
    ++hub_->splits;
    return CollectiveTransport::Split(color, key, what, timeout);
  }

 private:
  Hub* hub_;
  int rank_, ranks_;
};

constexpr char kHeader[] = R"(HloModule m

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

maximum {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] maximum(x, y)
}

add_s32 {
  x = s32[] parameter(0)
  y = s32[] parameter(1)
  ROOT s = s32[] add(x, y)
}
)";

std::vector<std::vector<Literal>> RampArguments(int64_t devices, int64_t n) {
  std::vector<std::vector<Literal>> arguments(devices);
  for (int64_t d = 0; d < devices; ++d) {
    std::vector<float> values;
    for (int64_t i = 0; i < n; ++i) values.push_back(static_cast<float>(d * 100 + i));
    arguments[d].push_back(MakeLiteral<float>(PrimitiveType::F32, {n}, values));
  }
  return arguments;
}

struct RankOutcome {
  Status start, run, finish;
  std::vector<Literal> results;  // by device; empty for other ranks' devices
};

// Runs `entry` on `devices` partitions spread over `ranks` threads, each with its own rendezvous;
// `ready(rank)` is the rank's status before the run, `skip(rank)` makes it finish without running.
std::vector<RankOutcome> RunOnRanks(const std::string& entry, int64_t devices, int ranks, Hub& hub,
                                    std::function<Status(int)> ready = nullptr,
                                    std::function<bool(int)> skip = nullptr) {
  auto module = ParseHloModule(std::string(kHeader) + entry);
  EXPECT_TRUE(module.ok()) << module.status().message();
  const DeviceTopology topology{1, devices};
  const auto arguments = RampArguments(devices, 4);
  std::vector<RankOutcome> outcomes(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      FakeTransport transport(&hub, r, ranks);
      DistributedRendezvous rendezvous(topology, &transport, /*timeout_seconds=*/10);
      RankOutcome& outcome = outcomes[r];
      outcome.start = rendezvous.Start(ready ? ready(r) : OkStatus());
      if (!outcome.start.ok()) return;
      if (skip && skip(r)) {
        outcome.finish = rendezvous.Finish(OkStatus());
        return;
      }
      MultiDeviceOptions options;
      options.rendezvous = &rendezvous;
      options.local_devices = rendezvous.local_devices();
      auto results = EvaluateModuleOnDevices(**module, arguments, topology, {}, options);
      outcome.run = results.status();
      if (results.ok()) outcome.results = std::move(*results);
      outcome.finish = rendezvous.Finish(outcome.run);
    });
  }
  for (auto& t : threads) t.join();
  return outcomes;
}

TEST(DevicesOfRankTest, SpreadsContiguousBlocksInOrder) {
  EXPECT_THAT(DevicesOfRank(6, 0, 4), ElementsAre(0));
  EXPECT_THAT(DevicesOfRank(6, 1, 4), ElementsAre(1, 2));
  EXPECT_THAT(DevicesOfRank(6, 3, 4), ElementsAre(4, 5));
  EXPECT_THAT(DevicesOfRank(8, 1, 2), ElementsAre(4, 5, 6, 7));
  EXPECT_TRUE(DevicesOfRank(2, 2, 4).empty() || DevicesOfRank(2, 0, 4).empty());
}

TEST(DistributedRendezvousTest, AllReduceAcrossRanksWithTwoDevicesEach) {
  Hub hub(2);
  auto outcomes = RunOnRanks(R"(
ENTRY e {
  p = f32[4] parameter(0)
  ROOT ar = f32[4] all-reduce(p), replica_groups={{0,1,2,3}}, use_global_device_ids=true, channel_id=1, to_apply=add
})", 4, 2, hub);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(outcomes[r].run.ok()) << outcomes[r].run.message();
    ASSERT_TRUE(outcomes[r].finish.ok()) << outcomes[r].finish.message();
    for (int64_t d : DevicesOfRank(4, r, 2)) {
      EXPECT_THAT(Values<float>(outcomes[r].results[d]), ElementsAre(600, 604, 608, 612));
    }
  }
  EXPECT_EQ(hub.reductions.load(), 0) << "two devices per rank: an all-gather, not a reduction";
}

TEST(DistributedRendezvousTest, AllReduceOfOneDevicePerRankIsTheTransportsReduction) {
  Hub hub(4);
  auto outcomes = RunOnRanks(R"(
ENTRY e {
  p = f32[4] parameter(0)
  ROOT ar = f32[4] all-reduce(p), replica_groups={{0,1,2,3}}, use_global_device_ids=true, channel_id=1, to_apply=add
})", 4, 4, hub);
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(outcomes[r].run.ok()) << outcomes[r].run.message();
    EXPECT_THAT(Values<float>(outcomes[r].results[r]), ElementsAre(600, 604, 608, 612));
  }
  EXPECT_EQ(hub.reductions.load(), 4);
}

TEST(DistributedRendezvousTest, PermuteAndGatherAcrossRanksAndGroupsWithinOne) {
  Hub hub(2);
  // The permute sends each device's ramp to the next; the gather's groups {0,1} and {2,3} stay
  // within a rank and meet in memory.
  auto outcomes = RunOnRanks(R"(
ENTRY e {
  p = f32[4] parameter(0)
  cp = f32[4] collective-permute(p), channel_id=1, source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
  ag = f32[8] all-gather(cp), channel_id=2, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, dimensions={0}
  ROOT t = (f32[4], f32[8]) tuple(cp, ag)
})", 4, 2, hub);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(outcomes[r].run.ok()) << outcomes[r].run.message();
  }
  EXPECT_THAT(Values<float>(outcomes[1].results[2].tuple_element(0)), ElementsAre(100, 101, 102, 103));
  EXPECT_THAT(Values<float>(outcomes[0].results[0].tuple_element(0)), ElementsAre(300, 301, 302, 303));
  EXPECT_THAT(Values<float>(outcomes[1].results[3].tuple_element(1)),
              ElementsAre(100, 101, 102, 103, 200, 201, 202, 203));
}

TEST(DistributedRendezvousTest, ARankFailingBeforeTheRunStopsEveryRank) {
  Hub hub(2);
  auto outcomes = RunOnRanks(R"(
ENTRY e {
  p = f32[4] parameter(0)
  ROOT ar = f32[4] all-reduce(p), replica_groups={{0,1}}, use_global_device_ids=true, channel_id=1, to_apply=add
})", 2, 2, hub, [](int r) { return r == 1 ? Error("inputs/device_1/arg0.npy: missing") : OkStatus(); });
  EXPECT_THAT(outcomes[1].start.message(), "inputs/device_1/arg0.npy: missing");
  EXPECT_THAT(outcomes[0].start.message(), "rank 1 failed: inputs/device_1/arg0.npy: missing");
}

TEST(DistributedRendezvousTest, ARankThatFinishesWhileOthersWaitFailsThem) {
  Hub hub(2);
  auto outcomes = RunOnRanks(R"(
ENTRY e {
  p = f32[4] parameter(0)
  ROOT ar = f32[4] all-reduce(p), replica_groups={{0,1,2,3}}, use_global_device_ids=true, channel_id=1, to_apply=add
})", 4, 2, hub, nullptr, [](int r) { return r == 1; });
  EXPECT_THAT(outcomes[0].run.message(),
              HasSubstr("the processes cannot meet: rank 0 waits at collective %ar; rank 1 finished its run"));
  EXPECT_THAT(outcomes[1].finish.message(),
              HasSubstr("the processes cannot meet: rank 0 waits at collective %ar; rank 1 finished its run"));
}

// Runs the collective ROOT of `entry` (of f32[n] or s32[n] parameter p, each device's a ramp)
// through MeetOnBuffers on `devices` partitions over `ranks` threads, a thread per device, and
// returns every device's result bytes; `on_buffers` says whether every rank took that way.
std::vector<std::vector<char>> MeetOnBuffersOfRanks(const std::string& entry, int64_t devices,
                                                    int ranks, Hub& hub, bool& on_buffers) {
  auto module = ParseHloModule(std::string(kHeader) + entry);
  EXPECT_TRUE(module.ok()) << module.status().message();
  const HloInstruction& root = *(*module)->entry_computation()->root_instruction();
  const DeviceTopology topology{1, devices};
  const Shape& in = root.operand(0)->shape();
  const int64_t in_bytes = shape_util::ByteSizeOf(in);
  const int64_t out_bytes = shape_util::ByteSizeOf(root.shape());
  std::vector<std::vector<char>> operands(devices), results(devices);
  for (int64_t d = 0; d < devices; ++d) {
    operands[d].resize(in_bytes);
    for (int64_t i = 0; i < in.num_elements(); ++i) {
      if (in.element_type() == PrimitiveType::F32) {
        const float v = static_cast<float>(d * 100 + i);
        std::memcpy(operands[d].data() + i * 4, &v, 4);
      } else {
        const int32_t v = static_cast<int32_t>(d * 100 + i);
        std::memcpy(operands[d].data() + i * 4, &v, 4);
      }
    }
    results[d].assign(out_bytes, 7);
  }
  std::atomic<int> took{0};
  std::vector<std::thread> rank_threads;
  for (int r = 0; r < ranks; ++r) {
    rank_threads.emplace_back([&, r] {
      FakeTransport transport(&hub, r, ranks);
      // Two runs, each with its rendezvous, over one transport (as xlens run --iterations does).
      for (int run = 0; run < 2; ++run) {
        DistributedRendezvous rendezvous(topology, &transport, /*timeout_seconds=*/10);
        ASSERT_TRUE(rendezvous.Start(OkStatus()).ok());
        if (!rendezvous.CanMeetOnBuffers(root)) {
          EXPECT_TRUE(rendezvous.Finish(OkStatus()).ok());
          return;
        }
        if (run == 0) ++took;
        std::vector<std::thread> device_threads;
        for (int64_t d : rendezvous.local_devices()) {
          device_threads.emplace_back([&, d] {
            const char* operand = operands[d].data();
            char* result = results[d].data();
            Status met = rendezvous.MeetOnBuffers(root, 0, d, std::span<const char* const>(&operand, 1),
                                                  std::span<char* const>(&result, 1));
            EXPECT_TRUE(met.ok()) << met.message();
          });
        }
        for (auto& t : device_threads) t.join();
        EXPECT_TRUE(rendezvous.Finish(OkStatus()).ok());
      }
    });
  }
  for (auto& t : rank_threads) t.join();
  on_buffers = took.load() == ranks;
  return results;
}

// The same collective evaluated in one process: every device's result bytes.
std::vector<std::vector<char>> EvaluatedBytes(const std::string& entry, int64_t devices) {
  auto module = ParseHloModule(std::string(kHeader) + entry);
  EXPECT_TRUE(module.ok()) << module.status().message();
  const HloInstruction& root = *(*module)->entry_computation()->root_instruction();
  const Shape& in = root.operand(0)->shape();
  std::vector<std::vector<Literal>> arguments(devices);
  for (int64_t d = 0; d < devices; ++d) {
    Literal value(in);
    for (int64_t i = 0; i < in.num_elements(); ++i) {
      if (in.element_type() == PrimitiveType::F32) {
        reinterpret_cast<float*>(value.untyped_data())[i] = static_cast<float>(d * 100 + i);
      } else {
        reinterpret_cast<int32_t*>(value.untyped_data())[i] = static_cast<int32_t>(d * 100 + i);
      }
    }
    arguments[d].push_back(std::move(value));
  }
  auto results = EvaluateModuleOnDevices(**module, arguments, DeviceTopology{1, devices}, {}, {});
  EXPECT_TRUE(results.ok()) << results.status().message();
  std::vector<std::vector<char>> bytes;
  for (const Literal& result : *results) {
    const char* data = reinterpret_cast<const char*>(result.untyped_data());
    bytes.emplace_back(data, data + result.size_bytes());
  }
  return bytes;
}

TEST(DistributedRendezvousTest, CollectivesOnBuffersGiveTheEvaluatorsValues) {
  struct Case {
    const char* entry;
    int64_t devices;
    int ranks;
    int splits;  // communicators made, per rank, over both runs (the second reuses the first's)
  };
  const Case cases[] = {
      // Every device in one group: the ranks in order are every process's communicator.
      {R"(ENTRY e {
  p = f32[6] parameter(0)
  ROOT c = f32[6] all-reduce(p), replica_groups={{0,1,2,3}}, use_global_device_ids=true, channel_id=1, to_apply=add
})", 4, 2, 0},
      {R"(ENTRY e {
  p = s32[6] parameter(0)
  ROOT c = s32[6] all-reduce(p), replica_groups={{0,1},{2,3}}, use_global_device_ids=true, channel_id=1, to_apply=add_s32
})", 4, 4, 1},
      // The ranks in another order than theirs: a communicator of its own.
      {R"(ENTRY e {
  p = f32[6] parameter(0)
  ROOT c = f32[6] all-reduce(p), replica_groups={{2,3,0,1}}, use_global_device_ids=true, channel_id=1, to_apply=maximum
})", 4, 2, 1},
      {R"(ENTRY e {
  p = f32[2,3] parameter(0)
  ROOT c = f32[2,12] all-gather(p), replica_groups={{0,1,2,3}}, use_global_device_ids=true, channel_id=1, dimensions={1}
})", 4, 2, 0},
      {R"(ENTRY e {
  p = f32[4,3] parameter(0)
  ROOT c = f32[8,3] all-gather(p), replica_groups={{0,1},{2,3}}, use_global_device_ids=true, channel_id=1, dimensions={0}
})", 4, 4, 1},
      {R"(ENTRY e {
  p = f32[3,8] parameter(0)
  ROOT c = f32[3,2] reduce-scatter(p), replica_groups={{0,1,2,3}}, use_global_device_ids=true, channel_id=1, dimensions={1}, to_apply=add
})", 4, 2, 0},
      {R"(ENTRY e {
  p = f32[8] parameter(0)
  ROOT c = f32[2] reduce-scatter(p), replica_groups={{0,1,2,3}}, use_global_device_ids=true, channel_id=1, dimensions={0}, to_apply=add
})", 4, 4, 0},
      {R"(ENTRY e {
  p = f32[3,8] parameter(0)
  ROOT c = f32[3,8] all-to-all(p), replica_groups={{0,1,2,3}}, channel_id=1, dimensions={1}
})", 4, 2, 0},
      {R"(ENTRY e {
  p = f32[8,3] parameter(0)
  ROOT c = f32[8,3] all-to-all(p), replica_groups={{0,1},{2,3}}, channel_id=1, dimensions={0}
})", 4, 4, 1},
      {R"(ENTRY e {
  p = f32[5] parameter(0)
  ROOT c = f32[5] collective-permute(p), channel_id=1, source_target_pairs={{0,1},{1,2},{2,3}}
})", 4, 2, 0},
      {R"(ENTRY e {
  p = f32[5] parameter(0)
  ROOT c = f32[5] collective-permute(p), channel_id=1, source_target_pairs={{0,3},{3,0},{1,2}}
})", 4, 4, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.entry);
    Hub hub(c.ranks);
    bool on_buffers = false;
    auto met = MeetOnBuffersOfRanks(c.entry, c.devices, c.ranks, hub, on_buffers);
    EXPECT_TRUE(on_buffers);
    EXPECT_EQ(met, EvaluatedBytes(c.entry, c.devices));
    EXPECT_EQ(hub.splits.load(), c.splits * c.ranks);
  }
}

TEST(DistributedRendezvousTest, GroupsInterleavedAcrossRanksGoTheGenericWay) {
  Hub hub(2);
  bool on_buffers = true;
  // Rank 0 holds devices 0 and 1, which are in two groups.
  MeetOnBuffersOfRanks(R"(ENTRY e {
  p = f32[4] parameter(0)
  ROOT c = f32[4] all-reduce(p), replica_groups={{0,2},{1,3}}, use_global_device_ids=true, channel_id=1, to_apply=add
})", 4, 2, hub, on_buffers);
  EXPECT_FALSE(on_buffers);
}

}  // namespace
}  // namespace xlens
