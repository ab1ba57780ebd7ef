// libFuzzer target for the kernel choices file (dump/kernel_choices.h): a module's dump, the file
// --xla_cpu_xlens_load_kernel_choices_from names and each persistent cache entry are read from
// bytes someone else may have written, so any bytes must give records or one clean error line: no
// crash, no exception, no sanitizer report, no hang. Records that read must write a document that
// reads back to the same records (timed or not, times and estimates to the 0.1 us the writer
// keeps), and writing those again gives the same document.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dump/kernel_choices.h"

namespace {

void Require(bool condition, const char* what, const std::string& detail) {
  if (condition) return;
  std::fprintf(stderr, "%s: %s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  xlens::StatusOr<std::vector<xlens::KernelChoiceRecord>> records = xlens::ParseKernelChoices(bytes, "input");
  if (!records.ok()) {
    Require(records.status().message().find('\n') == std::string::npos, "an error of more than one line",
            records.status().message());
    return 0;
  }
  const std::string written = xlens::SerializeKernelChoices(*records);
  xlens::StatusOr<std::vector<xlens::KernelChoiceRecord>> again = xlens::ParseKernelChoices(written, "written");
  Require(again.ok(), "written choices do not read back", again.ok() ? written : again.status().message());
  Require(again->size() == records->size(), "a different number of choices read back", written);
  for (size_t i = 0; i < records->size(); ++i) {
    const xlens::KernelChoiceRecord& a = (*records)[i];
    const xlens::KernelChoiceRecord& b = (*again)[i];
    Require(a.machine == b.machine && a.key == b.key && a.candidates == b.candidates && a.winner == b.winner,
            "a choice reads back changed", written);
    auto close = [](double x, double y) { return std::fabs(x - y) <= 0.5e-4 + 1e-15 * std::fabs(x); };
    Require(a.timed() == b.timed(), "a choice reads back timed where it was not, or the reverse", written);
    Require(a.best_ms.size() == b.best_ms.size(), "times read back changed", written);
    for (size_t j = 0; j < a.best_ms.size(); ++j) {
      Require(close(a.best_ms[j], b.best_ms[j]), "a time reads back more than 0.05 us off", written);
    }
    Require(a.timed() || close(a.estimated_run_ms, b.estimated_run_ms),
            "an untimed choice's estimate reads back more than 0.05 us off", written);
  }
  Require(xlens::SerializeKernelChoices(*again) == written, "written choices write back differently", written);
  return 0;
}
