#include "compiler/aot/header_writer.h"

#include <gtest/gtest.h>

#include <string>

#include "compiler/support/file_io.h"
#include "compiler/support/subprocess.h"
#include "compiler/support/temporary_directory.h"

namespace xlens::aot {
namespace {

HeaderSpec Mnist() {
  HeaderSpec spec;
  spec.cpp_class = "mnist::aot::Classifier";
  spec.entry_point = "mnist_entry";
  spec.args.push_back({"x", "f32", {1, 784}, 784 * 4});
  spec.results.push_back({"probs", "f32", {1, 10}, 40});
  spec.variables.push_back({"step", "s32", {}, 4});
  spec.variable_update_result = {1};
  spec.temp_bytes = 128;
  spec.weights_bytes = 31400;
  return spec;
}

TEST(HeaderWriterTest, NamesAsTfcompile) {
  auto header = WriteHeader(Mnist());
  ASSERT_TRUE(header.ok()) << header.status().message();
  for (const char* expected :
       {"namespace mnist {", "namespace aot {", "class Classifier final",
        "void set_arg0_data(const void* data)", "float* arg0_data()", "float* arg_x_data()",
        "float& arg_x(std::size_t dim0, std::size_t dim1)", "int arg0_size() const { return 3136; }",
        "int arg0_count() const { return 784; }", "float* result0_data()",
        "float* result_probs_data()", "std::int32_t* var_step_data()",
        "void set_var_step_data(std::int32_t* data)", "static constexpr std::size_t kNumArgs = 2;",
        "static constexpr std::size_t kNumResults = 2;", "static constexpr std::size_t kNumVariables = 1;",
        "static constexpr std::int32_t kArg0Shapes[] = {1, 784};",
        "static constexpr std::int32_t kArg1Shapes[] = {-1};", "int LookupVariableIndex(",
        "extern \"C\" void mnist_entry(const void* const* args, void* const* results, void* temp);",
        "RESULTS_PROFILES_AND_TEMPS_ONLY", "bool Run()", "const std::string& error_msg() const",
        "void set_thread_pool(const Pool*)"}) {
    EXPECT_NE(header->find(expected), std::string::npos) << expected;
  }
  EXPECT_EQ(header->find("#include \"compiler/"), std::string::npos);

  // A readonly variable's accessors are const, as tfcompile's.
  HeaderSpec readonly = Mnist();
  readonly.variable_update_result = {-1};
  readonly.variable_readonly = {true};
  auto const_header = WriteHeader(readonly);
  ASSERT_TRUE(const_header.ok()) << const_header.status().message();
  EXPECT_NE(const_header->find("void set_var_step_data(const std::int32_t* data)"), std::string::npos);
  EXPECT_NE(const_header->find("const std::int32_t* var_step_data()"), std::string::npos);
  EXPECT_NE(const_header->find("static constexpr std::size_t kNumResults = 1;"), std::string::npos);
}

// The header compiles with the standard library alone, and a program written for tfcompile's
// interface runs against an entry function of its own: the base class copies a variable's
// update back and the accessors index row-major.
TEST(HeaderWriterTest, CompilesAndRunsWithTheStandardLibraryAlone) {
  if (auto gxx = RunCommand({"g++", "--version"}, 30); !gxx.ok() || gxx->exit_code != 0) {
    GTEST_SKIP() << "no g++";
  }
  auto header = WriteHeader(Mnist());
  ASSERT_TRUE(header.ok()) << header.status().message();
  auto dir = TemporaryDirectory::Create("header_writer_test");
  ASSERT_TRUE(dir.ok()) << dir.status().message();
  const std::string root = dir->path();
  ASSERT_TRUE(WriteFile(root + "/model.h", *header).ok());
  // Twice in one translation unit: the base class is guarded.
  const std::string program = R"(#include "model.h"
#include "model.h"
#include <cstdio>
extern "C" void mnist_entry(const void* const* args, void* const* results, void* temp) {
  const float* x = static_cast<const float*>(args[0]);
  float* p = static_cast<float*>(results[0]);
  for (int i = 0; i < 10; ++i) p[i] = x[i] * 2;
  *static_cast<int*>(results[1]) = *static_cast<const int*>(args[1]) + 1;
  static_cast<char*>(temp)[127] = 1;
}
int main() {
  mnist::aot::Classifier f;
  for (int i = 0; i < f.arg0_count(); ++i) f.arg_x_data()[i] = i;
  *f.var_step_data() = 41;
  if (!f.Run()) return 2;
  if (f.result_probs(0, 3) != 6.0f || f.result0_data()[9] != 18.0f) return 3;
  if (*f.var_step_data() != 42) return 4;
  if (f.LookupArgIndex("x") != 0 || f.LookupResultIndex("probs") != 0) return 5;
  if (f.LookupVariableIndex("step") != 1 || f.num_args() != 2 || f.num_results() != 2) return 7;
  mnist::aot::Classifier borrowed(mnist::aot::Classifier::AllocMode::RESULTS_PROFILES_AND_TEMPS_ONLY);
  if (borrowed.Run() || borrowed.error_msg().find("set_arg0_data") == std::string::npos) return 6;
  borrowed.set_thread_pool(static_cast<const void*>(nullptr));
  static_assert(mnist::aot::Classifier::kArg0Size == 3136, "size");
  std::puts("ok");
  return 0;
}
)";
  ASSERT_TRUE(WriteFile(root + "/main.cc", program).ok());
  const std::string cmd = "cd " + ShellQuote(root) +
                          " && g++ -std=c++17 -Wall -Wextra -Werror -o main main.cc 2>&1 && ./main";
  auto ran = RunCommand({"sh", "-c", cmd}, 120);
  ASSERT_TRUE(ran.ok()) << ran.status().message();
  EXPECT_TRUE(ran->exit_code == 0 && ran->signal == 0 && !ran->timed_out)
      << ran->Describe(120) << ": " << ran->output;
  EXPECT_EQ(ran->output, "ok\n");
}

TEST(HeaderWriterTest, RefusesBadNames) {
  HeaderSpec spec = Mnist();
  spec.cpp_class = "ns::1Bad";
  EXPECT_FALSE(WriteHeader(spec).ok());
  EXPECT_FALSE(CheckCppClassName("a::::b").ok());
  EXPECT_TRUE(CheckCppClassName("a::b::C").ok());
  EXPECT_FALSE(CheckCppClassName("xlens_aot::CompiledFunction").ok());
  spec = Mnist();
  spec.cpp_class = spec.entry_point = "entry";
  EXPECT_FALSE(WriteHeader(spec).ok());
  spec = Mnist();
  spec.results[0].element_type = "token";
  auto header = WriteHeader(spec);
  ASSERT_FALSE(header.ok());
  EXPECT_NE(header.status().message().find("no C++ type"), std::string::npos);
}

}  // namespace
}  // namespace xlens::aot
