// libFuzzer target for the HLO text parser. Any input must give a module or a clean error: no
// crash, no sanitizer report, no hang. A module that parses must also print and parse back to the
// same text (the round-trip contract), so the printer is fuzzed through the parser's output.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "compiler/hlo/parser.h"
#include "compiler/hlo/printer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto module = xlens::ParseHloModule(text, xlens::ParseOptions{.verify = true, .filename = "fuzz"});
  if (!module.ok()) return 0;
  std::string printed = xlens::PrintModule(**module);
  auto reparsed = xlens::ParseHloModule(printed, xlens::ParseOptions{.verify = false, .filename = "printed"});
  if (!reparsed.ok()) {
    std::fprintf(stderr, "printed module does not parse: %s\n%s\n", reparsed.status().message().c_str(),
                 printed.c_str());
    std::abort();
  }
  if (xlens::PrintModule(**reparsed) != printed) {
    std::fprintf(stderr, "print(parse(print(m))) != print(m):\n%s\n", printed.c_str());
    std::abort();
  }
  return 0;
}
