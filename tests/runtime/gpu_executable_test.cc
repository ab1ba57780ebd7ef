// The GPU executable's logic on a recording device (no GPU needed): buffers, copies, launch
// order and arguments. On a machine with a GPU, the same differential checks as the CPU backend's
// run on the device; without one they skip with the driver's reason.
#include "compiler/runtime/gpu_executable.h"

#include <cstring>
#include <filesystem>
#include <map>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../codegen/random_module_generator.h"
#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/literal_comparison.h"
#include "compiler/hlo/parser.h"
#include "compiler/hlo/random_literal.h"
#include "test_util.h"

namespace xlens::runtime {
namespace {

using ::testing::HasSubstr;

// Device memory is a host vector; a device pointer is 0x1000 plus an offset into it.
class RecordingDevice : public GpuDevice {
 public:
  static constexpr DevicePointer kBase = 0x1000;
  struct Recorded {
    std::string name;
    LaunchDimensions dims;
    std::vector<DevicePointer> arguments;
    GpuModuleHandle module = -1;
  };

  std::string arch() const override { return "sm_90"; }
  StatusOr<DevicePointer> Allocate(int64_t bytes) override {
    const DevicePointer p = kBase + memory.size();
    memory.resize(memory.size() + bytes);
    ++allocations;
    return p;
  }
  Status Free(DevicePointer) override { ++frees; return OkStatus(); }
  Status CopyToDevice(DevicePointer destination, const void* source, int64_t bytes) override {
    if (destination < kBase || destination - kBase + bytes > memory.size()) return Error("out of range");
    std::memcpy(memory.data() + (destination - kBase), source, bytes);
    return OkStatus();
  }
  Status CopyFromDevice(void* destination, DevicePointer source, int64_t bytes) override {
    if (source < kBase || source - kBase + bytes > memory.size()) return Error("out of range");
    std::memcpy(destination, memory.data() + (source - kBase), bytes);
    return OkStatus();
  }
  StatusOr<GpuModuleHandle> LoadModule(const GpuModuleImage& image) override {
    loaded_ptx += image.ptx;
    return static_cast<GpuModuleHandle>(modules_loaded++);
  }
  Status Launch(GpuModuleHandle module, const std::string& name, const LaunchDimensions& dims,
                const std::vector<DevicePointer>& arguments) override {
    launches.push_back({name, dims, arguments, module});
    return OkStatus();
  }
  Status Synchronize() override { ++synchronizations; return OkStatus(); }

  std::vector<uint8_t> memory;
  std::string loaded_ptx;
  std::vector<Recorded> launches;
  int allocations = 0, frees = 0, synchronizations = 0, modules_loaded = 0;
};

constexpr const char* kTwoKernels = R"(HloModule two
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }
ENTRY e {
  x = f32[300] parameter(0)
  y = f32[300] parameter(1)
  c = f32[] constant(2)
  cb = f32[300] broadcast(c), dimensions={}
  m = f32[300] multiply(x, cb)
  s = f32[300] add(m, y)
  z = f32[] constant(0)
  r = f32[] reduce(s, z), dimensions={0}, to_apply=add
  ROOT t = (f32[300], f32[]) tuple(s, r)
})";

TEST(GpuExecutableTest, CopiesArgumentsLaunchesInOrderAndReadsResults) {
  RecordingDevice device;
  auto module = ParseHloModule(kTwoKernels);
  ASSERT_TRUE(module.ok());
  auto exe = GpuExecutable::Create(std::move(*module), {}, device);
  ASSERT_TRUE(exe.ok()) << exe.status().message();
  EXPECT_EQ(device.allocations, 1);  // one arena
  ASSERT_FALSE((*exe)->launches().empty());
  for (const GpuLaunch& launch : (*exe)->launches()) {
    EXPECT_THAT(device.loaded_ptx, HasSubstr(".entry " + launch.kernel + "("));
  }

  std::vector<Literal> args;
  std::vector<float> x(300), y(300);
  for (int i = 0; i < 300; ++i) { x[i] = i; y[i] = -i; }
  args.push_back(Literal::CreateR1<float>(PrimitiveType::F32, x));
  args.push_back(Literal::CreateR1<float>(PrimitiveType::F32, y));
  ASSERT_TRUE((*exe)->SetArguments(args).ok());
  ASSERT_TRUE((*exe)->Run().ok());
  EXPECT_EQ(device.synchronizations, 1);
  ASSERT_EQ(device.launches.size(), (*exe)->launches().size());
  // Every argument pointer lies in the arena, and the last is the scratch pointer.
  for (size_t i = 0; i < device.launches.size(); ++i) {
    const auto& launch = device.launches[i];
    EXPECT_EQ(launch.name, (*exe)->launches()[i].kernel);
    EXPECT_EQ(launch.arguments.size(), (*exe)->launches()[i].slots.size() + 1);
    for (DevicePointer p : launch.arguments) {
      EXPECT_GE(p, RecordingDevice::kBase);
      EXPECT_LE(p, RecordingDevice::kBase + device.memory.size());
    }
    EXPECT_GE(launch.dims.blocks * launch.dims.threads_per_block, 1);
  }
  // The first argument of the first kernel reads parameter x as copied in.
  const DevicePointer x_on_device = device.launches[0].arguments[0];
  float first[3];
  std::memcpy(first, device.memory.data() + (x_on_device - RecordingDevice::kBase) + 4, 12);
  EXPECT_EQ(first[0], 1.0f);
  // Results come from the root's buffers: the recording device computed nothing, so the result
  // holds whatever those buffers hold; write a marker into the scalar's and read it back.
  const GpuLaunch& last = (*exe)->launches().back();
  const DevicePointer r_on_device = device.launches.back().arguments[last.slots.size() - 1];
  const float marker = 42.5f;
  std::memcpy(device.memory.data() + (r_on_device - RecordingDevice::kBase), &marker, 4);
  auto result = (*exe)->Results();
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->tuple_element(1).data<float>()[0], marker);
  exe->reset();
  EXPECT_EQ(device.frees, 1);
}

// Two executables on one device name their kernels alike; each must launch its own module's.
// (On a real GPU the second one ran the first one's "fusion", with its arguments: wrong results,
// then a crash.)
TEST(GpuExecutableTest, EachExecutableLaunchesTheKernelsOfItsOwnModule) {
  RecordingDevice device;
  auto first_module = ParseHloModule(kTwoKernels);
  auto second_module = ParseHloModule(kTwoKernels);
  ASSERT_TRUE(first_module.ok() && second_module.ok());
  auto first = GpuExecutable::Create(std::move(*first_module), {}, device);
  auto second = GpuExecutable::Create(std::move(*second_module), {}, device);
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_EQ(device.modules_loaded, 2);
  std::vector<Literal> args;
  args.push_back(Literal::CreateR1<float>(PrimitiveType::F32, std::vector<float>(300, 1.0f)));
  args.push_back(Literal::CreateR1<float>(PrimitiveType::F32, std::vector<float>(300, 2.0f)));
  ASSERT_TRUE((*second)->Execute(args).ok());
  const size_t second_launches = device.launches.size();
  ASSERT_GT(second_launches, 0u);
  for (const auto& launch : device.launches) EXPECT_EQ(launch.module, 1) << launch.name;
  ASSERT_TRUE((*first)->Execute(args).ok());
  for (size_t i = second_launches; i < device.launches.size(); ++i) {
    EXPECT_EQ(device.launches[i].module, 0) << device.launches[i].name;
  }
}

TEST(GpuExecutableTest, WhileLoopAsksTheDeviceForItsPredicate) {
  // The recording device runs no kernel: the predicate the host reads back is the false its
  // zeroed memory holds, so the condition's kernel is launched once and the body's never.
  RecordingDevice device;
  auto module = ParseHloModule(testing::ReadTestFile(std::string(XLENS_SOURCE_DIR) +
                                                     "/tests/runtime/testdata/while_counter.hlo"));
  ASSERT_TRUE(module.ok()) << module.status().message();
  auto exe = GpuExecutable::Create(std::move(*module), {}, device);
  ASSERT_TRUE(exe.ok()) << exe.status().message();
  ASSERT_GE((*exe)->launches().size(), 2u);  // the condition's kernel and the body's at least
  auto result = (*exe)->Execute({});
  ASSERT_TRUE(result.ok()) << result.status().message();
  // The body's kernels never ran: fewer launches than the module has, each one recorded.
  EXPECT_LT(device.launches.size(), (*exe)->launches().size());
  ASSERT_EQ((*exe)->last_run_launches().size(), device.launches.size());
  for (size_t i = 0; i < device.launches.size(); ++i) {
    EXPECT_EQ(device.launches[i].name, (*exe)->launches()[(*exe)->last_run_launches()[i]].kernel);
  }
  EXPECT_EQ(result->GetAsInt64(0), 0);
}

// On a real GPU: random modules and corpus modules against the evaluator.
TEST(GpuExecutableOnDeviceTest, AgreesWithTheEvaluator) {
  auto device = OpenCudaDevice();
  if (!device.ok()) GTEST_SKIP() << "no GPU: " << device.status().message();
  int checked = 0;
  for (int64_t id = 0; id < 300; ++id) {
    xlens::testing::RandomModuleGenerator generator(20261122ull * 1000003 + id);
    const std::string text = generator.Generate(id);
    SCOPED_TRACE(text);
    auto module = ParseHloModule(text);
    ASSERT_TRUE(module.ok());
    std::mt19937_64 rng(id);
    std::vector<Literal> args;
    for (const HloInstruction* p : (*module)->entry_computation()->parameter_instructions()) {
      args.push_back(MakeRandomLiteral(p->shape(), rng).value());
    }
    auto expected = EvaluateModule(**module, args);
    ASSERT_TRUE(expected.ok());
    auto exe = GpuExecutable::Create(std::move(*module), {}, **device);
    if (!exe.ok()) continue;  // modules the GPU backend refuses (named in the message)
    auto actual = (*exe)->Execute(args);
    ASSERT_TRUE(actual.ok()) << actual.status().message();
    Status match = ExpectLiteralNear(*expected, *actual, ErrorSpec{1e-3, 1e-3});
    EXPECT_TRUE(match.ok()) << match.message();
    ++checked;
  }
  EXPECT_GT(checked, 150);
}

}  // namespace
}  // namespace xlens::runtime
