#include "compiler/codegen/cpu/perf_map.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include <gtest/gtest.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include "compiler/codegen/cpu/cpu_jit.h"
#include "compiler/support/file_io.h"
#include "compiler/support/temporary_directory.h"

namespace xlens::codegen {
namespace {

// A module of two functions that return 7 and 8, so that the map has two lines to check.
void AddConstantFunctions(CpuJit& jit) {
  auto context = std::make_unique<llvm::LLVMContext>();
  auto module = std::make_unique<llvm::Module>("m", *context);
  llvm::IRBuilder<> b(*context);
  for (auto [name, value] : {std::pair{"fusion.6_phase0", 7}, std::pair{"fusion.6_phase1", 8}}) {
    auto* f = llvm::Function::Create(llvm::FunctionType::get(b.getInt32Ty(), false),
                                     llvm::Function::ExternalLinkage, name, *module);
    b.SetInsertPoint(llvm::BasicBlock::Create(*context, "entry", f));
    b.CreateRet(b.getInt32(value));
  }
  auto ir = jit.AddModule(std::move(module), std::move(context), /*keep_ir=*/false);
  ASSERT_TRUE(ir.ok()) << ir.status().message();
}

TEST(PerfMapTest, ListsEachLinkedFunctionAtTheAddressItRunsAt) {
  auto dir = TemporaryDirectory::Create("perf-map");
  ASSERT_TRUE(dir.ok()) << dir.status().message();
  const std::string path = dir->path() + "/perf.map";
  CpuJitOptions options;
  options.perf_map_path = path;
  auto jit = CpuJit::Create(options);
  ASSERT_TRUE(jit.ok()) << jit.status().message();
  AddConstantFunctions(**jit);
  int found = 0;
  for (const char* name : {"fusion.6_phase0", "fusion.6_phase1"}) {
    auto address = (*jit)->Lookup(name);  // links the module: its functions reach the map
    ASSERT_TRUE(address.ok()) << address.status().message();
    auto map = ReadFile(path);
    ASSERT_TRUE(map.ok()) << map.status().message();
    std::istringstream lines(*map);
    std::string start, size, symbol;
    while (lines >> start >> size >> symbol) {
      if (symbol != name) continue;
      ++found;
      // perf looks up a sample's address in [START, START + SIZE): the function's entry is there.
      EXPECT_EQ(std::stoull(start, nullptr, 16), reinterpret_cast<uintptr_t>(*address)) << *map;
      EXPECT_GT(std::stoull(size, nullptr, 16), 0u) << *map;
    }
  }
  EXPECT_EQ(found, 2);
}

TEST(PerfMapTest, ASymbolicLinkOrAFifoAtTheMapsNameIsNeverWrittenThrough) {
  // The map's name is a convention in /tmp, where another user may have put something first.
  auto dir = TemporaryDirectory::Create("perf-map");
  ASSERT_TRUE(dir.ok()) << dir.status().message();
  const std::string victim = dir->path() + "/victim";
  ASSERT_TRUE(WriteFile(victim, "keep\n").ok());
  const std::string link = dir->path() + "/perf.map";
  ASSERT_EQ(::symlink(victim.c_str(), link.c_str()), 0);
  const std::string fifo = dir->path() + "/fifo.map";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {link, fifo}) {
    CpuJitOptions options;
    options.perf_map_path = path;
    auto jit = CpuJit::Create(options);
    ASSERT_TRUE(jit.ok()) << jit.status().message();
    AddConstantFunctions(**jit);
    ASSERT_TRUE((*jit)->Lookup("fusion.6_phase0").ok());  // links: the map is written now
  }
  auto kept = ReadFile(victim);
  ASSERT_TRUE(kept.ok()) << kept.status().message();
  EXPECT_EQ(*kept, "keep\n");
}

TEST(PerfMapTest, TheEnvironmentNamesTheMapPerfReadsForThisProcess) {
  ::unsetenv("XLENS_PERF_MAP");
  EXPECT_EQ(PerfMapPathFromEnvironment(), "");
  ::setenv("XLENS_PERF_MAP", "0", 1);
  EXPECT_EQ(PerfMapPathFromEnvironment(), "");
  ::setenv("XLENS_PERF_MAP", "1", 1);
  EXPECT_EQ(PerfMapPathFromEnvironment(), "/tmp/perf-" + std::to_string(getpid()) + ".map");
  ::unsetenv("XLENS_PERF_MAP");
}

}  // namespace
}  // namespace xlens::codegen
