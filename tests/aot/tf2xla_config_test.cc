#include "compiler/aot/tf2xla_config.h"

#include <gtest/gtest.h>

namespace xlens::aot {
namespace {

constexpr const char* kMnist = R"(# tfcompile's example config
feed {
  id { node_name: "x" }
  shape { dim { size: 1 } dim { size: 784 } }
  name: "x"
}
fetch {
  id { node_name: "y" output_index: 0 }
  name: "probs"
}
variable { node_name: "w" name: "weights" type: DT_FLOAT shape { dim { size: 784 } dim { size: 10 } } readonly: true }
)";

StatusOr<Tf2XlaConfig> Text(const std::string& text) {
  return ParseTf2XlaConfig(text, ConfigFormat::kText, "c.pbtxt");
}

TEST(Tf2XlaConfigTest, ReadsFeedsFetchesAndVariables) {
  auto config = Text(kMnist);
  ASSERT_TRUE(config.ok()) << config.status().message();
  ASSERT_EQ(config->feed.size(), 1u);
  EXPECT_EQ(config->feed[0].id.node_name, "x");
  EXPECT_EQ(config->feed[0].shape, (std::vector<int64_t>{1, 784}));
  EXPECT_EQ(config->feed[0].name, "x");
  EXPECT_EQ(config->feed[0].type, graph::DT_INVALID);
  ASSERT_EQ(config->fetch.size(), 1u);
  EXPECT_EQ(config->fetch[0].name, "probs");
  ASSERT_EQ(config->variable.size(), 1u);
  EXPECT_TRUE(config->variable[0].readonly);
  EXPECT_EQ(config->variable[0].type, graph::DT_FLOAT);
  EXPECT_EQ(config->variable[0].shape, (std::vector<int64_t>{784, 10}));
}

// The binary form: the same message by field numbers (feed=1, fetch=2; TensorId node_name=1).
TEST(Tf2XlaConfigTest, ReadsBinary) {
  // fetch { id { node_name: "y" output_index: 1 } name: "out" }
  std::string id = std::string("\x0a\x01y\x10\x01", 5);
  std::string fetch = "\x0a" + std::string(1, static_cast<char>(id.size())) + id + "\x12\x03out";
  std::string config = "\x12" + std::string(1, static_cast<char>(fetch.size())) + fetch;
  auto parsed = ParseTf2XlaConfig(config, ConfigFormat::kBinary, "c.pb");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ASSERT_EQ(parsed->fetch.size(), 1u);
  EXPECT_EQ(parsed->fetch[0].id.ToString(), "y:1");
  EXPECT_EQ(parsed->fetch[0].name, "out");
  auto corrupt = ParseTf2XlaConfig(std::string("\x12\x7f", 2), ConfigFormat::kBinary, "c.pb");
  ASSERT_FALSE(corrupt.ok());
  EXPECT_EQ(corrupt.status().message(), "c.pb: not a binary tf2xla.Config: truncated or corrupt");
}

TEST(Tf2XlaConfigTest, SyntaxErrorHasLineAndColumn) {
  auto config = Text("fetch {\n  id { node_nam: \"y\" }\n}\n");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("c.pbtxt:2:"), std::string::npos) << config.status().message();
  EXPECT_NE(config.status().message().find("tensorflow.tf2xla.TensorId"), std::string::npos)
      << config.status().message();
}

TEST(Tf2XlaConfigTest, SemanticErrorsPointAtTheField) {
  auto unknown_dim = Text("feed { id { node_name: \"x\" }\n shape { dim { size: -1 } } }\nfetch { id { node_name: \"y\" } }");
  ASSERT_FALSE(unknown_dim.ok());
  EXPECT_EQ(unknown_dim.status().message().rfind("c.pbtxt:2:2: feed 'x': shape dimension 0 is -1", 0), 0u)
      << unknown_dim.status().message();

  auto no_fetch = Text("feed { id { node_name: \"x\" } shape {} }");
  ASSERT_FALSE(no_fetch.ok());
  EXPECT_NE(no_fetch.status().message().find("no fetch"), std::string::npos);

  auto bad_name = Text("fetch { id { node_name: \"y\" }\n  name: \"my-out\" }");
  ASSERT_FALSE(bad_name.ok());
  EXPECT_EQ(bad_name.status().message().rfind("c.pbtxt:2:3: fetch 'y': name 'my-out' is not a C++ identifier", 0), 0u)
      << bad_name.status().message();

  auto twice = Text("fetch { id { node_name: \"y\" } name: \"a\" }\nfetch { id { node_name: \"z\" } name: \"a\" }");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("given twice (first at c.pbtxt:1:"), std::string::npos)
      << twice.status().message();

  auto resource = Text("feed { id { node_name: \"v\" } shape {} type: DT_RESOURCE }\nfetch { id { node_name: \"y\" } }");
  ASSERT_FALSE(resource.ok());
  EXPECT_NE(resource.status().message().find("feed 'v' is a resource"), std::string::npos)
      << resource.status().message();

  auto unnamed = Text("fetch { id { node_name: \"y\" } }\nvariable { node_name: \"dense/kernel\" }");
  ASSERT_FALSE(unnamed.ok());
  EXPECT_NE(unnamed.status().message().find("c.pbtxt:2:"), std::string::npos) << unnamed.status().message();
  EXPECT_NE(unnamed.status().message().find("give it a name"), std::string::npos);

  auto colon = Text("fetch { id { node_name: \"y:0\" } }");
  ASSERT_FALSE(colon.ok());
  EXPECT_NE(colon.status().message().find("has a ':'"), std::string::npos);

  auto fed_twice = Text("feed { id { node_name: \"x\" } shape {} }\nfeed { id { node_name: \"x\" } shape {} }\nfetch { id { node_name: \"y\" } }");
  ASSERT_FALSE(fed_twice.ok());
  EXPECT_NE(fed_twice.status().message().find("c.pbtxt:2:"), std::string::npos) << fed_twice.status().message();
}

TEST(Tf2XlaConfigTest, ErrorsAreOneLine) {
  auto config = Text("fetch { id { node_name: \"a\\nb\" } }");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message().find('\n'), std::string::npos) << config.status().message();
}

TEST(Tf2XlaConfigTest, Identifiers) {
  EXPECT_TRUE(IsValidCppIdentifier("x_1"));
  EXPECT_FALSE(IsValidCppIdentifier("1x"));
  EXPECT_FALSE(IsValidCppIdentifier("class"));
  EXPECT_FALSE(IsValidCppIdentifier("a__b"));
  EXPECT_FALSE(IsValidCppIdentifier(""));
}

}  // namespace
}  // namespace xlens::aot
