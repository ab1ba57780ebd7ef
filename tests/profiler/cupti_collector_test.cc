// The CUPTI collector: Start's failures on machines that cannot trace and, where a CUDA device
// is present, a Start/Stop round trip. The record conversion is tested in cupti_records_test.
#include "profiler/cupti_collector.h"

#include <dlfcn.h>

#include <algorithm>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace xlens::profiler {
namespace {

using ::testing::HasSubstr;

int64_t IntMetadata(const Trace& trace, const std::string& key) {
  const TraceArg* arg = trace.FindMetadata(key);
  if (arg == nullptr || !std::holds_alternative<int64_t>(arg->value)) {
    ADD_FAILURE() << "no integer metadata " << key;
    return -1;
  }
  return std::get<int64_t>(arg->value);
}

TEST(CuptiCollectorTest, StartWithAMissingLibrarySaysWhich) {
  CuptiOptions options;
  options.library_path = "/nonexistent/libcupti.so.13";
  auto collector = CuptiCollector::Start(options);
  ASSERT_FALSE(collector.ok());
  // Built without CUPTI's headers, Start says that instead.
  EXPECT_THAT(collector.status().message(), HasSubstr("CUPTI"));
  EXPECT_EQ(collector.status().message().find('\n'), std::string::npos);
  if (collector.status().message().find("headers") == std::string::npos) {
    EXPECT_THAT(collector.status().message(), HasSubstr("/nonexistent/libcupti.so.13"));
  }
}

TEST(CuptiCollectorTest, StartWithALibraryThatIsNotCuptiSaysWhatIsMissing) {
  CuptiOptions options;
  options.library_path = "libm.so.6";
  auto collector = CuptiCollector::Start(options);
  ASSERT_FALSE(collector.ok());
  if (collector.status().message().find("headers") == std::string::npos) {
    EXPECT_THAT(collector.status().message(), HasSubstr("lacks cuptiGetVersion"));
  }
}

TEST(CuptiCollectorTest, StartRejectsAnEmptyBufferPool) {
  CuptiOptions options;
  options.buffer_count = 0;
  EXPECT_FALSE(CuptiCollector::Start(options).ok());
}

// Whatever this machine has (no toolkit, no driver, no GPU, or all of them), Start either
// fails with one line naming the reason or works, and Stop then returns an empty GPU part.
TEST(CuptiCollectorTest, StartWithTheInstalledCuptiFailsClearlyOrRoundTrips) {
  auto collector = CuptiCollector::Start();
  if (!collector.ok()) {
    const std::string message = collector.status().message();
    EXPECT_THAT(message, HasSubstr("CUPTI"));
    EXPECT_EQ(message.find('\n'), std::string::npos);
    // A reason, not just a code: the missing piece or CUPTI's own words.
    EXPECT_GT(message.size(), std::string("CUPTI cannot trace the GPU: ").size() + 10) << message;
    return;
  }
  Trace trace = (*collector)->Stop();
  for (const TraceEvent& event : trace.events) {
    EXPECT_LT(event.pid, kGpuPidBase) << event.name;
  }
  EXPECT_EQ(IntMetadata(trace, "dropped_records"), 0);
}

// Whether a CUDA device is usable, through the driver directly (the profiler has no device API).
std::string CudaDeviceAbsence() {
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (cuda == nullptr) {
    const char* why = dlerror();
    return why ? why : "libcuda.so.1 not loadable";
  }
  using CuInit = int (*)(unsigned);
  using CuDeviceGetCount = int (*)(int*);
  auto cu_init = reinterpret_cast<CuInit>(dlsym(cuda, "cuInit"));
  auto cu_device_get_count = reinterpret_cast<CuDeviceGetCount>(dlsym(cuda, "cuDeviceGetCount"));
  if (cu_init == nullptr || cu_device_get_count == nullptr) return "libcuda.so.1 lacks cuInit";
  if (int rc = cu_init(0); rc != 0) return "cuInit failed with CUDA error " + std::to_string(rc);
  int count = 0;
  if (cu_device_get_count(&count) != 0 || count == 0) return "the driver sees no GPU";
  return "";
}

TEST(CuptiCollectorGpuTest, StartStopRoundTripsWithoutDroppingRecords) {
  if (std::string absent = CudaDeviceAbsence(); !absent.empty()) {
    GTEST_SKIP() << "no CUDA device: " << absent;
  }
  for (int round = 0; round < 2; ++round) {
    auto collector = CuptiCollector::Start();
    ASSERT_TRUE(collector.ok()) << collector.status().message();
    // One collector at a time.
    EXPECT_FALSE(CuptiCollector::Start().ok());
    (*collector)->PushExternalCorrelation(7);
    (*collector)->PopExternalCorrelation();
    Trace trace = (*collector)->Stop();
    EXPECT_EQ(IntMetadata(trace, "dropped_records"), 0);
    EXPECT_GE(IntMetadata(trace, "cupti_version"), 19);
    EXPECT_EQ(trace.FindMetadata("cupti_error"), nullptr);
    for (const TraceEvent& event : trace.events) {
      EXPECT_NE(event.category, category::kGpuKernel) << event.name;
    }
    // A second Stop has nothing left.
    EXPECT_TRUE((*collector)->Stop().events.empty());
  }
}

}  // namespace
}  // namespace xlens::profiler
