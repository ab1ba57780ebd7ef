#include "compiler/runtime/mpi_transport.h"

#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
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
  // One MPI_Allgather of fixed blocks (each rank's size and its first bytes): the headers of the
  // steps fit, and only bytes beyond a block take a second call, an MPI_Allgatherv.
  constexpr size_t kBlock = 256;
  constexpr size_t kInline = kBlock - sizeof(int64_t);
  SetTimeoutLine(what, timeout_seconds);
  char error[kErrorSize] = {0};
  char block[kBlock] = {0};
  const int64_t size = static_cast<int64_t>(mine.size());
  std::memcpy(block, &size, sizeof(size));
  std::memcpy(block + sizeof(size), mine.data(), std::min(mine.size(), kInline));
  std::string blocks(kBlock * static_cast<size_t>(size_), '\0');
  int rc = api_->allgather(kEveryProcess, block, kBlock, blocks.data(), timeout_seconds, error,
                           sizeof(error));
  if (rc != kXlensMpiOk) AbortAll(fmt::format("{}: {}", what, error));
  std::vector<int64_t> sizes(static_cast<size_t>(size_));
  bool all_inline = true;
  for (int r = 0; r < size_; ++r) {
    std::memcpy(&sizes[r], blocks.data() + r * kBlock, sizeof(int64_t));
    all_inline = all_inline && sizes[r] >= 0 && static_cast<size_t>(sizes[r]) <= kInline;
  }
  std::vector<std::string> all;
  if (all_inline) {
    for (int r = 0; r < size_; ++r) {
      all.emplace_back(blocks.data() + r * kBlock + sizeof(int64_t), static_cast<size_t>(sizes[r]));
    }
    return all;
  }
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  std::string out(static_cast<size_t>(total), '\0');
  rc = api_->allgatherv(mine.data(), size, sizes.data(), out.data(), timeout_seconds, error,
                        sizeof(error));
  if (rc != kXlensMpiOk) AbortAll(fmt::format("{}: {}", what, error));
  size_t offset = 0;
  for (int64_t s : sizes) {
    all.push_back(out.substr(offset, static_cast<size_t>(s)));
    offset += static_cast<size_t>(s);
  }
  return all;
}

int MpiTransport::Split(int color, int key, std::string_view what, double timeout_seconds) {
  SetTimeoutLine(what, timeout_seconds);
  char error[kErrorSize] = {0};
  int communicator = 0;
  if (api_->split(color, key, &communicator, timeout_seconds, error, sizeof(error)) != kXlensMpiOk) {
    AbortAll(fmt::format("{}: {}", what, error));
  }
  return communicator;
}

void MpiTransport::ReduceScatter(int communicator, const void* in, void* out, int64_t count_each,
                                 PrimitiveType type, TransportReduction op, std::string_view what,
                                 double timeout_seconds) {
  SetTimeoutLine(what, timeout_seconds);
  char error[kErrorSize] = {0};
  const int rc = api_->reduce_scatter(communicator, in, out, count_each, TypeOf(type).value_or(-1),
                                      OpOf(op), timeout_seconds, error, sizeof(error));
  if (rc != kXlensMpiOk) AbortAll(fmt::format("{}: {}", what, error));
}

void MpiTransport::AllGatherBytes(int communicator, const void* in, void* out, int64_t bytes_each,
                                  std::string_view what, double timeout_seconds) {
  SetTimeoutLine(what, timeout_seconds);
  char error[kErrorSize] = {0};
  const int rc = api_->allgather(communicator, in, bytes_each, out, timeout_seconds, error,
                                 sizeof(error));
  if (rc != kXlensMpiOk) AbortAll(fmt::format("{}: {}", what, error));
}

void MpiTransport::AllToAllBytes(int communicator, const void* in, void* out, int64_t bytes_each,
                                 std::string_view what, double timeout_seconds) {
  SetTimeoutLine(what, timeout_seconds);
  char error[kErrorSize] = {0};
  const int rc = api_->alltoall(communicator, in, bytes_each, out, timeout_seconds, error,
                                sizeof(error));
  if (rc != kXlensMpiOk) AbortAll(fmt::format("{}: {}", what, error));
}

void MpiTransport::Exchange(std::span<const TransportSend> sends,
                            std::span<const TransportReceive> receives, std::string_view what,
                            double timeout_seconds) {
  if (sends.empty() && receives.empty()) return;
  SetTimeoutLine(what, timeout_seconds);
  std::vector<XlensMpiTransfer> out, in;
  for (const TransportSend& s : sends) {
    out.push_back({const_cast<void*>(s.data), s.bytes, s.peer, static_cast<int>(s.tag)});
  }
  for (const TransportReceive& r : receives) {
    in.push_back({r.data, r.bytes, r.peer, static_cast<int>(r.tag)});
  }
  char error[kErrorSize] = {0};
  const int rc = api_->exchange(out.data(), static_cast<int>(out.size()), in.data(),
                                static_cast<int>(in.size()), timeout_seconds, error, sizeof(error));
  if (rc != kXlensMpiOk) AbortAll(fmt::format("{}: {}", what, error));
}

void MpiTransport::SetTimeoutLine(std::string_view what, double timeout_seconds) {
  const std::string line = fmt::format("xlens: {}: {}: not every rank came within {:g} s; stopping "
                                       "every rank\n", RankName(), what, timeout_seconds);
  api_->set_timeout_line(line.c_str());
}

bool MpiTransport::CanReduce(PrimitiveType type) const { return TypeOf(type).has_value(); }

void MpiTransport::AllReduce(int communicator, void* data, int64_t count, PrimitiveType type,
                             TransportReduction op, std::string_view what, double timeout_seconds) {
  SetTimeoutLine(what, timeout_seconds);
  char error[kErrorSize] = {0};
  const int rc = api_->allreduce(communicator, data, count, TypeOf(type).value_or(-1), OpOf(op), timeout_seconds,
                                 error, sizeof(error));
  if (rc != kXlensMpiOk) AbortAll(fmt::format("{}: {}", what, error));
}

}  // namespace xlens::runtime
