#include "compiler/hlo/dot_printer.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/hlo/parser.h"
#include "compiler/support/file_io.h"
#include "nested_modules.h"
#include "scratch_directory.h"

namespace xlens {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

std::unique_ptr<HloModule> Parse(std::string_view text, bool verify = true) {
  StatusOr<std::unique_ptr<HloModule>> module =
      ParseHloModule(text, ParseOptions{.verify = verify});
  EXPECT_TRUE(module.ok()) << module.status().message();
  return module.ok() ? std::move(module).value() : nullptr;
}

std::string ToDot(const HloModule& module, const DotOptions& options = {}) {
  StatusOr<std::string> dot = ModuleToDot(module, options);
  EXPECT_TRUE(dot.ok()) << dot.status().message();
  return dot.ok() ? *dot : "";
}

bool HaveGraphviz() { return std::system("command -v dot >/dev/null 2>&1") == 0; }

// Renders `dot` with Graphviz and expects a clean run: exit code 0 and nothing on stderr
// (Graphviz reports syntax errors, bad HTML labels and bad UTF-8 there, often still exiting 0).
void ExpectRenders(const std::string& dot, const std::string& name) {
  if (!HaveGraphviz()) {
    GTEST_SKIP() << "Graphviz `dot` is not on PATH: structure checked, rendering skipped";
  }
  const fs::path dir = ::xlens::testing::ScratchDirectory();
  fs::path input = dir / (name + ".dot");
  fs::path svg = dir / (name + ".svg");
  fs::path errors = dir / (name + ".stderr");
  ASSERT_TRUE(WriteFileAtomic(input.string(), dot).ok());
  std::string command = "dot -Tsvg '" + input.string() + "' -o '" + svg.string() + "' 2>'" +
                        errors.string() + "'";
  int rc = std::system(command.c_str());
  EXPECT_EQ(rc, 0) << name << ": " << command;
  StatusOr<std::string> stderr_text = ReadFile(errors.string());
  ASSERT_TRUE(stderr_text.ok()) << stderr_text.status().message();
  EXPECT_EQ(*stderr_text, "") << name;
  EXPECT_GT(fs::file_size(svg), 0u) << name;
}

#define SKIP_WITHOUT_GRAPHVIZ()                                                  \
  if (!HaveGraphviz()) GTEST_SKIP() << "Graphviz `dot` is not on PATH; cannot render"

// Node id ("i7") -> its whole statement line.
std::map<std::string, std::string> Nodes(const std::string& dot) {
  static const std::regex kNode(R"(^\s*(i\d+) \[(.*)\];$)");
  std::map<std::string, std::string> nodes;
  std::istringstream lines(dot);
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (std::regex_match(line, match, kNode)) nodes[match[1]] = line;
  }
  return nodes;
}

// The id of the node labelled with instruction `name` (the label's second line).
std::string NodeId(const std::string& dot, const std::string& name) {
  std::string id;
  for (const auto& [node, line] : Nodes(dot)) {
    if (line.find("</b><br/>" + name + "<br/>") != std::string::npos) {
      EXPECT_EQ(id, "") << name << " has two nodes";
      id = node;
    }
  }
  EXPECT_NE(id, "") << "no node for " << name;
  return id;
}

// The instruction names on the nodes (the second line of each label).
std::multiset<std::string> NodeNames(const std::string& dot) {
  static const std::regex kName(R"(label=<<b>[^<]*</b><br/>([^<]*)<br/>)");
  std::multiset<std::string> names;
  for (const auto& [id, line] : Nodes(dot)) {
    std::smatch match;
    if (std::regex_search(line, match, kName)) names.insert(match[1]);
  }
  return names;
}

// The text of the cluster whose label contains `marker`, from its opening to its closing brace.
std::string Cluster(const std::string& dot, const std::string& marker) {
  size_t label = dot.find(marker);
  if (label == std::string::npos) return "";
  size_t open = dot.rfind("subgraph cluster_", label);
  if (open == std::string::npos) return "";
  int depth = 0;
  for (size_t i = dot.find('{', open); i < dot.size(); ++i) {
    if (dot[i] == '{') ++depth;
    if (dot[i] == '}' && --depth == 0) return dot.substr(open, i + 1 - open);
  }
  return "";
}

std::vector<std::string> EdgesBetween(const std::string& dot, const std::string& from,
                                      const std::string& to) {
  std::vector<std::string> edges;
  std::istringstream lines(dot);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("  " + from + " -> " + to + ";", 0) == 0 ||
        line.rfind("  " + from + " -> " + to + " [", 0) == 0) {
      edges.push_back(line);
    }
  }
  return edges;
}

// The label of the dashed cut edge drawn into (or out of) `node`, or "" when it has none.
std::string Stub(const std::string& dot, const std::string& node, bool into) {
  std::smatch match;
  std::regex edge(into ? "\n  (cut[0-9]+) -> " + node + " \\[style=dashed"
                       : "\n  " + node + " -> (cut[0-9]+) \\[style=dashed");
  if (!std::regex_search(dot, match, edge)) return "";
  std::regex cut_edge("\n  " + match[1].str() + " \\[label=\"([^\"]*)\"");
  if (!std::regex_search(dot, match, cut_edge)) return "";
  return match[1];
}

constexpr std::string_view kFusionModule = R"(
HloModule fusion_test

%fused_computation (p0: f32[4], p1: f32[4]) -> f32[4] {
  %p0 = f32[4]{0} parameter(0)
  %p1 = f32[4]{0} parameter(1)
  %sub = f32[4]{0} subtract(f32[4]{0} %p0, f32[4]{0} %p1)
  ROOT %exp = f32[4]{0} exponential(f32[4]{0} %sub)
}

ENTRY %main (a: f32[4], b: f32[4]) -> f32[4] {
  %a = f32[4]{0} parameter(0)
  %b = f32[4]{0} parameter(1)
  %fusion.1 = f32[4]{0} fusion(f32[4]{0} %a, f32[4]{0} %b), kind=kLoop, calls=%fused_computation
  %c = f32[] constant(1.5)
  %bcast = f32[4]{0} broadcast(f32[] %c), dimensions={}
  ROOT %add = f32[4]{0} add(f32[4]{0} %fusion.1, f32[4]{0} %bcast)
}
)";

TEST(DotPrinterTest, FusionIsAClusterHoldingItsComputation) {
  std::unique_ptr<HloModule> module = Parse(kFusionModule);
  ASSERT_NE(module, nullptr);
  std::string dot = ToDot(*module);

  std::string cluster = Cluster(dot, "<b>fusion</b> kLoop");
  ASSERT_NE(cluster, "") << dot;
  EXPECT_THAT(cluster, HasSubstr("fusion.1"));
  for (const char* fused : {"p0", "p1", "sub", "exp"}) {
    EXPECT_THAT(cluster, HasSubstr(NodeId(dot, fused) + " [")) << fused;
  }
  for (const char* outer : {"a", "b", "add", "bcast", "c"}) {
    EXPECT_THAT(cluster, Not(HasSubstr(NodeId(dot, outer) + " ["))) << outer;
  }
  // The fusion is its cluster, not a node of its own.
  EXPECT_EQ(Nodes(dot).size(), 9u);
  ExpectRenders(dot, "fusion");
}

TEST(DotPrinterTest, OneNodePerInstructionWithOpcodeNameShapeAndKindColor) {
  std::unique_ptr<HloModule> module = Parse(kFusionModule);
  ASSERT_NE(module, nullptr);
  std::string dot = ToDot(*module);
  std::map<std::string, std::string> nodes = Nodes(dot);

  std::string add = nodes[NodeId(dot, "add")];
  EXPECT_THAT(add, HasSubstr("<b>add</b><br/>add<br/><font point-size=\"9\">f32[4]</font>"));
  EXPECT_THAT(add, HasSubstr("class=\"elementwise\""));
  EXPECT_THAT(add, HasSubstr("peripheries=2"));  // the root
  EXPECT_THAT(add, HasSubstr("penwidth=3"));     // the default center
  std::string parameter = nodes[NodeId(dot, "b")];
  EXPECT_THAT(parameter, HasSubstr("<b>parameter 1</b>"));
  EXPECT_THAT(parameter, HasSubstr("class=\"parameter-constant\""));
  std::string constant = nodes[NodeId(dot, "c")];
  EXPECT_THAT(constant, HasSubstr("<br/>1.5"));
  EXPECT_THAT(nodes[NodeId(dot, "bcast")], HasSubstr("class=\"data-movement\""));

  // Every kind has its own fill color.
  std::map<std::string, std::string> fill_of_class;
  static const std::regex kStyle(R"re(fillcolor="([^"]+)", fontcolor="[^"]+", class="([^"]+)")re");
  for (const auto& [id, line] : nodes) {
    std::smatch match;
    ASSERT_TRUE(std::regex_search(line, match, kStyle)) << line;
    fill_of_class[match[2]] = match[1];
  }
  std::set<std::string> fills;
  for (const auto& [kind, fill] : fill_of_class) fills.insert(fill);
  EXPECT_EQ(fills.size(), fill_of_class.size());
  EXPECT_THAT(dot, HasSubstr("legend [shape=none"));
}

TEST(DotPrinterTest, EdgesRunFromOperandToUserNumberedWhereOrderMatters) {
  std::unique_ptr<HloModule> module = Parse(kFusionModule);
  ASSERT_NE(module, nullptr);
  std::string dot = ToDot(*module);
  auto id = [&](const char* name) { return NodeId(dot, name); };

  // Into the fusion: operand i lands on fused parameter i, numbered.
  EXPECT_THAT(EdgesBetween(dot, id("a"), id("p0")),
              ::testing::ElementsAre(HasSubstr("headlabel=\"0\"")));
  EXPECT_THAT(EdgesBetween(dot, id("b"), id("p1")),
              ::testing::ElementsAre(HasSubstr("headlabel=\"1\"")));
  // subtract's operands are not interchangeable, add's are.
  EXPECT_THAT(EdgesBetween(dot, id("p1"), id("sub")),
              ::testing::ElementsAre(HasSubstr("headlabel=\"1\"")));
  // Out of the fusion: from the fused root to the fusion's user.
  EXPECT_THAT(EdgesBetween(dot, id("exp"), id("add")),
              ::testing::ElementsAre(Not(HasSubstr("headlabel"))));
  EXPECT_THAT(EdgesBetween(dot, id("bcast"), id("add")),
              ::testing::ElementsAre(Not(HasSubstr("headlabel"))));
  // A single operand is never numbered.
  EXPECT_THAT(EdgesBetween(dot, id("c"), id("bcast")),
              ::testing::ElementsAre(Not(HasSubstr("headlabel"))));
  EXPECT_THAT(EdgesBetween(dot, id("add"), id("a")), ::testing::IsEmpty());
}

constexpr std::string_view kWhileModule = R"(
HloModule while_test

%add_f32 (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %sum = f32[] add(f32[] %x, f32[] %y)
}

%cond (s: (s32[], f32[4])) -> pred[] {
  %s = (s32[], f32[4]{0}) parameter(0)
  %i = s32[] get-tuple-element((s32[], f32[4]{0}) %s), index=0
  %limit = s32[] constant(10)
  ROOT %lt = pred[] compare(s32[] %i, s32[] %limit), direction=LT
}

%body (s: (s32[], f32[4])) -> (s32[], f32[4]) {
  %s = (s32[], f32[4]{0}) parameter(0)
  %i = s32[] get-tuple-element((s32[], f32[4]{0}) %s), index=0
  %v = f32[4]{0} get-tuple-element((s32[], f32[4]{0}) %s), index=1
  %one = s32[] constant(1)
  %next = s32[] add(s32[] %i, s32[] %one)
  %twice = f32[4]{0} add(f32[4]{0} %v, f32[4]{0} %v)
  ROOT %t = (s32[], f32[4]{0}) tuple(s32[] %next, f32[4]{0} %twice)
}

ENTRY %main (p: f32[4]) -> f32[] {
  %p = f32[4]{0} parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], f32[4]{0}) tuple(s32[] %zero, f32[4]{0} %p)
  %loop = (s32[], f32[4]{0}) while((s32[], f32[4]{0}) %init), condition=%cond, body=%body
  %result = f32[4]{0} get-tuple-element((s32[], f32[4]{0}) %loop), index=1
  %zero_f = f32[] constant(0)
  ROOT %total = f32[] reduce(f32[4]{0} %result, f32[] %zero_f), dimensions={0}, to_apply=%add_f32
}
)";

TEST(DotPrinterTest, WhileBodiesAreClustersAndReducersAreNotes) {
  std::unique_ptr<HloModule> module = Parse(kWhileModule);
  ASSERT_NE(module, nullptr);
  std::string dot = ToDot(*module);

  std::string body = Cluster(dot, "body of loop");
  std::string condition = Cluster(dot, "condition of loop");
  ASSERT_NE(body, "") << dot;
  ASSERT_NE(condition, "") << dot;
  EXPECT_THAT(body, HasSubstr("<b>tuple</b><br/>t<br/>"));
  EXPECT_THAT(condition, HasSubstr("direction=LT"));
  EXPECT_THAT(condition, HasSubstr("<br/>10"));
  // Dashed edges from the callee roots to the while.
  std::string loop = NodeId(dot, "loop");
  EXPECT_THAT(dot, HasSubstr("-> " + loop + " [style=dashed, color=\"#2e7d32\", "
                             "fontcolor=\"#2e7d32\", label=\"body\"]"));
  EXPECT_THAT(dot, HasSubstr("label=\"condition\"]"));
  EXPECT_THAT(Nodes(dot)[loop], HasSubstr("class=\"control-flow\""));

  // The reducer is a note on the reduce, not drawn.
  std::string total = Nodes(dot)[NodeId(dot, "total")];
  EXPECT_THAT(total, HasSubstr("to_apply=add_f32 (add)"));
  EXPECT_THAT(total, HasSubstr("class=\"reduction\""));
  EXPECT_THAT(dot, Not(HasSubstr("<br/>sum<br/>")));
  // Tuple operands are numbered.
  EXPECT_THAT(EdgesBetween(dot, NodeId(dot, "p"), NodeId(dot, "init")),
              ::testing::ElementsAre(HasSubstr("headlabel=\"1\"")));
  ExpectRenders(dot, "while");
}

TEST(DotPrinterTest, ConditionalBranchesAndControlDependencies) {
  std::unique_ptr<HloModule> module = Parse(R"(
HloModule conditional_test

%then (x: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  ROOT %n = f32[] negate(f32[] %x)
}

%else (y: f32[]) -> f32[] {
  ROOT %y = f32[] parameter(0)
}

ENTRY %main (flag: pred[], v: f32[]) -> f32[] {
  %flag = pred[] parameter(0)
  %v = f32[] parameter(1)
  %side = f32[] negate(f32[] %v)
  ROOT %cond = f32[] conditional(pred[] %flag, f32[] %v, f32[] %v), true_computation=%then, false_computation=%else, control-predecessors={%side}
}
)");
  ASSERT_NE(module, nullptr);
  std::string dot = ToDot(*module);
  EXPECT_NE(Cluster(dot, "true of cond"), "") << dot;
  EXPECT_NE(Cluster(dot, "false of cond"), "") << dot;
  EXPECT_THAT(EdgesBetween(dot, NodeId(dot, "side"), NodeId(dot, "cond")),
              ::testing::ElementsAre(HasSubstr("style=dotted")));
  EXPECT_THAT(EdgesBetween(dot, NodeId(dot, "v"), NodeId(dot, "cond")),
              ::testing::ElementsAre(HasSubstr("headlabel=\"1\""), HasSubstr("headlabel=\"2\"")));
  ExpectRenders(dot, "conditional");
}

TEST(DotPrinterTest, EscapesNamesAndMetadata) {
  // Built directly: HLO text cannot spell most of these names.
  HloModule module("mod\"ule\\");
  auto entry = std::make_unique<HloComputation>("entry<&>");
  HloInstruction* p = entry->AddInstruction(
      HloInstruction::CreateParameter(0, Shape(PrimitiveType::F32, {2}), "p\"0<&>\\N"));
  HloInstruction* q = entry->AddInstruction(
      HloInstruction::CreateParameter(1, Shape(PrimitiveType::F32, {2}), "q.1-x%y"));
  HloInstruction* sub = entry->AddInstruction(HloInstruction::CreateBinary(
      HloOpcode::kSubtract, Shape(PrimitiveType::F32, {2}), p, q));
  sub->set_name("bad\xff utf8\x01\ttab");
  sub->metadata.op_name = "jit(f)/\"quoted\"/<b>&amp;\\";
  sub->metadata.op_type = "Sub";
  sub->metadata.source_file = "a \"b\".py";
  sub->metadata.source_line = 7;
  entry->set_root_instruction(sub);
  module.AddComputation(std::move(entry), /*is_entry=*/true);

  std::string dot = ToDot(module);
  EXPECT_THAT(dot, HasSubstr("digraph \"mod\\\"ule\\\\\" {"));
  EXPECT_THAT(dot, HasSubstr("<br/>p&quot;0&lt;&amp;&gt;\\N<br/>"));
  EXPECT_THAT(dot, HasSubstr("q.1-x%y"));
  EXPECT_THAT(dot, HasSubstr("bad\xef\xbf\xbd utf8  tab"));
  EXPECT_THAT(dot, HasSubstr("jit(f)/&quot;quoted&quot;/&lt;b&gt;&amp;amp;\\"));
  EXPECT_THAT(dot, HasSubstr("op_name: jit(f)/\\\"quoted\\\"/<b>&amp;\\\\\\n"));
  EXPECT_THAT(dot, HasSubstr("source: a \\\"b\\\".py:7"));
  EXPECT_THAT(dot, HasSubstr("ENTRY entry&lt;&amp;&gt;"));
  EXPECT_THAT(dot, Not(HasSubstr("\xff")));
  EXPECT_THAT(dot, Not(HasSubstr("\x01")));
  ExpectRenders(dot, "escaping");
}

// A chain x -> n0 -> n1 -> ... -> n{length-1} (the root), each n_i = negate(n_{i-1}) or, every
// third, add(n_{i-1}, x).
std::unique_ptr<HloModule> Chain(int length) {
  std::string text = "HloModule chain\n\nENTRY %main (x: f32[8]) -> f32[8] {\n"
                     "  %x = f32[8]{0} parameter(0)\n";
  std::string previous = "x";
  for (int i = 0; i < length; ++i) {
    std::string name = "n" + std::to_string(i);
    std::string root = i == length - 1 ? "ROOT " : "";
    if (i % 3 == 2) {
      text += "  " + root + "%" + name + " = f32[8]{0} add(f32[8]{0} %" + previous +
              ", f32[8]{0} %x)\n";
    } else {
      text += "  " + root + "%" + name + " = f32[8]{0} negate(f32[8]{0} %" + previous + ")\n";
    }
    previous = name;
  }
  return Parse(text + "}\n");
}

TEST(DotPrinterTest, LargeGraphsShowTheNeighbourhoodOfTheRootAndSayWhatWasCut) {
  std::unique_ptr<HloModule> module = Chain(60);
  ASSERT_NE(module, nullptr);

  DotOptions unlimited;
  unlimited.max_nodes = 0;
  std::string whole = ToDot(*module, unlimited);
  EXPECT_EQ(Nodes(whole).size(), 61u);
  EXPECT_THAT(whole, Not(HasSubstr("not shown")));

  DotOptions small;
  small.max_nodes = 10;
  std::string cut = ToDot(*module, small);
  EXPECT_EQ(Nodes(cut).size(), 10u);
  EXPECT_THAT(cut, HasSubstr("<b>51 instructions not shown</b>"));
  EXPECT_THAT(cut, HasSubstr("showing the 10 nearest to n59 (at most 10)"));
  // Breadth first from the root n59 = add(n58, x) up the chain. x has 21 users: too many to
  // pull in, so it joins as an operand but its other users stay out.
  for (const char* name : {"n59", "n58", "x", "n57", "n56", "n55", "n54", "n53", "n52", "n51"}) {
    NodeId(cut, name);
  }
  // Dashed cut-edge nodes stand for the cut edges: n50 -> n51, and x's users but n53 and n56 and n59.
  EXPECT_EQ(Stub(cut, NodeId(cut, "n51"), /*into=*/true), "1 more operand");
  EXPECT_EQ(Stub(cut, NodeId(cut, "x"), /*into=*/false), "18 more users");
  EXPECT_EQ(Stub(cut, NodeId(cut, "n59"), /*into=*/true), "");
  ExpectRenders(cut, "chain_cut");
}

TEST(DotPrinterTest, CenterAndRadiusSelectANeighbourhood) {
  std::unique_ptr<HloModule> module = Chain(60);
  ASSERT_NE(module, nullptr);
  std::string dot = ToDot(*module, DotOptions{.center = "n30", .radius = 2});
  std::map<std::string, std::string> nodes = Nodes(dot);
  // n28..n32 along the chain; n29 and n32 are adds whose operand x is one edge away.
  EXPECT_EQ(nodes.size(), 6u) << dot;
  for (const char* name : {"n28", "n29", "n30", "n31", "n32", "x"}) NodeId(dot, name);
  EXPECT_THAT(nodes[NodeId(dot, "n30")], HasSubstr("penwidth=3"));
  EXPECT_THAT(dot, HasSubstr("<b>55 instructions not shown</b>"));
  EXPECT_THAT(dot, HasSubstr("showing the 6 within 2 edges of n30<"));
  ExpectRenders(dot, "chain_radius");

  // A radius that covers everything cuts nothing.
  std::string all = ToDot(*module, DotOptions{.center = "x", .radius = 100, .max_nodes = 0});
  EXPECT_EQ(Nodes(all).size(), 61u);
  EXPECT_THAT(all, Not(HasSubstr("not shown")));

  StatusOr<std::string> missing = ModuleToDot(*module, DotOptions{.center = "nope"});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("no instruction named 'nope'"));
}

TEST(DotPrinterTest, CenterOnAFusionStartsAtItsRootAndReducersCannotBeCenters) {
  std::unique_ptr<HloModule> fusion = Parse(kFusionModule);
  ASSERT_NE(fusion, nullptr);
  std::string dot = ToDot(*fusion, DotOptions{.center = "fusion.1", .radius = 0});
  EXPECT_EQ(Nodes(dot).size(), 1u);
  EXPECT_THAT(Nodes(dot)[NodeId(dot, "exp")], HasSubstr("penwidth=3"));
  EXPECT_NE(Cluster(dot, "<b>fusion</b> kLoop"), "");
  ExpectRenders(dot, "fusion_center");

  std::unique_ptr<HloModule> loop = Parse(kWhileModule);
  ASSERT_NE(loop, nullptr);
  StatusOr<std::string> reducer = ModuleToDot(*loop, DotOptions{.center = "sum"});
  ASSERT_FALSE(reducer.ok());
  EXPECT_THAT(reducer.status().message(), HasSubstr("add_f32"));
}

std::vector<fs::path> HloFiles(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".hlo") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Opcodes whose called computations are drawn as clusters (the rest are notes on the node).
const std::set<HloOpcode> kCallsClusters = {
    HloOpcode::kWhile,      HloOpcode::kConditional, HloOpcode::kCall,       HloOpcode::kCustomCall,
    HloOpcode::kAsyncStart, HloOpcode::kAsyncUpdate, HloOpcode::kAsyncDone, HloOpcode::kFusion};

const fs::path kCorpus = fs::path(XLENS_SHARED_DIR) / "corpus/hlo";

TEST(DotPrinterTest, RendersEveryCorpusModule) {
  if (!fs::is_directory(kCorpus)) GTEST_SKIP() << kCorpus << " is absent";
  SKIP_WITHOUT_GRAPHVIZ();
  std::vector<fs::path> files = HloFiles(kCorpus);
  ASSERT_FALSE(files.empty());
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.filename().string());
    StatusOr<std::string> text = ReadFile(file.string());
    ASSERT_TRUE(text.ok()) << text.status().message();
    StatusOr<std::unique_ptr<HloModule>> module =
        ParseHloModule(*text, ParseOptions{.verify = false, .filename = file.string()});
    ASSERT_TRUE(module.ok()) << module.status().message();
    std::string dot = ToDot(**module);
    EXPECT_LE(Nodes(dot).size(), 300u);
    if (dot.find("not shown") == std::string::npos) {
      // One node per instruction of the entry and of the computations it calls, except
      // reducers (notes) and fusions (clusters).
      std::multiset<std::string> expected;
      std::vector<const HloComputation*> computations = {(*module)->entry_computation()};
      std::set<const HloComputation*> seen = {computations[0]};
      for (size_t i = 0; i < computations.size(); ++i) {
        for (const HloInstruction* instr : computations[i]->instructions()) {
          bool is_cluster = instr->opcode() == HloOpcode::kFusion &&
                            seen.insert(instr->fused_computation()).second;
          if (is_cluster) {
            computations.push_back(instr->fused_computation());
            continue;
          }
          expected.insert(instr->name());
          if (!kCallsClusters.contains(instr->opcode())) continue;
          for (const HloComputation* callee : instr->called_computations()) {
            if (seen.insert(callee).second) computations.push_back(callee);
          }
        }
      }
      std::multiset<std::string> drawn = NodeNames(dot);
      for (const std::string& name : expected) {
        EXPECT_EQ(drawn.count(name), expected.count(name)) << name;
      }
    }
    ExpectRenders(dot, file.stem().string());
  }
}

// Walking, selecting and emitting are iterative: 100,000 nested calls overflowed the stack. The
// nested clusters' indentation stops growing, so the graph stays linear in the module's size.
TEST(DotPrinterTest, HundredThousandNestedCallsRenderInLinearSize) {
  constexpr int kDepth = 100000;
  auto module = ParseHloModule(testing::NestedCallsText(kDepth));
  ASSERT_TRUE(module.ok()) << module.status().message();
  StatusOr<std::string> dot = ModuleToDot(**module, DotOptions{.max_nodes = 0});
  ASSERT_TRUE(dot.ok()) << dot.status().message();
  EXPECT_LT(dot->size(), size_t{2000} * kDepth);
  EXPECT_EQ(std::count(dot->begin(), dot->end(), '{'), std::count(dot->begin(), dot->end(), '}'));
  EXPECT_THAT(*dot, HasSubstr("to_apply of r"));
  // The neighbourhood of the root, as drawn by default, too.
  StatusOr<std::string> near = ModuleToDot(**module, DotOptions{});
  ASSERT_TRUE(near.ok()) << near.status().message();
}

TEST(DotPrinterTest, LargeModulesHitTheSizeLimitAndStillRender) {
  fs::path mobilenet = kCorpus / "large/mobilenet_v2_pytorch_train_step.hlo";
  if (!fs::exists(mobilenet)) GTEST_SKIP() << mobilenet << " is absent";
  SKIP_WITHOUT_GRAPHVIZ();
  for (const fs::path& file : HloFiles(kCorpus / "large")) {
    SCOPED_TRACE(file.filename().string());
    StatusOr<std::string> text = ReadFile(file.string());
    ASSERT_TRUE(text.ok()) << text.status().message();
    StatusOr<std::unique_ptr<HloModule>> module =
        ParseHloModule(*text, ParseOptions{.verify = false, .filename = file.string()});
    ASSERT_TRUE(module.ok()) << module.status().message();
    std::string dot = ToDot(**module);
    EXPECT_LE(Nodes(dot).size(), 300u);
    if (file == mobilenet) {
      EXPECT_GT((*module)->instruction_count(), 300);
      EXPECT_EQ(Nodes(dot).size(), 300u);
      EXPECT_THAT(dot, HasSubstr("instructions not shown"));
      EXPECT_THAT(dot, HasSubstr("cut_note [shape=note"));
    }
    ExpectRenders(dot, file.stem().string());
  }
}

}  // namespace
}  // namespace xlens
