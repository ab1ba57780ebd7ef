#include "dump/dump_regex.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "compiler/support/terminal_text.h"

namespace xlens {
namespace {

using ::testing::HasSubstr;

DumpRegex CompileOrDie(std::string_view pattern) {
  StatusOr<DumpRegex> regex = DumpRegex::Compile(pattern);
  EXPECT_TRUE(regex.ok()) << regex.status().message();
  return regex.ok() ? *regex : *DumpRegex::Compile("");
}

std::string ErrorOf(std::string_view pattern) {
  StatusOr<DumpRegex> regex = DumpRegex::Compile(pattern);
  EXPECT_FALSE(regex.ok()) << "expected RE2 to refuse the pattern";
  return regex.ok() ? "" : regex.status().message();
}

// Seconds `match` takes; the hostile cases below must stay far under a second.
template <typename F>
double SecondsFor(F match) {
  auto start = std::chrono::steady_clock::now();
  match();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(DumpRegexTest, PartialMatchAsXla) {
  DumpRegex simplifier = CompileOrDie("simplif");
  EXPECT_TRUE(simplifier.PartialMatch("algebraic-simplifier"));
  EXPECT_FALSE(simplifier.PartialMatch("cse"));
  DumpRegex anchored = CompileOrDie("^cluster");
  EXPECT_TRUE(anchored.PartialMatch("cluster_0__XlaCompiledKernel_true__.12"));
  EXPECT_FALSE(anchored.PartialMatch("main.cluster"));
  EXPECT_TRUE(CompileOrDie(".*").PartialMatch(""));
  EXPECT_TRUE(CompileOrDie("").PartialMatch("anything"));
  // RE2 syntax, which std::regex's ECMAScript grammar does not take.
  EXPECT_TRUE(CompileOrDie("(?P<pass>fusion)|\\pL+-inliner").PartialMatch("call-inliner"));
  // Copies share one compiled program and match alike.
  DumpRegex copy = simplifier;
  EXPECT_TRUE(copy.PartialMatch("simplify"));
}

TEST(DumpRegexTest, BadPatternsGiveRe2sReasonOnOneLine) {
  EXPECT_EQ(ErrorOf("("), "missing )");
  EXPECT_THAT(ErrorOf("a**"), HasSubstr("bad repetition operator: **"));
  // A backreference is not RE2 syntax (it is what makes backtracking matchers exponential).
  EXPECT_THAT(ErrorOf("(a)\\1"), HasSubstr("invalid escape sequence"));
  // The offending part of a long pattern is cut, and control characters escaped.
  std::string message = ErrorOf("x{2,1}" + std::string(5000, '\x1b'));
  EXPECT_LT(message.size(), 200u) << message;
  EXPECT_EQ(EscapeForTerminal(message), message);
}

TEST(DumpRegexTest, PatternsPastTheMemoryCapAreRefused) {
  // A counted repetition copies its operand; \pL (every letter of Unicode) is a large program,
  // so a thousand copies pass the cap. RE2 refuses it when compiling, not while matching.
  EXPECT_EQ(ErrorOf("\\pL{1000}"), "pattern too large - compile failed");
  EXPECT_TRUE(DumpRegex::Compile("\\pL{10}").ok());
}

// std::regex overflowed the stack or backtracked without end on every case here.
TEST(DumpRegexTest, HostilePatternsAndNamesMatchInLinearTime) {
  std::string nested = std::string(20000, '(') + "a" + std::string(20000, ')');
  StatusOr<DumpRegex> deep = DumpRegex::Compile(nested);
  if (deep.ok()) {
    EXPECT_TRUE(deep->PartialMatch("xa"));
  } else {
    EXPECT_LT(deep.status().message().size(), 200u) << deep.status().message();
  }

  const std::string long_name(50000, 'm');
  DumpRegex tail = CompileOrDie("m+$");
  EXPECT_LT(SecondsFor([&] { EXPECT_TRUE(tail.PartialMatch(long_name)); }), 1.0);

  DumpRegex stars = CompileOrDie("(.*)*x");
  EXPECT_LT(SecondsFor([&] { EXPECT_FALSE(stars.PartialMatch(long_name)); }), 1.0);

  DumpRegex nested_plus = CompileOrDie("(a+)+c");
  EXPECT_LT(SecondsFor([&] { EXPECT_FALSE(nested_plus.PartialMatch(std::string(40, 'a') + "b")); }),
            1.0);
}

}  // namespace
}  // namespace xlens
