// DumpModel on a dump directory XLA wrote (no manifest.json): the same model as xlens's own, rebuilt
// from the file names through dump/'s one entry point. Stages in XLA's step order, the optimized
// module's kernels from the viewer's outline, every file that could not be placed said in one line.
#include <QTemporaryDir>
#include <QtTest>
#include <fstream>

#include "viewer/dump_model.h"

using xlens::ManifestModule;
using xlens::viewer::DumpModel;
using xlens::viewer::StageRef;

namespace {

void Write(const QString& dir, const std::string& name, const std::string& text = "x") {
  std::ofstream((dir + "/").toStdString() + name) << text;
}

constexpr const char* kOptimized = R"(HloModule jit_f, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

FileNames
1 "train.py"

FunctionNames
1 "loss"

FileLocations
1 {file_name_id=1 function_name_id=1 line=15 end_line=15 column=11 end_column=53}

StackFrames
1 {file_location_id=1 parent_frame_id=1}


%fused_computation (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%p), metadata={op_name="jit(f)/neg" stack_frame_id=1}
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %negate_fusion = f32[4]{0} fusion(%x), kind=kLoop, calls=%fused_computation, metadata={op_name="jit(f)/neg"}
}
)";

}  // namespace

class XlaDumpModelTest : public QObject {
  Q_OBJECT
 private slots:
  void OpensAnXlaDumpWithoutAManifest() {
    QTemporaryDir dir;
    Write(dir.path(), "module_0003.jit_f.before_optimizations.txt", kOptimized);
    Write(dir.path(), "module_0003.jit_f.0011.simp.after_dce.before_cse.txt", kOptimized);
    Write(dir.path(), "module_0003.jit_f.0002.simp.after_algsimp.before_dce.txt", kOptimized);
    Write(dir.path(), "module_0003.jit_f.cpu_after_optimizations.txt", kOptimized);
    for (int i = 0; i < 500; ++i) Write(dir.path(), "notes" + std::to_string(i) + ".txt");
    auto model = DumpModel::Open(dir.path().toStdString());
    QVERIFY(model->has_manifest());
    QVERIFY(model->from_xla_names());
    QCOMPARE(model->manifest().modules.size(), size_t(1));
    const ManifestModule& module = model->manifest().modules[0];
    QCOMPARE(module.id, int64_t(3));
    QCOMPARE(module.stages.size(), size_t(2));
    QCOMPARE(module.stages[0].pass, std::string("algsimp"));
    QCOMPARE(module.stages[1].pass, std::string("dce"));
    QCOMPARE(module.kernels.size(), size_t(1));
    QCOMPARE(module.kernels[0].name, std::string("negate_fusion"));
    QCOMPARE(module.kernels[0].op_names, std::vector<std::string>{"jit(f)/neg"});
    // The optimized module is the stage the kernels name; the diff steps back through the passes.
    std::optional<StageRef> optimized = DumpModel::OptimizedStage(module);
    QVERIFY(optimized.has_value());
    QCOMPARE(DumpModel::HloFileOf(module, *optimized), std::string("module_0003.jit_f.cpu_after_optimizations.txt"));
    QCOMPARE(DumpModel::PreviousHloFile(module, *optimized), module.stages[1].files[0]);
    // 500 unplaced files are one problem line.
    QCOMPARE(model->problems().size(), size_t(1));
    QVERIFY2(model->problems()[0].find("500 files not placed") != std::string::npos, model->problems()[0].c_str());
  }

  void AnEmptyDirectorySaysWhatItLacks() {
    QTemporaryDir dir;
    auto model = DumpModel::Open(dir.path().toStdString());
    QVERIFY(!model->has_manifest());
    QCOMPARE(model->problems().size(), size_t(1));
    QVERIFY2(model->problems()[0].find("no manifest.json") != std::string::npos, model->problems()[0].c_str());
  }
};

QTEST_MAIN(XlaDumpModelTest)
#include "xla_dump_model_test.moc"
