// Shared libraries opened at run time with dlopen (the CUDA driver, cuBLAS, NCCL): no link-time
// dependency, so every binary runs on a machine without them and says what is missing when one
// is asked for. One place opens the first of several sonames and resolves a table of entry
// points, so that every such library fails in the same words.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/support/status.h"

namespace xlens::runtime {

// A library dlopen opened: the name that opened it and its handle (kept open once its entry
// points are resolved: they live as long as the process).
struct DynamicLibrary {
  std::string path;
  void* handle = nullptr;
};

// Where CUDA's libraries are looked for, in order: $`home_variable`/lib where that variable is set
// (NCCL_HOME: pip's nvidia-nccl), $CUDA_HOME/lib64, /usr/local/cuda/lib64, then the loader's
// search path; in each, every one of `sonames` in turn.
std::vector<std::string> CudaLibraryCandidates(std::initializer_list<const char*> sonames,
                                               const char* home_variable = nullptr);

// Opens the first of `candidates` that dlopen opens (RTLD_NOW | RTLD_LOCAL). Otherwise one line:
// "no <what> found (tried a, b; last: <dlerror>)" ("no <what> found (<dlerror>)" for a single
// candidate, whose name dlerror already gives), then ": <install>" where `install` is not empty.
StatusOr<DynamicLibrary> OpenFirstLibrary(const std::vector<std::string>& candidates,
                                          std::string_view what, std::string_view install = {});

// One entry point to resolve: its symbol and the function pointer that receives it.
class LibrarySymbol {
 public:
  template <typename Fn>
  LibrarySymbol(Fn*& target, const char* name)
      : name_(name), target_(&target), assign_([](void* target, void* address) {
          *static_cast<Fn**>(target) = reinterpret_cast<Fn*>(address);
        }) {}

  const char* name() const { return name_; }
  // Stores `address` (nullptr when absent) into the target.
  void Assign(void* address) const { assign_(target_, address); }

 private:
  const char* name_;
  void* target_;
  void (*assign_)(void* target, void* address);
};

// Resolves every one of `symbols` in `library` (each absent one set to nullptr). Where one is
// absent, closes the library (handle nullptr) and says which, the first: "<path> lacks <symbol>",
// then " (<why>)" where `why` is not empty.
Status ResolveSymbols(DynamicLibrary& library, std::initializer_list<LibrarySymbol> symbols,
                      std::string_view why = {});

}  // namespace xlens::runtime
