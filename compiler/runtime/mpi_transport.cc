#include "compiler/runtime/mpi_transport.h"

#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "compiler/mpi/mpi_plugin.h"

namespace xlens::runtime {

struct MpiTransport::Api : XlensMpiApi {};

namespace {

constexpr size_t kErrorSize = 512;

// The line a rank prints when mpirun stops it because another rank ended (mpirun's SIGTERM),
// prepared beforehand: a signal handler may only write.
char g_stopped_line[256];
// Set once this rank has said how its run ended: mpirun's SIGTERM then ends it without a second
// line (a rank that failed exits first, and mpirun stops the others as they finish printing).
volatile sig_atomic_t g_verdict_given = 0;

void OnTerminate(int) {
  if (!g_verdict_given) {
    const ssize_t written = write(STDERR_FILENO, g_stopped_line, std::strlen(g_stopped_line));
    (void)written;
  }
  _exit(1);
}

std::string PluginPath() {
  if (const char* path = std::getenv("XLENS_MPI_LIBRARY"); path != nullptr && *path != '\0') {
    return path;
  }
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return "libxlens_mpi.so";
  return (self.parent_path() / "libxlens_mpi.so").string();
}

std::optional<int> TypeOf(PrimitiveType type) {
  switch (type) {
    case PrimitiveType::F32: return kXlensMpiF32;
    case PrimitiveType::F64: return kXlensMpiF64;
    case PrimitiveType::S8: return kXlensMpiS8;
    case PrimitiveType::S16: return kXlensMpiS16;
    case PrimitiveType::S32: return kXlensMpiS32;
    case PrimitiveType::S64: return kXlensMpiS64;
    case PrimitiveType::U8: return kXlensMpiU8;
    case PrimitiveType::U16: return kXlensMpiU16;
    case PrimitiveType::U32: return kXlensMpiU32;
    case PrimitiveType::U64: return kXlensMpiU64;
    default: return std::nullopt;
  }
}

int OpOf(TransportReduction op) {
  switch (op) {
    case TransportReduction::kSum: return kXlensMpiSum;
    case TransportReduction::kProduct: return kXlensMpiProd;
    case TransportReduction::kMax: return kXlensMpiMax;
    case TransportReduction::kMin: return kXlensMpiMin;
  }
  return kXlensMpiSum;
}

}  // namespace

StatusOr<std::unique_ptr<MpiTransport>> MpiTransport::Create() {
  const std::string path = PluginPath();
  // RTLD_GLOBAL: Open MPI's own components, which it opens in turn, look libmpi's symbols up
  // globally.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    const std::string why = error ? error : "unknown error";
    const bool from_environment = std::getenv("XLENS_MPI_LIBRARY") != nullptr &&
                                  *std::getenv("XLENS_MPI_LIBRARY") != '\0';
    std::error_code exists_error;
    if (!std::filesystem::exists(path, exists_error)) {
      return Error(fmt::format(
          "--distributed=mpi: {} does not exist: {}", path,
          from_environment ? "XLENS_MPI_LIBRARY names it"
                           : "this xlens was built without Open MPI (install openmpi-bin and "
                             "libopenmpi-dev, scripts/setup.sh, and rebuild)"));
    }
    // The library is there but what it links is not (a machine without Open MPI's runtime).
    return Error(fmt::format("--distributed=mpi: cannot load {} ({}): is Open MPI installed "
                             "(openmpi-bin)?", path, why));
  }
  using Entry = const XlensMpiApi* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(handle, "xlens_mpi_api"));
  const XlensMpiApi* api = entry ? entry() : nullptr;
  if (api == nullptr || api->abi_version != kXlensMpiAbiVersion) {
    dlclose(handle);
    return Error(fmt::format("--distributed=mpi: {} is not this xlens's MPI library (rebuild it)",
                             path));
  }
  auto transport = std::unique_ptr<MpiTransport>(new MpiTransport());
  transport->handle_ = handle;
  transport->api_ = static_cast<const Api*>(api);
  char error[kErrorSize] = {0};
  if (api->init(&transport->rank_, &transport->size_, error, sizeof(error)) != kXlensMpiOk) {
    return Error(fmt::format("--distributed=mpi: {}", error));
  }
  std::snprintf(g_stopped_line, sizeof(g_stopped_line),
                "xlens: rank %d of %d: stopped by mpirun: another rank ended before the run "
                "finished (mpirun says which)\n", transport->rank_, transport->size_);
  struct sigaction action {};
  action.sa_handler = OnTerminate;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  return transport;
}

MpiTransport::~MpiTransport() { Finalize(); }

std::string MpiTransport::RankName() const { return fmt::format("rank {} of {}", rank_, size_); }

void MpiTransport::VerdictGiven() { g_verdict_given = 1; }

void MpiTransport::AbortAll(std::string_view message) {
  g_verdict_given = 1;
  std::fprintf(stderr, "xlens: %s: %.*s; stopping every rank\n", RankName().c_str(),
               static_cast<int>(message.size()), message.data());
  std::fflush(stderr);
  std::fflush(stdout);
  // The others are stopped by mpirun, which then reports the abort: the line above comes first.
  signal(SIGTERM, SIG_DFL);
  api_->abort(1);
  std::_Exit(1);
}

void MpiTransport::Finalize() {
  if (api_ == nullptr || finalized_) return;
  finalized_ = true;
  api_->finalize();
}

std::vector<std::string> MpiTransport::AllGather(std::string_view mine, std::string_view what,
                                                 double timeout_seconds) {
  SetTimeoutLine(what, timeout_seconds);
  char error[kErrorSize] = {0};
  std::vector<int64_t> sizes(static_cast<size_t>(size_));
  int rc = api_->allgather_sizes(static_cast<int64_t>(mine.size()), sizes.data(), timeout_seconds,
                                 error, sizeof(error));
  std::string out;
  if (rc == kXlensMpiOk) {
    int64_t total = 0;
    for (int64_t s : sizes) total += s;
    out.resize(static_cast<size_t>(total));
    rc = api_->allgatherv(mine.data(), static_cast<int64_t>(mine.size()), sizes.data(), out.data(),
                          timeout_seconds, error, sizeof(error));
  }
  if (rc != kXlensMpiOk) AbortAll(fmt::format("{}: {}", what, error));
  std::vector<std::string> all;
  size_t offset = 0;
  for (int64_t s : sizes) {
    all.push_back(out.substr(offset, static_cast<size_t>(s)));
    offset += static_cast<size_t>(s);
  }
  return all;
}

void MpiTransport::SetTimeoutLine(std::string_view what, double timeout_seconds) {
  const std::string line = fmt::format("xlens: {}: {}: not every rank came within {:g} s; stopping "
                                       "every rank\n", RankName(), what, timeout_seconds);
  api_->set_timeout_line(line.c_str());
}

bool MpiTransport::CanReduce(PrimitiveType type) const { return TypeOf(type).has_value(); }

void MpiTransport::AllReduce(void* data, int64_t count, PrimitiveType type, TransportReduction op,
                             std::string_view what, double timeout_seconds) {
  SetTimeoutLine(what, timeout_seconds);
  char error[kErrorSize] = {0};
  const int rc = api_->allreduce(data, count, TypeOf(type).value_or(-1), OpOf(op), timeout_seconds,
                                 error, sizeof(error));
  if (rc != kXlensMpiOk) AbortAll(fmt::format("{}: {}", what, error));
}

}  // namespace xlens::runtime
