#include "compiler/cli/thunk_profile.h"

#include "profiler/hlo_profile.h"
#include "profiler/machine_limits_cache.h"

namespace xlens::cli {

std::string ThunkProfileText(const runtime::Executable& exe, const std::string& module,
                             const std::vector<int64_t>& thunk_ns, int64_t runs) {
  profiler::HloProfile profile;
  profile.module = module;
  profile.runs = runs;
  profile.limits = &profiler::ThisMachineLimits();
  for (size_t i = 0; i < exe.thunks().size() && i < thunk_ns.size(); ++i) {
    const runtime::Thunk& thunk = *exe.thunks()[i];
    const runtime::ThunkTraceInfo& info = thunk.trace_info();
    profiler::HloProfileEntry& entry = profile.entries.emplace_back();
    entry.name = thunk.hlo_name();
    entry.kind = info.kind;
    entry.total_ns = thunk_ns[i];
    entry.bytes_accessed = info.bytes_accessed;
    entry.flops = info.flops;
    entry.transcendentals = info.transcendentals;
    entry.source = info.source;
  }
  return profiler::FormatHloProfile(profile);
}

}  // namespace xlens::cli
