// libFuzzer target for the viewer's HLO outline reader. The viewer opens dumps from any XLA or
// JAX version, and a user may point it at anything, so any bytes must give an outline or one
// error line naming the place: no crash, no exception, no sanitizer report, no hang. An outline
// that reads must diff against itself as no change (the stage diff's first promise).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "viewer/hlo_outline.h"
#include "viewer/stage_diff.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto outline = xlens::viewer::ParseHloOutline(text, "fuzz");
  if (!outline.ok()) {
    const std::string message = outline.status().message();
    if (message.find('\n') != std::string::npos || message.rfind("fuzz:", 0) != 0) {
      std::fprintf(stderr, "not one line naming the input: %s\n", message.c_str());
      std::abort();
    }
    return 0;
  }
  // Every instruction's callers, as the Details pane reads them: bounded, whatever the table's
  // cycles and dangling ids.
  for (const xlens::viewer::HloOutlineComputation& computation : outline->computations) {
    for (const xlens::viewer::HloOutlineInstruction& instruction : computation.instructions) {
      if (outline->CallersOf(instruction).size() > 64) {
        std::fprintf(stderr, "more callers than asked for\n");
        std::abort();
      }
    }
  }
  if (!xlens::viewer::ComputeStageDiff(*outline, *outline).empty()) {
    std::fprintf(stderr, "an outline differs from itself\n");
    std::abort();
  }
  return 0;
}
