// The HLO outline reader against the sample module (checked against the text itself), the
// per-pass dumps of a real compilation, and a corpus of broken inputs.
#include <QDir>
#include <QFile>
#include <QRandomGenerator>
#include <QRegularExpression>
#include <QtTest>

#include "viewer/hlo_outline.h"

using xlens::viewer::HloOutline;
using xlens::viewer::HloOutlineComputation;
using xlens::viewer::HloOutlineInstruction;
using xlens::viewer::ParseHloOutline;

namespace {

QByteArray ReadAll(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) return {};
  return file.readAll();
}

std::string SamplePath() { return std::string(XLENS_SOURCE_DIR) + "/samples/mnist_softmax_train_step.hlo"; }

QString DumpDir() {
  QString dir = qEnvironmentVariable("XLENS_VIEWER_TEST_DUMP");
  return QDir(dir).exists("manifest.json") ? dir : QString();
}

}  // namespace

class HloOutlineTest : public QObject {
  Q_OBJECT
 private slots:
  void ParsesTheSampleModule();
  void ReadsOperandsAttributesAndMetadata();
  void ParsesEveryDumpedStage();
  void ReportsBrokenInputsWithPositions_data();
  void ReportsBrokenInputsWithPositions();
  void SurvivesMutatedInput();
  void CountsShapeElements();
  void SkipsTheStackFrameTable();
};

void HloOutlineTest::ParsesTheSampleModule() {
  QByteArray text = ReadAll(QString::fromStdString(SamplePath()));
  QVERIFY(!text.isEmpty());
  auto outline = ParseHloOutline(text.toStdString(), "sample.hlo");
  QVERIFY2(outline.ok(), outline.status().message().c_str());
  QCOMPARE(outline->module_name, std::string("mnist_softmax_train_step"));

  // Ground truth from the text: every "name (" / "ENTRY name (" header opens a computation, and
  // every line of the form "  [ROOT] %name = " inside is one instruction.
  QStringList lines = QString::fromUtf8(text).split('\n');
  QMap<QString, int> expected;
  QString current, entry;
  QRegularExpression header(R"(^(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$)");
  QRegularExpression instruction(R"(^\s+(ROOT\s+)?%?([\w.\-]+)\s*=)");
  for (const QString& line : lines) {
    if (line.startsWith("//") || line.startsWith("HloModule")) continue;
    auto h = header.match(line);
    if (current.isEmpty() && h.hasMatch()) {
      current = h.captured(2);
      if (!h.captured(1).isEmpty()) entry = current;
      expected[current] = 0;
    } else if (line.startsWith('}')) {
      current.clear();
    } else if (!current.isEmpty() && instruction.match(line).hasMatch()) {
      expected[current]++;
    }
  }
  QCOMPARE(static_cast<int>(outline->computations.size()), expected.size());
  for (const HloOutlineComputation& computation : outline->computations) {
    QString name = QString::fromStdString(computation.name);
    QVERIFY2(expected.contains(name), qPrintable(name));
    QCOMPARE(static_cast<int>(computation.instructions.size()), expected[name]);
  }
  QVERIFY(outline->entry() != nullptr);
  QCOMPARE(QString::fromStdString(outline->entry()->name), entry);
  QVERIFY(outline->entry()->is_entry);
  // Exactly one ROOT per computation, and its text lost the "ROOT " prefix.
  for (const HloOutlineComputation& computation : outline->computations) {
    int roots = 0;
    for (const HloOutlineInstruction& i : computation.instructions) {
      roots += i.is_root;
      QVERIFY(!QString::fromStdString(i.text).startsWith("ROOT"));
      QVERIFY(text.contains(QByteArray::fromStdString(i.text)));
    }
    QCOMPARE(roots, 1);
  }
}

void HloOutlineTest::ReadsOperandsAttributesAndMetadata() {
  QByteArray text = ReadAll(QString::fromStdString(SamplePath()));
  auto outline = ParseHloOutline(text.toStdString(), "sample.hlo");
  QVERIFY(outline.ok());
  auto [computation, matmul] = outline->FindInstruction("matmul");
  QVERIFY(matmul != nullptr);
  QCOMPARE(computation, outline->entry());
  QCOMPARE(matmul->opcode, std::string("dot"));
  QCOMPARE(matmul->shape, std::string("f32[100,10]{1,0}"));
  QCOMPARE(matmul->operands, (std::vector<std::string>{"x", "w"}));
  QCOMPARE(matmul->op_type, std::string("MatMul"));
  QCOMPARE(matmul->op_names, std::vector<std::string>{"MatMul"});
  const HloOutlineInstruction* row_max = outline->entry()->Find("row_max");
  QVERIFY(row_max != nullptr);
  QCOMPARE(row_max->opcode, std::string("reduce"));
  QCOMPARE(row_max->called, std::vector<std::string>{"max_f32"});
  QCOMPARE(row_max->operands, (std::vector<std::string>{"logits", "neg_inf"}));
  QVERIFY(outline->entry()->Find("neg_inf")->operands.empty());  // constant(-inf) has no operands

  // The forms the dumps of other XLA versions use: no '%', /*index=N*/ comments, tuple shapes,
  // computation lists, escaped quotes and several op_names joined by ';'.
  const char* other = R"(HloModule other, is_scheduled=true

fused_computation {
  param_0 = f32[8]{0} parameter(0)
  ROOT e = f32[8]{0} exponential(param_0)
}

cond (c: (s32[], f32[8])) -> pred[] {
  c = (s32[], f32[8]{0}) parameter(0)
  ROOT t = pred[] constant(true)
}

ENTRY main {
  p = f32[8]{0} parameter(0), metadata={op_type="Exp" op_name="a/b;c/d" source_file="x \"q\".py"}
  f = f32[8]{0} fusion(p), kind=kLoop, calls=fused_computation, metadata={op_name="fused"}
  t = (s32[], f32[8]{0}) tuple(s32[] /*index=0*/ constant.1, f32[8]{0} /*index=1*/ f)
  w = (s32[], f32[8]{0}) while(t), condition=cond, body=fused_computation
  ROOT k = f32[8]{0} conditional(p, f, f), branch_computations={cond, %fused_computation}
}
)";
  auto parsed = ParseHloOutline(other, "other.hlo");
  QVERIFY2(parsed.ok(), parsed.status().message().c_str());
  QCOMPARE(parsed->module_name, std::string("other"));
  QCOMPARE(parsed->entry()->name, std::string("main"));
  const HloOutlineInstruction* p = parsed->entry()->Find("p");
  QCOMPARE(p->op_names, (std::vector<std::string>{"a/b", "c/d"}));
  QCOMPARE(p->op_type, std::string("Exp"));
  const HloOutlineInstruction* f = parsed->entry()->Find("f");
  QCOMPARE(f->fusion_kind, std::string("kLoop"));
  QCOMPARE(f->called, std::vector<std::string>{"fused_computation"});
  QVERIFY(parsed->IsFusedComputation(*parsed->FindComputation("fused_computation")));
  QVERIFY(!parsed->IsFusedComputation(*parsed->FindComputation("cond")));
  QCOMPARE(parsed->entry()->Find("t")->operands, (std::vector<std::string>{"constant.1", "f"}));
  QCOMPARE(parsed->FindComputation("cond")->Find("c")->shape, std::string("(s32[], f32[8]{0})"));
  QCOMPARE(parsed->entry()->Find("w")->called, (std::vector<std::string>{"cond", "fused_computation"}));
  QCOMPARE(parsed->entry()->Find("k")->called, (std::vector<std::string>{"cond", "fused_computation"}));
  QVERIFY(parsed->entry()->Find("k")->is_root);
  QCOMPARE(parsed->entry()->root()->name, std::string("k"));

  // HLO is not line based: a computation written on one line reads the same.
  const char* one_line = "HloModule compact\n"
                         "add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }\n"
                         "ENTRY %main (p: f32[8]) -> f32[] { %p = f32[8]{0} parameter(0), metadata={op_name=\"in\"}"
                         " %z = f32[] constant(0) ROOT %r = f32[] reduce(f32[8]{0} %p, f32[] %z), dimensions={0}, to_apply=add }\n";
  auto compact = ParseHloOutline(one_line, "compact.hlo");
  QVERIFY2(compact.ok(), compact.status().message().c_str());
  QCOMPARE(static_cast<int>(compact->computations.size()), 2);
  QCOMPARE(static_cast<int>(compact->FindComputation("add")->instructions.size()), 3);
  QCOMPARE(compact->FindComputation("add")->Find("s")->operands, (std::vector<std::string>{"a", "b"}));
  QCOMPARE(compact->FindComputation("add")->Find("s")->text, std::string("s = f32[] add(a, b)"));
  QCOMPARE(compact->entry()->name, std::string("main"));
  QCOMPARE(compact->entry()->Find("p")->op_names, std::vector<std::string>{"in"});
  QCOMPARE(compact->entry()->Find("r")->called, std::vector<std::string>{"add"});
  QCOMPARE(compact->entry()->Find("r")->text,
           std::string("%r = f32[] reduce(f32[8]{0} %p, f32[] %z), dimensions={0}, to_apply=add"));
  QVERIFY(compact->entry()->Find("r")->is_root);
}

void HloOutlineTest::ParsesEveryDumpedStage() {
  QString dump = DumpDir();
  if (dump.isEmpty()) QSKIP("XLENS_VIEWER_TEST_DUMP is not a dump directory");
  QStringList files = QDir(dump).entryList({"module_*.txt"}, QDir::Files);
  int parsed = 0, with_fusions = 0;
  for (const QString& name : files) {
    if (name.contains("buffer-assignment") || name.contains("thunk") || name.contains("memory-usage")) continue;
    QByteArray text = ReadAll(dump + "/" + name);
    if (!text.startsWith("HloModule")) continue;
    auto outline = ParseHloOutline(text.toStdString(), name.toStdString());
    QVERIFY2(outline.ok(), outline.status().message().c_str());
    QVERIFY(outline->entry() != nullptr);
    ++parsed;
    // Every operand names an instruction of the same computation, as HLO requires.
    for (const HloOutlineComputation& computation : outline->computations) {
      for (const HloOutlineInstruction& instruction : computation.instructions) {
        for (const std::string& operand : instruction.operands) {
          QVERIFY2(computation.Find(operand) != nullptr, qPrintable(name + ": " + QString::fromStdString(operand)));
        }
        for (const std::string& called : instruction.called) QVERIFY(outline->FindComputation(called) != nullptr);
      }
    }
    bool fused = false;
    for (const HloOutlineComputation& computation : outline->computations) {
      for (const HloOutlineInstruction& instruction : computation.instructions) {
        if (instruction.opcode == "fusion") {
          fused = true;
          QVERIFY(!instruction.fusion_kind.empty());
          QVERIFY(outline->IsFusedComputation(*outline->FindComputation(instruction.called.front())));
        }
      }
    }
    with_fusions += fused;
  }
  QVERIFY2(parsed >= 3, "expected the per-pass dumps of the fixture");
  QVERIFY2(with_fusions >= 1, "expected a stage after fusion");
}

void HloOutlineTest::ReportsBrokenInputsWithPositions_data() {
  QTest::addColumn<QString>("file");
  QTest::addColumn<QString>("position");  // "line:col"
  QTest::addColumn<QString>("what");
  QTest::newRow("empty") << "empty.hlo" << "1:1" << "no computation found";
  QTest::newRow("no computation") << "no_computation.hlo" << "4:1" << "no computation found";
  QTest::newRow("unclosed") << "unclosed_computation.hlo" << "5:1" << "computation 'main' (line 3) is not closed";
  QTest::newRow("missing =") << "missing_equals.hlo" << "5:6" << "expected '=' after instruction name 'n'";
  QTest::newRow("unbalanced (") << "unbalanced_paren.hlo" << "5:26" << "unbalanced '(' after 'add'";
  QTest::newRow("unterminated string") << "unterminated_string.hlo" << "4:64" << "unterminated string";
  QTest::newRow("outside") << "instruction_outside_computation.hlo" << "2:1" << "expected 'HloModule' or a computation header";
  QTest::newRow("duplicate instruction") << "duplicate_instruction.hlo" << "5:3" << "instruction 'p' is defined twice";
  QTest::newRow("duplicate computation") << "duplicate_computation.hlo" << "7:2" << "computation 'c' is defined twice";
  QTest::newRow("truncated") << "truncated.hlo" << "5:26" << "expected '(' after opcode 'neg'";
  QTest::newRow("missing opcode") << "missing_opcode.hlo" << "4:18" << "expected an opcode";
  QTest::newRow("trailing garbage") << "trailing_garbage.hlo" << "5:44" << "expected ',' and attributes";
  QTest::newRow("two modules") << "two_modules.hlo" << "2:1" << "a second HloModule";
  QTest::newRow("nested computation") << "computation_inside_computation.hlo" << "6:1" << "is not closed before the next one";
  QTest::newRow("deep nesting") << "deep_nesting.hlo" << "5:29" << "unbalanced '(' after 'negate'";
  QTest::newRow("extra brace") << "extra_close_brace.hlo" << "7:1" << "expected 'HloModule' or a computation header";
  QTest::newRow("random bytes") << "random_bytes.hlo" << "" << "";
}

void HloOutlineTest::ReportsBrokenInputsWithPositions() {
  QFETCH(QString, file);
  QFETCH(QString, position);
  QFETCH(QString, what);
  QString path = QString(XLENS_TESTDATA_DIR) + "/broken_hlo/" + file;
  QVERIFY2(QFile::exists(path), qPrintable(path));
  QByteArray text = ReadAll(path);
  auto outline = ParseHloOutline(std::string(text.constData(), static_cast<size_t>(text.size())), file.toStdString());
  QVERIFY(!outline.ok());
  QString message = QString::fromStdString(outline.status().message());
  QRegularExpression format("^" + QRegularExpression::escape(file) + R"(:(\d+):(\d+): \S)");
  QVERIFY2(format.match(message).hasMatch(), qPrintable(message));
  if (!position.isEmpty()) QVERIFY2(message.startsWith(file + ":" + position + ": "), qPrintable(message));
  if (!what.isEmpty()) QVERIFY2(message.contains(what), qPrintable(message));
}

void HloOutlineTest::SurvivesMutatedInput() {
  // Truncations and byte flips of a real module: each parses or fails with a positioned error.
  QByteArray text = ReadAll(QString::fromStdString(SamplePath()));
  QRandomGenerator random(1234);
  const char bytes[] = "(){}[]\"%=,\n \0ROOT";
  int errors = 0;
  for (int round = 0; round < 3000; ++round) {
    QByteArray mutated = text;
    if (round % 3 == 0) {
      mutated.truncate(static_cast<int>(random.bounded(static_cast<quint32>(text.size()))));
    } else {
      int flips = 1 + static_cast<int>(random.bounded(4u));
      for (int k = 0; k < flips; ++k) {
        mutated[static_cast<int>(random.bounded(static_cast<quint32>(mutated.size())))] =
            bytes[random.bounded(static_cast<quint32>(sizeof(bytes) - 1))];
      }
    }
    auto outline = ParseHloOutline(std::string(mutated.constData(), static_cast<size_t>(mutated.size())), "m.hlo");
    if (!outline.ok()) {
      ++errors;
      QVERIFY2(QRegularExpression(R"(^m\.hlo:\d+:\d+: \S)").match(QString::fromStdString(outline.status().message())).hasMatch(),
               outline.status().message().c_str());
    }
  }
  QVERIFY(errors > 100);  // the mutations do break things; the reader says where
}

// jaxlib writes a stack-frame table between the HloModule line and the first computation.
void HloOutlineTest::SkipsTheStackFrameTable() {
  const std::string text = R"(HloModule jit_f, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

FileNames
1 "train.py"

FunctionNames
1 "loss"

FileLocations
1 {file_name_id=1 function_name_id=1 line=15 end_line=15 column=11 end_column=53}

StackFrames
1 {file_location_id=1 parent_frame_id=1}


ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%x), metadata={op_name="jit(f)/neg" stack_frame_id=1}
}
)";
  auto outline = ParseHloOutline(text, "frames.hlo");
  QVERIFY2(outline.ok(), outline.ok() ? "" : outline.status().message().c_str());
  QCOMPARE(outline->module_name, std::string("jit_f"));
  QVERIFY(outline->entry() != nullptr);
  QVERIFY(outline->entry()->Find("n") != nullptr);
  // A table after a computation is no table: still an error.
  QVERIFY(!ParseHloOutline("HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\nFileNames\n1 \"a\"\n", "late.hlo").ok());
}

void HloOutlineTest::CountsShapeElements() {
  using xlens::viewer::ShapeElementCount;
  QCOMPARE(ShapeElementCount("f32[100,10]{1,0}"), int64_t{1000});
  QCOMPARE(ShapeElementCount("f32[]"), int64_t{1});
  QCOMPARE(ShapeElementCount("(f32[10]{0}, s32[2,3])"), int64_t{16});
  QCOMPARE(ShapeElementCount("f32[<=8]"), int64_t{8});
  QCOMPARE(ShapeElementCount("garbage"), int64_t{-1});
  QCOMPARE(ShapeElementCount("f32[1,x]"), int64_t{-1});
}

QTEST_MAIN(HloOutlineTest)
#include "hlo_outline_test.moc"
