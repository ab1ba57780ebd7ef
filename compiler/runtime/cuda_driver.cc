#include "compiler/runtime/cuda_driver.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "compiler/runtime/dynamic_library.h"
#include "compiler/runtime/gpu_device.h"

namespace xlens::runtime {
namespace {

// The driver API's types, as <cuda.h> declares them (not included: the toolkit is optional).
using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUmodule = void*;
using CUfunction = void*;
using CUdeviceptr = unsigned long long;
constexpr int kComputeCapabilityMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kComputeCapabilityMinor = 76;

// The driver's entry points, looked up once.
struct CudaDriver {
  void* library = nullptr;
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuModuleLoadData)(CUmodule*, const void*) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t) = nullptr;
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, void*, void**, void**) = nullptr;
  CUresult (*cuCtxSynchronize)() = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;
};

StatusOr<const CudaDriver*> LoadDriver() {
  static CudaDriver driver;
  static const Status loaded = []() -> Status {
    ASSIGN_OR_RETURN(DynamicLibrary library, OpenFirstLibrary({"libcuda.so.1"}, "CUDA driver"));
    RETURN_IF_ERROR(ResolveSymbols(
        library, {{driver.cuInit, "cuInit"},
                  {driver.cuDeviceGetCount, "cuDeviceGetCount"},
                  {driver.cuDeviceGet, "cuDeviceGet"},
                  {driver.cuDeviceGetAttribute, "cuDeviceGetAttribute"},
                  {driver.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"},
                  {driver.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"},
                  {driver.cuCtxSetCurrent, "cuCtxSetCurrent"},
                  {driver.cuModuleLoadData, "cuModuleLoadData"},
                  {driver.cuModuleUnload, "cuModuleUnload"},
                  {driver.cuModuleGetFunction, "cuModuleGetFunction"},
                  {driver.cuMemAlloc, "cuMemAlloc_v2"},
                  {driver.cuMemFree, "cuMemFree_v2"},
                  {driver.cuMemcpyHtoD, "cuMemcpyHtoD_v2"},
                  {driver.cuMemcpyDtoH, "cuMemcpyDtoH_v2"},
                  {driver.cuLaunchKernel, "cuLaunchKernel"},
                  {driver.cuCtxSynchronize, "cuCtxSynchronize"},
                  {driver.cuGetErrorString, "cuGetErrorString"}}));
    driver.library = library.handle;
    return OkStatus();
  }();
  RETURN_IF_ERROR(loaded);
  return &driver;
}

Status Check(const CudaDriver& driver, CUresult rc, const char* what) {
  if (rc == 0) return OkStatus();
  const char* text = nullptr;
  if (driver.cuGetErrorString) driver.cuGetErrorString(rc, &text);
  return Error(fmt::format("{} failed: {} (CUDA error {})", what, text ? text : "unknown", rc));
}

class CudaDevice : public GpuDevice {
 public:
  CudaDevice(const CudaDriver& driver, CUdevice device, CUcontext context, std::string arch)
      : driver_(driver), device_(device), context_(context), arch_(std::move(arch)) {}
  ~CudaDevice() override {
    driver_.cuCtxSetCurrent(context_);
    for (CUmodule m : modules_) driver_.cuModuleUnload(m);
    for (CUdeviceptr p : allocations_) driver_.cuMemFree(p);
    driver_.cuDevicePrimaryCtxRelease(device_);
  }

  std::string arch() const override { return arch_; }

  StatusOr<DevicePointer> Allocate(int64_t bytes) override {
    RETURN_IF_ERROR(MakeCurrent());
    CUdeviceptr p = 0;
    RETURN_IF_ERROR(Check(driver_, driver_.cuMemAlloc(&p, std::max<int64_t>(bytes, 1)), "cuMemAlloc"));
    allocations_.push_back(p);
    return p;
  }
  Status Free(DevicePointer pointer) override {
    RETURN_IF_ERROR(MakeCurrent());
    allocations_.erase(std::remove(allocations_.begin(), allocations_.end(), pointer), allocations_.end());
    return Check(driver_, driver_.cuMemFree(pointer), "cuMemFree");
  }
  Status CopyToDevice(DevicePointer destination, const void* source, int64_t bytes) override {
    RETURN_IF_ERROR(MakeCurrent());
    if (bytes == 0) return OkStatus();
    return Check(driver_, driver_.cuMemcpyHtoD(destination, source, bytes), "cuMemcpyHtoD");
  }
  Status CopyFromDevice(void* destination, DevicePointer source, int64_t bytes) override {
    RETURN_IF_ERROR(MakeCurrent());
    if (bytes == 0) return OkStatus();
    return Check(driver_, driver_.cuMemcpyDtoH(destination, source, bytes), "cuMemcpyDtoH");
  }
  StatusOr<GpuModuleHandle> LoadModule(const GpuModuleImage& image) override {
    RETURN_IF_ERROR(MakeCurrent());
    CUmodule module = nullptr;
    RETURN_IF_ERROR(Check(driver_, driver_.cuModuleLoadData(&module, image.ptx.c_str()), "cuModuleLoadData"));
    modules_.push_back(module);
    return static_cast<GpuModuleHandle>(modules_.size() - 1);
  }
  Status Launch(GpuModuleHandle module, const std::string& name, const LaunchDimensions& dims,
                const std::vector<DevicePointer>& arguments) override {
    RETURN_IF_ERROR(MakeCurrent());
    if (module < 0 || module >= static_cast<GpuModuleHandle>(modules_.size())) {
      return Error(fmt::format("kernel {}: module {} was never loaded", name, module));
    }
    auto it = functions_.find({module, name});
    if (it == functions_.end()) {
      CUfunction fn = nullptr;
      if (driver_.cuModuleGetFunction(&fn, modules_[module], name.c_str()) != 0 || fn == nullptr) {
        return Error(fmt::format("kernel {} is not in its executable's module", name));
      }
      it = functions_.emplace(std::make_pair(module, name), fn).first;
    }
    if (dims.blocks == 0) return OkStatus();
    std::vector<CUdeviceptr> values(arguments.begin(), arguments.end());
    std::vector<void*> params;
    for (CUdeviceptr& v : values) params.push_back(&v);
    return Check(driver_,
                 driver_.cuLaunchKernel(it->second, static_cast<unsigned>(dims.blocks), 1, 1,
                                        static_cast<unsigned>(dims.threads_per_block), 1, 1,
                                        static_cast<unsigned>(dims.shared_memory_bytes),
                                        nullptr, params.data(), nullptr),
                 "cuLaunchKernel");
  }
  Status Synchronize() override {
    RETURN_IF_ERROR(MakeCurrent());
    return Check(driver_, driver_.cuCtxSynchronize(), "cuCtxSynchronize");
  }
  bool runs_cuda_libraries() const override { return true; }

 private:
  // The calling thread's context is this device's (a thread per device on several GPUs).
  Status MakeCurrent() { return Check(driver_, driver_.cuCtxSetCurrent(context_), "cuCtxSetCurrent"); }

  const CudaDriver& driver_;
  CUdevice device_;
  CUcontext context_;
  std::string arch_;
  std::vector<CUmodule> modules_;
  std::vector<CUdeviceptr> allocations_;
  std::map<std::pair<GpuModuleHandle, std::string>, CUfunction> functions_;
};

}  // namespace

Status CheckCudaDevice() {
  ASSIGN_OR_RETURN(const CudaDriver* driver, LoadDriver());
  RETURN_IF_ERROR(Check(*driver, driver->cuInit(0), "cuInit"));
  int count = 0;
  RETURN_IF_ERROR(Check(*driver, driver->cuDeviceGetCount(&count), "cuDeviceGetCount"));
  if (count == 0) return Error("the CUDA driver found no GPU");
  return OkStatus();
}

StatusOr<int> CountCudaDevices() {
  ASSIGN_OR_RETURN(const CudaDriver* driver, LoadDriver());
  RETURN_IF_ERROR(Check(*driver, driver->cuInit(0), "cuInit"));
  int count = 0;
  RETURN_IF_ERROR(Check(*driver, driver->cuDeviceGetCount(&count), "cuDeviceGetCount"));
  return count;
}

StatusOr<std::unique_ptr<GpuDevice>> OpenCudaDevice() { return OpenCudaDevice(0); }

StatusOr<std::unique_ptr<GpuDevice>> OpenCudaDevice(int ordinal) {
  RETURN_IF_ERROR(CheckCudaDevice());
  ASSIGN_OR_RETURN(const CudaDriver* driver, LoadDriver());
  CUdevice device = 0;
  RETURN_IF_ERROR(Check(*driver, driver->cuDeviceGet(&device, ordinal), "cuDeviceGet"));
  int major = 0, minor = 0;
  RETURN_IF_ERROR(Check(*driver, driver->cuDeviceGetAttribute(&major, kComputeCapabilityMajor, device),
                        "cuDeviceGetAttribute"));
  RETURN_IF_ERROR(Check(*driver, driver->cuDeviceGetAttribute(&minor, kComputeCapabilityMinor, device),
                        "cuDeviceGetAttribute"));
  CUcontext context = nullptr;
  RETURN_IF_ERROR(Check(*driver, driver->cuDevicePrimaryCtxRetain(&context, device),
                        "cuDevicePrimaryCtxRetain"));
  RETURN_IF_ERROR(Check(*driver, driver->cuCtxSetCurrent(context), "cuCtxSetCurrent"));
  return std::unique_ptr<GpuDevice>(
      new CudaDevice(*driver, device, context, fmt::format("sm_{}{}", major, minor)));
}

}  // namespace xlens::runtime
