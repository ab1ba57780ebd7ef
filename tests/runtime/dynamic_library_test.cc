// Libraries opened at run time (compiler/runtime/dynamic_library.h): the first candidate that
// opens is taken; none is one line naming what was tried and what to install; a table of entry
// points resolves, and an absent one is named (and the library closed). libm stands in for the
// CUDA libraries, which a machine without a GPU lacks.
#include "compiler/runtime/dynamic_library.h"

#include <cstdlib>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace xlens::runtime {
namespace {

using ::testing::HasSubstr;

TEST(DynamicLibraryTest, TheFirstCandidateThatOpensIsTaken) {
  auto library = OpenFirstLibrary({"/nonexistent/libm.so.6", "libm.so.6", "libc.so.6"}, "libm");
  ASSERT_TRUE(library.ok()) << library.status().message();
  EXPECT_EQ(library->path, "libm.so.6");
  EXPECT_NE(library->handle, nullptr);
}

TEST(DynamicLibraryTest, NoneIsOneLineNamingWhatWasTriedAndWhatToInstall) {
  auto library = OpenFirstLibrary({"/nonexistent/liba.so.1", "libabsent-b.so.1"}, "thing",
                                  "install libthing1");
  ASSERT_FALSE(library.ok());
  const std::string message = library.status().message();
  EXPECT_THAT(message, HasSubstr("no thing found (tried /nonexistent/liba.so.1, libabsent-b.so.1; last: "));
  EXPECT_THAT(message, HasSubstr("libabsent-b.so.1"));
  EXPECT_THAT(message, ::testing::EndsWith("): install libthing1"));
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  // One candidate: dlerror names it already.
  const std::string one = OpenFirstLibrary({"libabsent-c.so.1"}, "CUDA driver").status().message();
  EXPECT_THAT(one, ::testing::StartsWith("no CUDA driver found (libabsent-c.so.1"));
  EXPECT_EQ(one.find("tried"), std::string::npos) << one;
}

TEST(DynamicLibraryTest, EntryPointsResolveAndAnAbsentOneIsNamed) {
  auto library = OpenFirstLibrary({"libm.so.6"}, "libm");
  ASSERT_TRUE(library.ok()) << library.status().message();
  double (*cosine)(double) = nullptr;
  double (*square_root)(double) = nullptr;
  ASSERT_TRUE(ResolveSymbols(*library, {{cosine, "cos"}, {square_root, "sqrt"}}).ok());
  ASSERT_NE(cosine, nullptr);
  EXPECT_EQ(cosine(0.0), 1.0);
  EXPECT_EQ(square_root(16.0), 4.0);

  double (*absent)(double) = nullptr;
  Status missing = ResolveSymbols(*library, {{cosine, "cos"}, {absent, "xlensAbsentEntryPoint"}},
                                  "it came with libm 9");
  EXPECT_EQ(missing.message(), "libm.so.6 lacks xlensAbsentEntryPoint (it came with libm 9)");
  EXPECT_EQ(absent, nullptr);
  EXPECT_EQ(library->handle, nullptr);  // closed
}

TEST(DynamicLibraryTest, CudaCandidatesGoFromTheHomesToTheLoadersPath) {
  ::setenv("XLENS_TEST_LIB_HOME", "/opt/thing", 1);
  ::setenv("CUDA_HOME", "/opt/cuda", 1);
  std::vector<std::string> names = CudaLibraryCandidates({"liba.so.2", "liba.so"}, "XLENS_TEST_LIB_HOME");
  EXPECT_EQ(names, (std::vector<std::string>{"/opt/thing/lib/liba.so.2", "/opt/thing/lib/liba.so",
                                             "/opt/cuda/lib64/liba.so.2", "/opt/cuda/lib64/liba.so",
                                             "/usr/local/cuda/lib64/liba.so.2", "/usr/local/cuda/lib64/liba.so",
                                             "liba.so.2", "liba.so"}));
  ::unsetenv("XLENS_TEST_LIB_HOME");
  ::unsetenv("CUDA_HOME");
  EXPECT_EQ(CudaLibraryCandidates({"libb.so"}),
            (std::vector<std::string>{"/usr/local/cuda/lib64/libb.so", "libb.so"}));
}

}  // namespace
}  // namespace xlens::runtime
