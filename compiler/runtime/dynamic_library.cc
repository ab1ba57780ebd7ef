#include "compiler/runtime/dynamic_library.h"

#include <dlfcn.h>

#include <cstdlib>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace xlens::runtime {

std::vector<std::string> CudaLibraryCandidates(std::initializer_list<const char*> sonames,
                                               const char* home_variable) {
  std::vector<std::string> dirs;
  auto from = [&](const char* variable, const char* lib) {
    const char* home = variable != nullptr ? std::getenv(variable) : nullptr;
    if (home != nullptr && *home != '\0') dirs.push_back(std::string(home) + lib);
  };
  from(home_variable, "/lib/");
  from("CUDA_HOME", "/lib64/");
  dirs.push_back("/usr/local/cuda/lib64/");
  dirs.push_back("");  // the loader's search path
  std::vector<std::string> names;
  for (const std::string& dir : dirs) {
    for (const char* soname : sonames) names.push_back(dir + soname);
  }
  return names;
}

StatusOr<DynamicLibrary> OpenFirstLibrary(const std::vector<std::string>& candidates,
                                          std::string_view what, std::string_view install) {
  std::string last_error;
  for (const std::string& name : candidates) {
    if (void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL); handle != nullptr) {
      return DynamicLibrary{name, handle};
    }
    const char* why = dlerror();
    last_error = why ? why : name + " not loadable";
  }
  std::string tried = candidates.size() == 1
                          ? last_error
                          : fmt::format("tried {}; last: {}", fmt::join(candidates, ", "), last_error);
  std::string message = fmt::format("no {} found ({})", what, tried);
  if (!install.empty()) message += fmt::format(": {}", install);
  return Error(message);
}

Status ResolveSymbols(DynamicLibrary& library, std::initializer_list<LibrarySymbol> symbols,
                      std::string_view why) {
  const char* missing = nullptr;
  for (const LibrarySymbol& symbol : symbols) {
    void* address = dlsym(library.handle, symbol.name());
    symbol.Assign(address);
    if (address == nullptr && missing == nullptr) missing = symbol.name();
  }
  if (missing == nullptr) return OkStatus();
  dlclose(library.handle);
  library.handle = nullptr;
  if (why.empty()) return Error(fmt::format("{} lacks {}", library.path, missing));
  return Error(fmt::format("{} lacks {} ({})", library.path, missing, why));
}

}  // namespace xlens::runtime
