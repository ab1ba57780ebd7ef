#include "compiler/graph/saved_model.h"

#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/graph/session.h"
#include "compiler/support/file_io.h"
#include "compiler/support/temporary_directory.h"

namespace xlens::graph {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kSmall = std::string(XLENS_TESTDATA_DIR) + "/saved_model/small";
const std::string kSliced = std::string(XLENS_TESTDATA_DIR) + "/saved_model/sliced";

TEST(SavedModelTest, ReadsTheSignatureAndTheVariablesItCaptures) {
  ASSERT_TRUE(IsSavedModelDirectory(kSmall));
  EXPECT_FALSE(IsSavedModelDirectory(XLENS_TESTDATA_DIR));
  auto model = ReadSavedModel(kSmall);
  ASSERT_TRUE(model.ok()) << model.status().message();
  EXPECT_THAT(model->tags, ElementsAre("serve"));
  EXPECT_EQ(model->signature.key, "serving_default");
  ASSERT_EQ(model->signature.inputs.size(), 1u);
  EXPECT_EQ(model->signature.inputs[0].key, "x");
  EXPECT_EQ(model->signature.inputs[0].tensor, "serving_default_x:0");
  EXPECT_EQ(model->signature.inputs[0].shape.ToString(), "[?,2]");
  ASSERT_EQ(model->signature.outputs.size(), 2u);
  EXPECT_EQ(model->signature.outputs[0].key, "s");
  EXPECT_EQ(model->signature.outputs[1].key, "y");
  EXPECT_EQ(model->init_op, "NoOp");  // __saved_model_init_op: nothing to initialise here
  // Only what the signature needs: not the save and restore calls and their file ops.
  for (const NodeDef& n : model->graph.node) {
    EXPECT_NE(n.name, "saver_filename");
    EXPECT_NE(n.name, "StatefulPartitionedCall_2");
  }
  for (const FunctionDef& f : model->graph.library.function) {
    EXPECT_THAT(f.signature.name, ::testing::Not(HasSubstr("traced_restore")));
  }
  std::vector<std::string> vars;
  for (const SavedModelVariable& v : model->variables) {
    vars.push_back(v.shared_name);
    EXPECT_GE(v.object_id, 1) << v.node;
  }
  std::sort(vars.begin(), vars.end());
  EXPECT_THAT(vars, ElementsAre("b", "d", "i", "w"));
}

TEST(SavedModelTest, RunsTheSignatureWithTheCheckpointsValues) {
  auto model = ReadSavedModel(kSmall);
  ASSERT_TRUE(model.ok()) << model.status().message();
  auto session = Session::Create(model->graph);
  ASSERT_TRUE(session.ok()) << session.status().message();
  ASSERT_TRUE(LoadSavedModelVariables(*model, (*session)->resources()).ok());
  for (const SavedModelVariable& v : model->variables) {
    EXPECT_EQ(v.checkpoint_key, v.shared_name + "/.ATTRIBUTES/VARIABLE_VALUE");
  }
  Tensor x(DT_FLOAT, {1, 2});
  x.flat<float>()[0] = 1;
  x.flat<float>()[1] = 2;
  auto out = (*session)->Run({{"serving_default_x:0", x}},
                             {model->signature.outputs[0].tensor, model->signature.outputs[1].tensor}, {});
  ASSERT_TRUE(out.ok()) << out.status().message();
  // s = sum([[1,2],[3,4]]) * 2.25; y = [1,2] @ arange(6).reshape(2,3)/7 + [1.5,-2,3].
  EXPECT_DOUBLE_EQ((*out)[0].flat<double>()[0], 22.5);
  EXPECT_NEAR((*out)[1].flat<float>()[0], (0 + 2 * 3) / 7.0 + 1.5, 1e-6);
  EXPECT_NEAR((*out)[1].flat<float>()[2], (2 + 2 * 5) / 7.0 + 3, 1e-6);
}

TEST(SavedModelTest, ReadsAVariableSavedInSlices) {
  auto model = ReadSavedModel(kSliced);
  ASSERT_TRUE(model.ok()) << model.status().message();
  ResourceMgr resources;
  ASSERT_TRUE(LoadSavedModelVariables(*model, resources).ok());
  ASSERT_EQ(model->variables.size(), 1u);
  auto var = resources.Lookup(model->variables[0].container, model->variables[0].shared_name);
  ASSERT_NE(var, nullptr);
  ASSERT_TRUE(var->is_initialized());
  EXPECT_EQ(var->value.dims(), (std::vector<int64_t>{6, 5}));
  EXPECT_EQ(var->value.flat<float>()[29], 29.0f);
}

TEST(SavedModelTest, ErrorsNameTheFile) {
  auto signature = ReadSavedModel(kSmall, {"nope"});
  ASSERT_FALSE(signature.ok());
  EXPECT_THAT(signature.status().message(),
              AllOf(StartsWith(kSmall + "/saved_model.pb: no signature 'nope'"), HasSubstr("serving_default")));
  auto missing = ReadSavedModel(XLENS_TESTDATA_DIR);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("saved_model.pb: no such file"));
  auto junk = ParseSavedModel("\x0a\xff\xff\xff\x7f", "m");
  ASSERT_FALSE(junk.ok());
  EXPECT_THAT(junk.status().message(), StartsWith("m/saved_model.pb: not a binary SavedModel"));

  // A model whose checkpoint is gone: the index is named when the variables are read.
  auto dir = TemporaryDirectory::Create("xlens-saved-model");
  ASSERT_TRUE(dir.ok());
  const std::string copy = dir->path() + "/m";
  std::filesystem::copy(kSmall, copy, std::filesystem::copy_options::recursive);
  std::filesystem::remove(copy + "/variables/variables.data-00000-of-00001");
  auto model = ReadSavedModel(copy);
  ASSERT_TRUE(model.ok());
  ResourceMgr resources;
  Status s = LoadSavedModelVariables(*model, resources);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), AllOf(HasSubstr("variables.data-00000-of-00001: no such file"),
                                 HasSubstr("shard 0 of the 1")));
}

}  // namespace
}  // namespace xlens::graph
