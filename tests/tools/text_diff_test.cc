#include "compiler/tools/text_diff.h"

#include <gtest/gtest.h>

namespace xlens::tools {
namespace {

TEST(TextDiffTest, EqualTextsHaveNoDiff) { EXPECT_EQ(UnifiedDiff("a\nb\n", "a\nb\n", "x", "y"), ""); }

TEST(TextDiffTest, WritesDiffUnifiedFormat) {
  // The same hunk `diff -u` writes for these two files.
  const std::string a = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
  const std::string b = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
  EXPECT_EQ(UnifiedDiff(a, b, "a", "b"),
            "--- a\n+++ b\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n");
}

TEST(TextDiffTest, DistantChangesAreSeparateHunks) {
  std::string a, b;
  for (int i = 0; i < 30; ++i) {
    a += std::to_string(i) + "\n";
    b += (i == 2 || i == 25 ? "x" : std::to_string(i)) + "\n";
  }
  const std::string diff = UnifiedDiff(a, b, "a", "b");
  EXPECT_NE(diff.find("@@ -1,6 +1,6 @@"), std::string::npos) << diff;
  EXPECT_NE(diff.find("@@ -23,7 +23,7 @@"), std::string::npos) << diff;
}

TEST(TextDiffTest, InsertionsAndRemovals) {
  EXPECT_EQ(UnifiedDiff("a\nc\n", "a\nb\nc\n", "x", "y"), "--- x\n+++ y\n@@ -1,2 +1,3 @@\n a\n+b\n c\n");
  EXPECT_EQ(UnifiedDiff("a\nb\n", "", "x", "y"), "--- x\n+++ y\n@@ -1,2 +0,0 @@\n-a\n-b\n");
}

}  // namespace
}  // namespace xlens::tools
