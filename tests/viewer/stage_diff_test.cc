// StageDiff against its definitions (stage_diff.h) on hand-written modules, and on the
// consecutive per-pass dumps of a real compilation, checked against the dump text itself.
#include <QDir>
#include <QFile>
#include <QRegularExpression>
#include <QtTest>
#include <algorithm>

#include "dump/manifest.h"
#include "viewer/hlo_outline.h"
#include "viewer/stage_diff.h"

using xlens::viewer::ComputeStageDiff;
using xlens::viewer::HloOutline;
using xlens::viewer::ParseHloOutline;
using xlens::viewer::StageDiff;

namespace {

HloOutline Parse(const std::string& text, const std::string& source) {
  auto outline = ParseHloOutline(text, source);
  if (!outline.ok()) qFatal("%s", outline.status().message().c_str());
  return std::move(outline).value();
}

using Names = std::vector<std::string>;

const char kBefore[] = R"(HloModule m

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}

ENTRY %main (p0: f32[8], p1: f32[8]) -> f32[8] {
  %p0 = f32[8]{0} parameter(0)
  %p1 = f32[8]{0} parameter(1)
  %mul = f32[8]{0} multiply(f32[8]{0} %p0, f32[8]{0} %p1)
  %exp = f32[8]{0} exponential(f32[8]{0} %mul)
  %neg = f32[8]{0} negate(f32[8]{0} %exp)
  %dead = f32[8]{0} copy(f32[8]{0} %p0)
  ROOT %r = f32[8]{0} add(f32[8]{0} %neg, f32[8]{0} %p1)
}
)";

// `exp` is fused two levels deep (a fusion inside the fusion), `mul` one level.
const char kAfter[] = R"(HloModule m

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}

%fused_inner (param_0.1: f32[8]) -> f32[8] {
  %param_0.1 = f32[8]{0} parameter(0)
  ROOT %exp = f32[8]{0} exponential(f32[8]{0} %param_0.1)
}

%fused_computation (param_0: f32[8], param_1: f32[8]) -> f32[8] {
  %param_0 = f32[8]{0} parameter(0)
  %param_1 = f32[8]{0} parameter(1)
  %mul = f32[8]{0} multiply(f32[8]{0} %param_0, f32[8]{0} %param_1)
  ROOT %inner = f32[8]{0} fusion(f32[8]{0} %mul), kind=kLoop, calls=%fused_inner
}

ENTRY %main (p0: f32[8], p1: f32[8]) -> f32[8] {
  %p0 = f32[8]{0} parameter(0)
  %p1 = f32[8]{0} parameter(1)
  %fusion = f32[8]{0} fusion(f32[8]{0} %p0, f32[8]{0} %p1), kind=kLoop, calls=%fused_computation
  %neg = f32[8]{0} negate(f32[8]{0} %fusion)
  %extra = f32[8]{0} copy(f32[8]{0} %neg)
  ROOT %r = f32[8]{0} add(f32[8]{0} %neg, f32[8]{0} %p1)
}
)";

QString DumpDir() {
  QString dir = qEnvironmentVariable("XLENS_VIEWER_TEST_DUMP");
  return QDir(dir).exists("manifest.json") ? dir : QString();
}

std::string ReadText(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) return {};
  return file.readAll().toStdString();
}

// The names of the instructions written inside computation `computation` of HLO `text`, read
// with a regular expression rather than the outline reader.
QSet<QString> NamesInComputationText(const QString& text, const QString& computation) {
  QSet<QString> names;
  bool inside = false;
  QRegularExpression header("^(ENTRY\\s+)?%?" + QRegularExpression::escape(computation) + "[\\s{]");
  QRegularExpression instruction(R"(^\s+(ROOT\s+)?%?([\w.\-]+)\s*=)");
  for (const QString& line : text.split('\n')) {
    if (!inside && header.match(line).hasMatch()) {
      inside = true;
    } else if (inside && line.startsWith('}')) {
      break;
    } else if (inside) {
      auto m = instruction.match(line);
      if (m.hasMatch()) names.insert(m.captured(2));
    }
  }
  return names;
}

}  // namespace

class StageDiffTest : public QObject {
  Q_OBJECT
 private slots:
  void FollowsTheDefinitions();
  void AFusionWhoseBodyChangedIsModified();
  void AStageAgainstItselfIsEmpty();
  void ADuplicatedProducerIsFusedIntoTheSmallestName();
  void ANestedBodyChangeModifiesTheOuterFusion();
  void RealFusionPassFusesInstructions();
};

void StageDiffTest::FollowsTheDefinitions() {
  StageDiff diff = ComputeStageDiff(Parse(kBefore, "before"), Parse(kAfter, "after"));
  QCOMPARE(diff.added, (Names{"extra", "fusion"}));
  QCOMPARE(diff.removed, (Names{"dead"}));
  QCOMPARE(diff.modified, (Names{"neg"}));  // its operand changed; r's line did not
  std::map<std::string, std::string> fused{{"exp", "fusion"}, {"mul", "fusion"}};
  QCOMPARE(diff.fused_into, fused);
  // And backwards: what was added is removed, and nothing is fused.
  StageDiff back = ComputeStageDiff(Parse(kAfter, "after"), Parse(kBefore, "before"));
  QCOMPARE(back.removed, (Names{"extra", "fusion"}));
  QCOMPARE(back.added, (Names{"dead", "exp", "mul"}));
  QVERIFY(back.fused_into.empty());
  QCOMPARE(back.modified, (Names{"neg"}));
}

void StageDiffTest::AFusionWhoseBodyChangedIsModified() {
  std::string changed = kAfter;
  // Same fusion line, different body two levels down.
  size_t at = changed.find("exponential(f32[8]{0} %param_0.1)");
  QVERIFY(at != std::string::npos);
  changed.replace(at, 11, "log");
  StageDiff diff = ComputeStageDiff(Parse(kAfter, "a"), Parse(changed, "b"));
  QCOMPARE(diff.modified, (Names{"fusion"}));
  QVERIFY(diff.added.empty() && diff.removed.empty() && diff.fused_into.empty());
  // Moving ROOT is no change of text.
  std::string rerooted = kBefore;
  rerooted.replace(rerooted.find("ROOT %r"), 7, "%r");
  rerooted.replace(rerooted.find("  %dead"), 7, "  ROOT %dead");
  QVERIFY(ComputeStageDiff(Parse(kBefore, "a"), Parse(rerooted, "b")).empty());
}

void StageDiffTest::AStageAgainstItselfIsEmpty() {
  QVERIFY(ComputeStageDiff(Parse(kBefore, "a"), Parse(kBefore, "a")).empty());
  QVERIFY(ComputeStageDiff(Parse(kAfter, "a"), Parse(kAfter, "a")).empty());
}

// The compiler's record (compiler/passes/stage_changes.h) breaks the tie the same way.
void StageDiffTest::ADuplicatedProducerIsFusedIntoTheSmallestName() {
  const std::string before = R"(HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  c = f32[4] negate(p)
  u = f32[4] abs(c)
  v = f32[4] sine(c)
  ROOT t = (f32[4], f32[4]) tuple(u, v)
})";
  const std::string after = R"(HloModule m
f1 {
  param_0 = f32[4] parameter(0)
  c = f32[4] negate(param_0)
  ROOT u = f32[4] abs(c)
}
f2 {
  param_0.1 = f32[4] parameter(0)
  c.1 = f32[4] negate(param_0.1)
  c = f32[4] negate(c.1)
  ROOT v = f32[4] sine(c)
}
ENTRY e {
  p = f32[4] parameter(0)
  fusion.9 = f32[4] fusion(p), kind=kLoop, calls=f2
  fusion.10 = f32[4] fusion(p), kind=kLoop, calls=f1
  ROOT t = (f32[4], f32[4]) tuple(fusion.10, fusion.9)
})";
  StageDiff diff = ComputeStageDiff(Parse(before, "before"), Parse(after, "after"));
  // "fusion.10" sorts before "fusion.9" although fusion.9 comes first in the module.
  QCOMPARE(diff.fused_into.at("c"), std::string("fusion.10"));
}

void StageDiffTest::ANestedBodyChangeModifiesTheOuterFusion() {
  const std::string text = R"(HloModule m
inner {
  param_0.1 = f32[4] parameter(0)
  ROOT x = f32[4] OP(param_0.1)
}
outer {
  param_0 = f32[4] parameter(0)
  ROOT f.inner = f32[4] fusion(param_0), kind=kLoop, calls=inner
}
ENTRY e {
  p = f32[4] parameter(0)
  ROOT fusion.7 = f32[4] fusion(p), kind=kLoop, calls=outer
})";
  std::string before = text, after = text;
  before.replace(before.find("OP"), 2, "negate");
  after.replace(after.find("OP"), 2, "abs");
  StageDiff diff = ComputeStageDiff(Parse(before, "before"), Parse(after, "after"));
  QCOMPARE(diff.modified, Names{"fusion.7"});
  QVERIFY(diff.added.empty() && diff.removed.empty() && diff.fused_into.empty());
}

void StageDiffTest::RealFusionPassFusesInstructions() {
  QString dump = DumpDir();
  if (dump.isEmpty()) QSKIP("XLENS_VIEWER_TEST_DUMP is not a dump directory");
  auto manifest = xlens::ReadManifest((dump + "/manifest.json").toStdString());
  QVERIFY2(manifest.ok(), manifest.status().message().c_str());
  int fusion_stages = 0, pairs = 0;
  for (const xlens::ManifestModule& module : manifest->modules) {
    std::vector<xlens::ManifestStage> stages = module.stages;
    std::sort(stages.begin(), stages.end(), [](auto& a, auto& b) { return a.step < b.step; });
    auto text_file = [&](const xlens::ManifestStage& stage) {
      for (const std::string& file : stage.files) {
        if (QString::fromStdString(file).endsWith(".txt")) return dump + "/" + QString::fromStdString(file);
      }
      return QString();
    };
    QString previous;
    for (const xlens::ManifestStage& stage : stages) {
      QString current = text_file(stage);
      if (current.isEmpty()) continue;
      if (previous.isEmpty()) {
        previous = current;
        continue;
      }
      std::string before_text = ReadText(previous), after_text = ReadText(current);
      HloOutline before = Parse(before_text, previous.toStdString());
      HloOutline after = Parse(after_text, current.toStdString());
      StageDiff diff = ComputeStageDiff(before, after);
      ++pairs;
      QVERIFY(ComputeStageDiff(after, after).empty());
      // Independent checks against the texts: added names are new, removed ones are gone.
      QSet<QString> before_entry = NamesInComputationText(QString::fromStdString(before_text), QString::fromStdString(before.entry()->name));
      QSet<QString> after_entry = NamesInComputationText(QString::fromStdString(after_text), QString::fromStdString(after.entry()->name));
      for (const std::string& name : diff.removed) QVERIFY(!after.FindInstruction(name).second || after.IsFusedComputation(*after.FindInstruction(name).first));
      for (const std::string& name : diff.added) {
        if (before_entry.contains(QString::fromStdString(name))) QFAIL(("added but present before: " + name).c_str());
      }
      if (QString::fromStdString(stage.pass).contains("fusion") && !diff.fused_into.empty()) {
        ++fusion_stages;
        for (const auto& [x, f] : diff.fused_into) {
          QString X = QString::fromStdString(x), F = QString::fromStdString(f);
          QVERIFY2(before_entry.contains(X), qPrintable(X));
          QVERIFY2(!after_entry.contains(X), qPrintable(X));
          QVERIFY2(after_entry.contains(F), qPrintable(F));
          // F's line in the text calls a computation whose body (or a nested one) holds X.
          const auto* fusion = after.entry()->Find(f);
          QVERIFY(fusion != nullptr && fusion->opcode == "fusion");
          bool found = false;
          QStringList pending{QString::fromStdString(fusion->called.front())};
          QSet<QString> seen;
          while (!pending.isEmpty() && !found) {
            QString computation = pending.takeLast();
            if (seen.contains(computation)) continue;
            seen.insert(computation);
            QSet<QString> names = NamesInComputationText(QString::fromStdString(after_text), computation);
            found = names.contains(X);
            for (const auto& inner : after.FindComputation(computation.toStdString())->instructions) {
              if (inner.opcode == "fusion") pending << QString::fromStdString(inner.called.front());
            }
          }
          QVERIFY2(found, qPrintable(X + " not inside " + F));
        }
        // A fusion pass makes fusions: each F is new or changed.
        for (const auto& [x, f] : diff.fused_into) {
          bool reported = std::count(diff.added.begin(), diff.added.end(), f) || std::count(diff.modified.begin(), diff.modified.end(), f);
          QVERIFY2(reported, f.c_str());
        }
      }
      previous = current;
    }
  }
  QVERIFY2(pairs >= 2, "expected consecutive per-pass dumps");
  QVERIFY2(fusion_stages >= 1, "expected a fusion pass that fused instructions");
}

QTEST_MAIN(StageDiffTest)
#include "stage_diff_test.moc"
