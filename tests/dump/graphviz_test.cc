#include "dump/graphviz.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "compiler/hlo/dot_printer.h"
#include "compiler/hlo/parser.h"
#include "dump/html_page.h"

namespace xlens {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

bool HaveDot() { return std::system("dot -V >/dev/null 2>&1") == 0; }

TEST(GraphvizTest, RendersSvgWithoutTheXmlProlog) {
  if (!HaveDot()) GTEST_SKIP() << "Graphviz's dot is not installed";
  StatusOr<std::string> svg = RenderDotToSvg("digraph g { a -> b; }");
  ASSERT_TRUE(svg.ok()) << svg.status().message();
  EXPECT_THAT(*svg, StartsWith("<svg"));
  EXPECT_THAT(*svg, HasSubstr("</svg>"));
}

TEST(GraphvizTest, BrokenDotQuotesGraphvizsError) {
  if (!HaveDot()) GTEST_SKIP() << "Graphviz's dot is not installed";
  StatusOr<std::string> svg = RenderDotToSvg("digraph g { a -> ");
  ASSERT_FALSE(svg.ok());
  EXPECT_THAT(svg.status().message(), HasSubstr("Graphviz 'dot' failed: "));
  EXPECT_THAT(svg.status().message(), HasSubstr("syntax error"));
}

TEST(GraphvizTest, MissingProgramIsAnErrorNotACrash) {
  StatusOr<std::string> svg = RenderDotToSvg("digraph g {}", "/nonexistent/bin/dot");
  ASSERT_FALSE(svg.ok());
  EXPECT_THAT(svg.status().message(), HasSubstr("cannot run Graphviz '/nonexistent/bin/dot'"));
}

TEST(GraphvizTest, ARunawayProgramIsStopped) {
  // A stand-in for a dot that never finishes on a huge graph.
  std::string script = (std::filesystem::temp_directory_path() /
                        ("xlens_slow_dot_" + std::to_string(::getpid()) + ".sh"))
                           .string();
  {
    std::ofstream out(script);
    out << "#!/bin/sh\nexec sleep 30\n";
  }
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  auto start = std::chrono::steady_clock::now();
  StatusOr<std::string> svg = RenderDotToSvg("digraph g {}", script, /*timeout_ms=*/100);
  auto elapsed = std::chrono::steady_clock::now() - start;
  std::filesystem::remove(script);
  ASSERT_FALSE(svg.ok());
  EXPECT_THAT(svg.status().message(), HasSubstr("ran longer than 100 ms"));
  EXPECT_LT(elapsed, std::chrono::seconds(10));
}

// DOT goes to dot on a pipe and SVG comes back on one: a TMPDIR that does not exist (which makes
// std::filesystem::temp_directory_path throw) changes nothing.
TEST(GraphvizTest, RendersWithoutATemporaryDirectory) {
  if (!HaveDot()) GTEST_SKIP() << "Graphviz's dot is not installed";
  const char* old = std::getenv("TMPDIR");
  std::string saved = old ? old : "";
  ::setenv("TMPDIR", "/nonexistent/xlens-no-tmp", 1);
  StatusOr<std::string> svg = RenderDotToSvg("digraph g { a -> b; }");
  if (old) {
    ::setenv("TMPDIR", saved.c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
  ASSERT_TRUE(svg.ok()) << svg.status().message();
  EXPECT_THAT(*svg, HasSubstr("</svg>"));
}

TEST(GraphvizTest, ALargeGraphGoesThroughThePipesWithoutDeadlock) {
  if (!HaveDot()) GTEST_SKIP() << "Graphviz's dot is not installed";
  // More than a pipe buffer each way.
  std::string dot = "digraph g {\n";
  for (int i = 0; i < 3000; ++i) dot += "  n" + std::to_string(i) + " -> n" + std::to_string(i + 1) + ";\n";
  dot += "}\n";
  StatusOr<std::string> svg = RenderDotToSvg(dot);
  ASSERT_TRUE(svg.ok()) << svg.status().message();
  EXPECT_THAT(*svg, HasSubstr("n2999"));
}

TEST(GraphvizTest, AProgramThatExitsWithoutReadingIsAnErrorNotSigpipe) {
  StatusOr<std::string> svg = RenderDotToSvg(std::string(1 << 20, 'x'), "false");
  ASSERT_FALSE(svg.ok());
  EXPECT_THAT(svg.status().message(), HasSubstr("Graphviz 'false' failed"));
}

// A 100,000-character instruction name (HLO allows it) must still give DOT that Graphviz draws,
// with a label cut to a readable length and node ids that stay short.
TEST(GraphvizTest, AHugeInstructionNameGivesDotThatGraphvizDraws) {
  const std::string name(100000, 'n');
  const std::string text = "HloModule m\n\nENTRY %e (p: f32[4]) -> f32[4] {\n"
                           "  %p = f32[4]{0} parameter(0)\n"
                           "  ROOT %" + name + " = f32[4]{0} negate(f32[4]{0} %p)\n}\n";
  auto module = ParseHloModule(text);
  ASSERT_TRUE(module.ok()) << module.status().message().substr(0, 200);
  StatusOr<std::string> dot = ModuleToDot(**module);
  ASSERT_TRUE(dot.ok()) << dot.status().message().substr(0, 200);
  // The label shows a prefix with an ellipsis; the full name is nowhere near a label's size.
  EXPECT_THAT(*dot, HasSubstr("\xe2\x80\xa6"));
  EXPECT_LT(dot->size(), 20000u) << "the name went into the DOT whole";
  for (size_t at = dot->find("\n  i"); at != std::string::npos; at = dot->find("\n  i", at + 1)) {
    size_t space = dot->find(' ', at + 3);
    EXPECT_LT(space - at, 16u) << "a long node id";
  }
  if (!HaveDot()) GTEST_SKIP() << "Graphviz's dot is not installed";
  StatusOr<std::string> svg = RenderDotToSvg(*dot);
  ASSERT_TRUE(svg.ok()) << svg.status().message().substr(0, 400);
  EXPECT_THAT(*svg, HasSubstr("</svg>"));
}

TEST(HtmlPageTest, EscapesTextAndFallsBackToDotSource) {
  EXPECT_EQ(HtmlEscape("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&#39;");
  std::string page =
      HloHtmlPage("m <1>", "%x = f32[] parameter(0) <&>", "digraph { \"a\" -> \"b\" }",
                  StatusOr<std::string>(Error("no dot")));
  EXPECT_THAT(page, HasSubstr("<title>m &lt;1&gt;</title>"));
  EXPECT_THAT(page, HasSubstr("parameter(0) &lt;&amp;&gt;"));
  EXPECT_THAT(page, HasSubstr("could not be drawn (no dot)"));
  EXPECT_THAT(page, HasSubstr("digraph { &quot;a&quot; -&gt; &quot;b&quot; }"));
  std::string drawn = HloHtmlPage("m", "hlo", "digraph {}", StatusOr<std::string>("<svg></svg>"));
  EXPECT_THAT(drawn, HasSubstr("<div class=\"graph\">\n<svg></svg>"));
  EXPECT_THAT(drawn, Not(HasSubstr("could not be drawn")));
}

}  // namespace
}  // namespace xlens
