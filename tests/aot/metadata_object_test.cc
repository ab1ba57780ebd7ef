#include "compiler/aot/metadata_object.h"

#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "compiler/support/file_io.h"
#include "compiler/support/subprocess.h"
#include "compiler/support/temporary_directory.h"

namespace xlens::aot {
namespace {

HeaderSpec Spec() {
  HeaderSpec spec;
  spec.cpp_class = "ns::Model";
  spec.entry_point = "model_entry";
  spec.args.push_back({"x", "f32", {2, 3}, 24});
  spec.results.push_back({"y", "s32", {}, 4});
  spec.variables.push_back({"w", "f32", {3}, 12});
  spec.variable_update_result = {1};
  spec.temp_bytes = 64;
  return spec;
}

TEST(MetadataObjectTest, JsonDescribesTheFunction) {
  nlohmann::json j = nlohmann::json::parse(MetadataJson(Spec()));
  EXPECT_EQ(j["cpp_class"], "ns::Model");
  EXPECT_EQ(j["entry_point"], "model_entry");
  EXPECT_EQ(j["arguments"][0]["name"], "x");
  EXPECT_EQ(j["arguments"][0]["shape"], nlohmann::json({2, 3}));
  EXPECT_EQ(j["results"][0]["element_type"], "s32");
  EXPECT_EQ(j["variables"][0]["updated"], true);
  EXPECT_EQ(j["temp_bytes"], 64);
}

// The object defines the two symbols, for the host and for aarch64.
TEST(MetadataObjectTest, ObjectDefinesTheSymbols) {
  if (auto nm = RunCommand({"nm", "--version"}, 30); !nm.ok() || nm->exit_code != 0) {
    GTEST_SKIP() << "no nm";
  }
  auto dir = TemporaryDirectory::Create("metadata_object_test");
  ASSERT_TRUE(dir.ok()) << dir.status().message();
  for (const char* triple : {"", "aarch64-unknown-linux-gnu"}) {
    auto object = MetadataObject(Spec(), triple);
    ASSERT_TRUE(object.ok()) << object.status().message();
    ASSERT_GE(object->size(), 4u);
    EXPECT_EQ(object->substr(0, 4), "\x7f" "ELF");
    const std::string path = dir->path() + "/m.o";
    ASSERT_TRUE(WriteFile(path, *object).ok());
    auto nm = RunCommand({"nm", path}, 60, 1 << 20);
    ASSERT_TRUE(nm.ok()) << nm.status().message();
    ASSERT_EQ(nm->exit_code, 0) << nm->Describe(60) << ": " << nm->output;
    const std::string& symbols = nm->output;
    EXPECT_NE(symbols.find(" R model_entry_metadata\n"), std::string::npos) << triple << symbols;
    EXPECT_NE(symbols.find(" R model_entry_metadata_size\n"), std::string::npos) << triple << symbols;
  }
  auto unknown = MetadataObject(Spec(), "nosuch-unknown-none");
  EXPECT_FALSE(unknown.ok());
}

}  // namespace
}  // namespace xlens::aot
