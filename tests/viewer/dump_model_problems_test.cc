// What DumpModel says about a manifest's files: a manifest that lists 100,000 missing files is
// one problem with the count and the first name, not 100,000; one missing file is named as before.
#include <QTemporaryDir>
#include <QtTest>
#include <fstream>

#include "viewer/dump_model.h"

using xlens::viewer::DumpModel;

namespace {

void WriteManifest(const QString& dir, int missing, const std::string& name_prefix = "gone/f") {
  std::ofstream out((dir + "/manifest.json").toStdString());
  out << R"({"format": 1, "modules": [{"id": 1, "name": "m", "stages": [], "kernels": [], "files": [)";
  for (int i = 0; i < missing; ++i) out << (i ? "," : "") << '"' << name_prefix << i << ".txt\"";
  out << "]}]}";
}

}  // namespace

class DumpModelProblemsTest : public QObject {
  Q_OBJECT
 private slots:
  void ManyMissingFilesAreOneProblem() {
    QTemporaryDir dir;
    WriteManifest(dir.path(), 100000);
    auto model = DumpModel::Open(dir.path().toStdString());
    QVERIFY(model->has_manifest());
    QCOMPARE(model->problems().size(), size_t(1));
    const std::string& problem = model->problems().front();
    QVERIFY2(problem.find("lists 100000 files that are missing (first: ") != std::string::npos, problem.c_str());
    QVERIFY2(problem.find("gone/f0.txt") != std::string::npos, problem.c_str());
  }

  void OneMissingFileIsNamed() {
    QTemporaryDir dir;
    WriteManifest(dir.path(), 1);
    auto model = DumpModel::Open(dir.path().toStdString());
    QCOMPARE(model->problems().size(), size_t(1));
    QVERIFY(model->problems().front().find("gone/f0.txt: named by manifest.json but missing") != std::string::npos);
  }

  void NamesThatLeaveTheDirectoryAreShownEscaped() {
    QTemporaryDir dir;
    WriteManifest(dir.path(), 2, "../\\u001b]0;x\\u0007");
    auto model = DumpModel::Open(dir.path().toStdString());
    QCOMPARE(model->problems().size(), size_t(1));
    const std::string& problem = model->problems().front();
    QVERIFY2(problem.find("2 files that leave the dump directory") != std::string::npos, problem.c_str());
    QVERIFY2(problem.find('\x1b') == std::string::npos, problem.c_str());
    QVERIFY2(problem.find("\\x1b") != std::string::npos, problem.c_str());
  }
};

QTEST_MAIN(DumpModelProblemsTest)
#include "dump_model_problems_test.moc"
