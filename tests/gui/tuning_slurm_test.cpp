// The Tuning view's options (offscreen, the real widget): what the cost model sees reaches
// TuneOptions::features (and is off for tuners without a model); the Slurm switch's checkbox,
// partition and array size reach TuneOptions::slurm, an array's progress shows one line per array task instead of
// touching the task rows, and a failed array task is named with its log in red. The Slurm run
// itself is tested end to end against a real cluster in tests/e2e/slurm_tune_test.cpp.
#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QSpinBox>
#include <QtTest>

#include "app/gui/tuning_view.h"

using namespace kiln;
using namespace kiln::gui;

namespace {

QLabel* messageLabel(TuningView& view) {
  // The status column's word-wrapped label is the message; the ETA label is not wrapped.
  for (QLabel* label : view.findChildren<QLabel*>())
    if (label->wordWrap()) return label;
  return nullptr;
}

/// The view's checkbox whose text contains `text`.
QCheckBox* checkBox(TuningView& view, const QString& text) {
  for (QCheckBox* box : view.findChildren<QCheckBox*>())
    if (box->text().contains(text)) return box;
  return nullptr;
}

}  // namespace

class TuningSlurmTest : public QObject {
  Q_OBJECT

 private slots:
  void featuresReachTheOptions() {
    TuningView view;
    QComboBox *tuner = nullptr, *features = nullptr;
    for (QComboBox* box : view.findChildren<QComboBox*>()) {
      if (box->findData(QStringLiteral("grid")) >= 0) tuner = box;
      if (box->findData(QStringLiteral("loops")) >= 0) features = box;
    }
    QVERIFY(tuner && features);
    QCOMPARE(QString::fromStdString(view.options({}).features), QStringLiteral("knobs"));
    features->setCurrentIndex(features->findData(QStringLiteral("loops")));
    QCOMPARE(QString::fromStdString(view.options({}).features), QStringLiteral("loops"));
    QVERIFY(features->isEnabled());
    tuner->setCurrentIndex(tuner->findData(QStringLiteral("random")));
    QVERIFY(!features->isEnabled());
    tuner->setCurrentIndex(tuner->findData(QStringLiteral("xgb")));
    QVERIFY(features->isEnabled());
  }

  // Timing with flushed caches: off by default, on when ticked.
  void cacheFlushReachesTheOptions() {
    TuningView view;
    QCheckBox* flush = checkBox(view, QStringLiteral("caches"));
    QVERIFY(flush);
    QVERIFY(!view.options({}).cacheFlush);
    flush->setChecked(true);
    QVERIFY(view.options({}).cacheFlush);
  }

  void switchReachesTheOptions() {
    TuningView view;
    QCheckBox* slurm = checkBox(view, QStringLiteral("Slurm"));
    QVERIFY(slurm);
    QLineEdit* partition = nullptr;
    for (QLineEdit* edit : view.findChildren<QLineEdit*>())
      if (edit->placeholderText().contains(QStringLiteral("partition"))) partition = edit;
    QVERIFY(partition);
    QSpinBox* arraySize = nullptr;
    for (QSpinBox* box : view.findChildren<QSpinBox*>())
      if (box->suffix().contains(QStringLiteral("array"))) arraySize = box;
    QVERIFY(arraySize);

    app::TuneOptions o = view.options({});
    QVERIFY(!o.slurm.enabled);
    QVERIFY(!partition->isEnabled());
    slurm->setChecked(true);
    QVERIFY(partition->isEnabled() && arraySize->isEnabled());
    partition->setText(QStringLiteral(" batch "));
    arraySize->setValue(4);
    o = view.options({});
    QVERIFY(o.slurm.enabled);
    QCOMPARE(QString::fromStdString(o.slurm.partition), QStringLiteral("batch"));
    QCOMPARE(o.slurm.arraySize, 4);
  }

  void arrayProgressAndFailures() {
    TuningView view;
    app::TuneTaskInfo info;
    info.name = "fused_conv2d_nchwc_relu_0";
    view.setTasks({info});
    app::TuneProgress p;
    p.slurmJob = "12";
    p.totalTrials = 5;
    p.totalBudget = 12;
    p.slurmTasks.resize(2);
    p.slurmTasks[0].index = 0;
    p.slurmTasks[0].state = "RUNNING";
    p.slurmTasks[0].trials = 3;
    p.slurmTasks[0].budget = 6;
    p.slurmTasks[1].index = 1;
    p.slurmTasks[1].state = "PENDING";
    p.slurmTasks[1].budget = 6;
    view.applyProgress(p);
    QLabel* message = messageLabel(view);
    QVERIFY(message);
    QVERIFY2(message->text().contains(QStringLiteral("array task 0: RUNNING, 3/6 trials")), qPrintable(message->text()));
    QVERIFY2(message->text().contains(QStringLiteral("array task 1: PENDING, 0/6 trials")), qPrintable(message->text()));
    QCOMPARE(view.findChild<QProgressBar*>()->value(), 5);
    QCOMPARE(view.findChild<QProgressBar*>()->maximum(), 12);
    // The task rows are not touched by the array's totals.
    QCOMPARE(view.model()->rowCount(), 1);

    app::TuneResult r;
    r.slurmJob = "12";
    r.slurmTasks = p.slurmTasks;
    r.slurmTasks[0].state = "COMPLETED";
    r.slurmTasks[1].state = "FAILED";
    r.slurmTasks[1].log = "/shared/slurm-12_1.out";
    r.slurmTasks[1].reason = "cannot open the model";
    view.setResult(r);
    QVERIFY2(message->text().contains(QStringLiteral("array task 1 of job 12 ended FAILED (log /shared/slurm-12_1.out): "
                                                     "cannot open the model")),
             qPrintable(message->text()));
    QVERIFY(!message->text().contains(QStringLiteral("array task 0 of job")));
    QVERIFY(message->styleSheet().contains(QStringLiteral("#b00020")));
  }
};

QTEST_MAIN(TuningSlurmTest)
#include "tuning_slurm_test.moc"
