// A unified diff of two texts, line by line (the longest common subsequence), as `diff -u` writes
// it: what a pass changed in a module, for a bug report.
#pragma once

#include <string>
#include <string_view>

namespace xlens::tools {

// "--- a_name\n+++ b_name\n@@ -l,n +l,n @@\n ..." with `context` unchanged lines around each
// change; empty when the texts are equal. Texts of more than ~20,000 lines each are compared in
// a cheaper way (common leading and trailing lines only), still a correct diff.
std::string UnifiedDiff(std::string_view a, std::string_view b, std::string_view a_name,
                        std::string_view b_name, int context = 3);

}  // namespace xlens::tools
