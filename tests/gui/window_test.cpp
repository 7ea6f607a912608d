// The real main window, driven through its actions on the offscreen platform: open a small model,
// compile, profile (the table must hold the façade's ProfileResult), pick a node and get its
// kernel's code, sweep (the chart's series must hold the sweep's points), tune (the task table,
// the records file and the end-to-end line must show the finished run), diff two builds, open
// corrupt files (a readable error dialog, no crash) and drop a stale compile. Cancel kills the
// measuring worker of a profile or a compare (no process left behind, no zombie), and Resume
// finishes a cancelled sweep.
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QMessageBox>
#include <QProcess>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QLineSeries>
#include <QScatterSeries>
#include <QtTest>

#include "app/gui/compare_view.h"
#include "app/gui/doctor_view.h"
#include "app/gui/graph_view.h"
#include "app/gui/ir_view.h"
#include "app/gui/job_runner.h"
#include "app/gui/main_window.h"
#include "app/gui/profile_view.h"
#include "app/gui/roofline_view.h"
#include "app/gui/session_view.h"
#include "app/gui/sweep_view.h"
#include "app/gui/text_view.h"
#include "app/gui/tuning_view.h"
#include "profiler/store.h"
#include "tests/gui/gui_test_support.h"

using namespace kiln;
using namespace kiln::gui;
using namespace kiln::testing_support;

namespace {
constexpr int kJobTimeoutMs = 300000;  // generous: the machine is shared, this is not a benchmark

/// This process's child processes that are measuring workers (their command line names
/// `measure-worker`), dying (a killed process loses its command line before it becomes a zombie)
/// or zombies (an exited child nobody reaped: its /proc entry stays, state Z).
/// With `environment`: only workers started with that variable setting ("KILN_FAULT=hang:conv").
/// `running`: only workers still running (their command line intact), not dying ones or zombies.
QList<qint64> measureWorkers(const QByteArray& environment = {}, bool running = false) {
  QList<qint64> found;
  const qint64 self = QCoreApplication::applicationPid();
  for (const QString& entry : QDir(QStringLiteral("/proc")).entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
    bool number = false;
    qint64 pid = entry.toLongLong(&number);
    if (!number) continue;
    QFile stat(QStringLiteral("/proc/%1/stat").arg(entry));
    if (!stat.open(QIODevice::ReadOnly)) continue;
    QByteArray text = stat.readAll();
    // "pid (comm) state ppid ...": comm may hold spaces, so split after its closing parenthesis.
    QList<QByteArray> fields = text.mid(text.lastIndexOf(')') + 2).split(' ');
    if (fields.size() < 2 || fields[1].toLongLong() != self) continue;
    QFile cmdline(QStringLiteral("/proc/%1/cmdline").arg(entry));
    QByteArray command = cmdline.open(QIODevice::ReadOnly) ? cmdline.readAll() : QByteArray();
    if (!environment.isEmpty()) {
      QFile environ(QStringLiteral("/proc/%1/environ").arg(entry));
      if (!environ.open(QIODevice::ReadOnly) || !environ.readAll().split('\0').contains(environment))
        continue;
    }
    bool alive = command.contains("measure-worker") && fields[0] != "Z";
    if (alive || (!running && (command.isEmpty() || fields[0] == "Z"))) found << pid;
  }
  return found;
}

/// The processes `measureWorkers` found, as "pid state command" (what a failed check names).
QString describeWorkers(const QList<qint64>& pids) {
  QStringList lines;
  for (qint64 pid : pids) {
    QFile stat(QStringLiteral("/proc/%1/stat").arg(pid));
    QByteArray text = stat.open(QIODevice::ReadOnly) ? stat.readAll() : QByteArray();
    QByteArray state = text.mid(text.lastIndexOf(')') + 2, 1);
    QFile cmdline(QStringLiteral("/proc/%1/cmdline").arg(pid));
    QByteArray command = cmdline.open(QIODevice::ReadOnly) ? cmdline.readAll().replace('\0', ' ') : QByteArray();
    // A zombie whose threads are still exiting (stuck in the kernel, state D) is not reaped yet:
    // name each thread's state and where it waits.
    QStringList threads;
    for (const QString& tid : QDir(QStringLiteral("/proc/%1/task").arg(pid)).entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
      QFile taskStat(QStringLiteral("/proc/%1/task/%2/stat").arg(pid).arg(tid));
      QByteArray t = taskStat.open(QIODevice::ReadOnly) ? taskStat.readAll() : QByteArray();
      QFile wchan(QStringLiteral("/proc/%1/task/%2/wchan").arg(pid).arg(tid));
      QByteArray where = wchan.open(QIODevice::ReadOnly) ? wchan.readAll() : QByteArray();
      threads << QStringLiteral("%1:%2:%3").arg(tid, QString::fromLatin1(t.mid(t.lastIndexOf(')') + 2, 1)),
                                                  QString::fromLatin1(where));
    }
    lines << QStringLiteral("%1 %2 %3 [threads %4]")
                 .arg(pid)
                 .arg(QString::fromLatin1(state), QString::fromLocal8Bit(command.left(200)), threads.join(QLatin1Char(' ')));
  }
  return lines.join(QStringLiteral("; "));
}

/// The stored points of sweep run `runId`: measurement id → median ms.
std::map<int64_t, double> storedSweepPoints(const std::string& db, int64_t sessionId, int64_t runId) {
  std::map<int64_t, double> points;
  auto data = app::loadSession(db, sessionId);
  if (!data) return points;
  for (const auto& sweep : data.value().sweeps) {
    if (sweep.runId != runId) continue;
    for (const auto& m : data.value().measurements)
      if (m.sweepId == sweep.id) points[m.id] = m.measurement.timing.medianMs;
  }
  return points;
}
}  // namespace

class WindowTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    WorkbenchOptions o;
    o.dbPath = m_dir.filePath(QStringLiteral("kiln.db"));
    o.modelsDir = QStringLiteral(KILN_MODELS_DIR);
    o.firstStartDialog = false;
    o.persistSettings = false;
    m_window = std::make_unique<MainWindow>(o);
    m_window->setThreads(1);
    m_window->resize(1280, 800);
    m_window->show();
    QTRY_VERIFY_WITH_TIMEOUT(!m_window->isBusy(), kJobTimeoutMs);
  }

  void cleanupTestCase() {
    m_window->cancelJobs();
    waitForAllJobs();
    m_window.reset();
  }

  void openShowsGraphAndIr() {
    m_window->openModelFile(modelPath("ops/conv_bn_relu.pt"));
    QTRY_VERIFY_WITH_TIMEOUT(!m_window->isBusy() && m_window->inspection(), kJobTimeoutMs);
    auto inspection = m_window->inspection();
    QCOMPARE(m_window->graphView()->nodeCount(), static_cast<int>(inspection->graph.nodes.size()));
    QVERIFY(m_window->graphView()->search(QStringLiteral("conv")) >= 1);
    m_window->graphView()->search(QString());
    m_window->irView()->showEntry(0);
    QVERIFY(m_window->irView()->codeView()->text().contains(QStringLiteral("conv2d")));
  }

  void compileAndSelectNode() {
    m_window->compile();
    QTRY_VERIFY_WITH_TIMEOUT(!m_window->isBusy(), kJobTimeoutMs);
    QVERIFY(m_window->errorBox() == nullptr);
    m_window->graphView()->selectCall(0);
    QCOMPARE(m_window->graphView()->selectedNode(), m_window->inspection()->graph.nodeOfCall(0));
    // LLVM IR and assembly of the selected kernel arrive from a job.
    auto* tabs = m_window->graphView()->codeTabs();
    auto* llvm = qobject_cast<CodeView*>(tabs->widget(1));
    QVERIFY(llvm);
    QTRY_VERIFY_WITH_TIMEOUT(llvm->text().contains(QStringLiteral("define")), kJobTimeoutMs);
    auto* loop = qobject_cast<CodeView*>(tabs->widget(0));
    QVERIFY(!loop->text().isEmpty());
  }

  // An export-only target compiles to an inspection, not a run; the status line gives the
  // module's size and, for wasm32, its outputs' agreement in Node with this machine's build.
  void exportOnlyTargetShowsSizeAndAgreement() {
    if (!m_window->inspection()) {  // run alone
      m_window->openModelFile(modelPath("ops/conv_bn_relu.pt"));
      QTRY_VERIFY_WITH_TIMEOUT(!m_window->isBusy() && m_window->inspection(), kJobTimeoutMs);
    }
    m_window->setTarget(QStringLiteral("llvm -mtriple=wasm32-unknown-unknown -mattr=+simd128"));
    m_window->compile();
    QTRY_VERIFY_WITH_TIMEOUT(!m_window->isBusy(), kJobTimeoutMs);
    QVERIFY(m_window->errorBox() == nullptr);
    QString status = m_window->statusText();
    QVERIFY2(status.contains(QStringLiteral("Export-only")) && status.contains(QStringLiteral("kernels.wasm")),
             qPrintable(status));
    QVERIFY2(status.contains(QStringLiteral("In node its outputs lie within")), qPrintable(status));
    m_window->setTarget(QStringLiteral("llvm"));
  }

  // The same for aarch64: its module runs under qemu-aarch64 with the aarch64 runtime and C example
  // the build wrote (build/aarch64/run_model), on the same random inputs as this machine's build.
  void aarch64TargetShowsSizeAndAgreementUnderQemu() {
    if (!m_window->inspection()) {  // run alone
      m_window->openModelFile(modelPath("ops/conv_bn_relu.pt"));
      QTRY_VERIFY_WITH_TIMEOUT(!m_window->isBusy() && m_window->inspection(), kJobTimeoutMs);
    }
    m_window->setTarget(QStringLiteral("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1"));
    m_window->compile();
    QTRY_VERIFY_WITH_TIMEOUT(!m_window->isBusy(), kJobTimeoutMs);
    QVERIFY(m_window->errorBox() == nullptr);
    QString status = m_window->statusText();
    QVERIFY2(status.contains(QStringLiteral("Export-only")) && status.contains(QStringLiteral("kernels.so")),
             qPrintable(status));
    QVERIFY2(status.contains(QStringLiteral("In qemu-aarch64 its outputs lie within")), qPrintable(status));
    // The agreement itself: within 1e-4 of the output scale (the status line's two figures).
    QRegularExpressionMatch m =
        QRegularExpression(QStringLiteral("lie within (\\S+) of this machine's build \\(output scale (\\S+)\\)")).match(status);
    QVERIFY2(m.hasMatch(), qPrintable(status));
    QVERIFY2(m.captured(1).toDouble() <= 1e-4 * m.captured(2).toDouble(), qPrintable(status));
    m_window->setTarget(QStringLiteral("llvm"));
  }

  void profileTableMatchesResult() {
    m_window->profile();
    QTRY_VERIFY_WITH_TIMEOUT(!m_window->isBusy() && m_window->lastProfile(), kJobTimeoutMs);
    const app::ProfileResult& result = *m_window->lastProfile();
    ProfileTableModel* model = m_window->profileView()->model();
    QCOMPARE(model->rowCount(), static_cast<int>(result.profile.ops.size()));
    for (int row = 0; row < model->rowCount(); ++row) {
      const profiler::OpRecord& op = result.profile.ops[row];
      QCOMPARE(model->index(row, ProfileTableModel::Index).data(ProfileTableModel::CallRole).toInt(), op.index);
      QCOMPARE(model->index(row, ProfileTableModel::Kernel).data().toString(), QString::fromStdString(op.kernel));
      QCOMPARE(model->index(row, ProfileTableModel::Time).data(ProfileTableModel::SortRole).toDouble(), op.timeUs);
      QCOMPARE(model->index(row, ProfileTableModel::Share).data(ProfileTableModel::SortRole).toDouble(), op.percent);
    }
    // The table behind the sort/filter proxy shows the same rows.
    QCOMPARE(m_window->profileView()->proxy()->rowCount(), model->rowCount());
    QVERIFY(m_window->profileView()->chartBarCount() >= 1);
    QVERIFY(result.stored.buildId > 0);
    // The Roofline view: the ceilings measured (or reused) for the profile's threads, one dot
    // per call with FLOPs, and a click on one selects that call in the Profile view.
    QVERIFY(result.ceilings.has_value());
    QCOMPARE(result.ceilings->threads, result.context.threads);
    QCOMPARE(result.roofline.size(), result.profile.ops.size());
    int withFlops = 0;
    for (const auto& op : result.profile.ops) withFlops += op.flops > 0 && op.bytes > 0 && op.timeUs > 0;
    RooflineView* roofline = m_window->rooflineView();
    QVERIFY(withFlops > 0);
    QCOMPARE(roofline->pointCount(), withFlops);
    int dots = 0;
    for (QScatterSeries* series : roofline->callSeries()) dots += series->count();
    QCOMPARE(dots, withFlops);
    const profiler::RooflinePoint& picked = roofline->points().back();
    emit roofline->callSeries().front()->clicked(QPointF(picked.intensity, picked.gflops));
    QCOMPARE(roofline->selectedCall(), picked.call);
    QModelIndexList selected = m_window->profileView()->table()->selectionModel()->selectedRows();
    QCOMPARE(selected.size(), 1);
    QCOMPARE(selected[0].data(ProfileTableModel::CallRole).toInt(), picked.call);
  }

  // Profiles run in a measuring worker: a kernel that crashes there (KILN_FAULT, honoured by the
  // worker only) fails the job with its reason, and the window profiles again afterwards.
  void isolatedProfileSurvivesCrashingKernel() {
    int64_t before = m_window->lastProfile() ? m_window->lastProfile()->stored.buildId : 0;
    qputenv("KILN_FAULT", "crash:conv");
    m_window->profile();
    QTRY_VERIFY_WITH_TIMEOUT(m_window->errorBox() != nullptr, kJobTimeoutMs);
    qunsetenv("KILN_FAULT");
    QMessageBox* box = m_window->errorBox();
    QString shown = box->text() + QLatin1Char('\n') + box->informativeText();
    QVERIFY2(shown.contains(QStringLiteral("kernel crashed (signal 11) in")), qPrintable(shown));
    box->close();
    QTRY_VERIFY(m_window->errorBox() == nullptr);
    QTRY_VERIFY_WITH_TIMEOUT(!m_window->isBusy(), kJobTimeoutMs);
    QVERIFY(m_window->isVisible());
    m_window->profile();
    QTRY_VERIFY_WITH_TIMEOUT(!m_window->isBusy() && m_window->lastProfile() &&
                                 m_window->lastProfile()->stored.buildId > before,
                             kJobTimeoutMs);
    QVERIFY(m_window->errorBox() == nullptr);
  }

  // Cancel while the profile's worker hangs in a kernel (KILN_FAULT=hang:...): the worker is
  // killed and reaped within seconds (not at its 30 s limit), the job ends as cancelled without
  // an error, and the next profile works.
  void cancelKillsTheProfileWorker() {
    QVERIFY2(measureWorkers().isEmpty(), qPrintable(describeWorkers(measureWorkers())));
    int64_t before = m_window->lastProfile() ? m_window->lastProfile()->stored.buildId : 0;
    qputenv("KILN_FAULT", "hang:conv");
    m_window->profile();
    QList<qint64> workers;
    QTRY_VERIFY_WITH_TIMEOUT(!(workers = measureWorkers()).isEmpty(), kJobTimeoutMs);
    qunsetenv("KILN_FAULT");  // read by the worker at its start
    QTest::qWait(1000);       // into the hanging kernel (or still compiling: either must stop)
    QVERIFY(m_window->isBusy());
    cancelAndExpectWorkersGone(workers, "profile");
    if (QTest::currentTestFailed()) return;
    m_window->profile();
    QTRY_VERIFY_WITH_TIMEOUT(!m_window->isBusy() && m_window->lastProfile() &&
                                 m_window->lastProfile()->stored.buildId > before,
                             kJobTimeoutMs);
    QVERIFY(m_window->errorBox() == nullptr);
    QVERIFY2(measureWorkers().isEmpty(), qPrintable(describeWorkers(measureWorkers())));
  }

  // Cancel while a compare's Kiln worker hangs in a kernel (every backend has a worker process of
  // its own): the workers are killed and reaped within seconds, the job ends as cancelled without
  // an error and adds no bar, and the next compare completes with its Kiln row.
  void cancelKillsTheCompareWorker() {
    QVERIFY2(measureWorkers().isEmpty(), qPrintable(describeWorkers(measureWorkers())));
    m_window->compareView()->setIncludeTorchCompile(false);  // no Python worker
    JobTracker* compare = m_window->tracker(QStringLiteral("compare"));
    QVERIFY(compare);
    QSignalSpy finished(compare, &JobTracker::finished);
    const size_t barsBefore = m_window->compareView()->bars().size();
    // The worker takes the environment it is spawned with: the fault is set from before the job
    // starts until that worker is seen, and no other process is started meanwhile.
    qputenv("KILN_FAULT", "hang:conv");
    m_window->compareBackends();
    QList<qint64> workers;
    QTRY_VERIFY_WITH_TIMEOUT(!(workers = measureWorkers("KILN_FAULT=hang:conv")).isEmpty(), kJobTimeoutMs);
    qunsetenv("KILN_FAULT");
    QTest::qWait(1000);  // into the hanging kernel (or still compiling: either must stop)
    QVERIFY(compare->isRunning());
    cancelAndExpectWorkersGone(workers, "compare");
    if (QTest::currentTestFailed()) return;
    QCOMPARE(finished.count(), 0);
    QCOMPARE(m_window->compareView()->bars().size(), barsBefore);

    m_window->compareBackends();
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1 && !m_window->isBusy(), kJobTimeoutMs);
    QVERIFY(m_window->errorBox() == nullptr);
    const CompareView::Bar* kiln = nullptr;
    const CompareView::Bar* eager = nullptr;
    for (const CompareView::Bar& bar : m_window->compareView()->bars()) {
      if (bar.backend == "kiln") kiln = &bar;
      if (bar.backend == "pytorch-eager") eager = &bar;
    }
    QVERIFY(kiln && eager);
    QVERIFY2(kiln->result.available, kiln->result.reason.c_str());
    QVERIFY(!kiln->result.timing.samplesMs.empty());
    QVERIFY(kiln->result.timing.medianMs > 0);
    QVERIFY2(kiln->result.maxAbsDiff < 1e-3, qPrintable(QString::number(kiln->result.maxAbsDiff)));  // vs eager
    QVERIFY2(measureWorkers().isEmpty(), qPrintable(describeWorkers(measureWorkers())));
  }

  // Closing a window (main.cpp's exit path too: closeEvent and cancelJobs) kills its workers.
  void closingTheWindowLeavesNoWorker() {
    WorkbenchOptions o;
    o.dbPath = m_dir.filePath(QStringLiteral("close.db"));
    o.modelsDir = QStringLiteral(KILN_MODELS_DIR);
    o.firstStartDialog = false;
    o.persistSettings = false;
    auto window = std::make_unique<MainWindow>(o);
    window->setThreads(1);
    window->show();
    window->openModelFile(modelPath("ops/conv_bn_relu.pt"));
    QTRY_VERIFY_WITH_TIMEOUT(!window->isBusy() && window->inspection(), kJobTimeoutMs);
    qputenv("KILN_FAULT", "hang:conv");
    window->profile();
    QTRY_VERIFY_WITH_TIMEOUT(!measureWorkers().isEmpty(), kJobTimeoutMs);
    qunsetenv("KILN_FAULT");
    QVERIFY(window->close());
    expectWorkersGone("close");
    if (QTest::currentTestFailed()) return;
    waitForAllJobs(30000);
    window.reset();
    QVERIFY2(measureWorkers().isEmpty(), qPrintable(describeWorkers(measureWorkers())));
  }

  // A sweep cancelled while a point's worker hangs (after at least its first point was stored)
  // loses only that point: the worker is killed, the stored points stay, and Resume in the sweep
  // panel measures only the missing points into the same stored sweep.
  void resumeFinishesACancelledSweep() {
    const std::string db = m_window->dbPath().toStdString();
    app::StoreOptions store;
    store.dbPath = db;
    const std::string path = m_window->modelPath().toStdString();
    m_window->sweepView()->setBatches({1, 2, 3, 4});
    m_window->sweepView()->setBackends({"kiln"});
    JobTracker* sweep = m_window->tracker(QStringLiteral("sweep"));
    QVERIFY(sweep);
    // Batch 1 is stored before the sweep reports batch 2; the workers started from then on hang
    // in a kernel. The variable exists beforehand (matching no kernel), so the change replaces
    // one value while a worker thread may be starting a process, and never reallocates environ.
    qputenv("KILN_FAULT", "hang:no-such-kernel");
    QMetaObject::Connection watch =
        connect(sweep, &JobTracker::progressed, this, [](quint64, const QString& text, double) {
          if (text.contains(QStringLiteral("batch 2:"))) qputenv("KILN_FAULT", "hang:conv");
        });
    m_window->sweep();
    QTRY_VERIFY_WITH_TIMEOUT(!measureWorkers("KILN_FAULT=hang:conv").isEmpty(), kJobTimeoutMs);
    disconnect(watch);
    qunsetenv("KILN_FAULT");
    QTest::qWait(500);
    QVERIFY(m_window->isBusy());
    m_window->cancelJobs();  // the hung worker of the point in flight is killed
    QCOMPARE(m_window->statusText(), QStringLiteral("Cancelled"));
    expectWorkersGone("sweep");
    if (QTest::currentTestFailed()) return;
    waitForAllJobs(60000);  // the abandoned sweep has returned: nothing more is filed
    QTRY_VERIFY_WITH_TIMEOUT(!m_window->isBusy() && m_window->sweepView()->canResume(), kJobTimeoutMs);
    QVERIFY(m_window->errorBox() == nullptr);

    auto found = app::unfinishedSweep(path, store);
    QVERIFY(found && found.value());
    const app::UnfinishedSweep interrupted = *found.value();
    QCOMPARE(interrupted.totalPoints, 4);
    QVERIFY2(interrupted.storedPoints >= 1 && interrupted.storedPoints < 4,
             qPrintable(QString::number(interrupted.storedPoints)));
    QCOMPARE(m_window->unfinishedSweep()->runId, interrupted.runId);
    std::map<int64_t, double> before = storedSweepPoints(db, interrupted.sessionId, interrupted.runId);
    QCOMPARE(static_cast<int>(before.size()), interrupted.storedPoints);

    m_window->showTab(MainWindow::SweepTab);
    if (QByteArray dir = qgetenv("KILN_GUI_SCREENSHOT_DIR"); !dir.isEmpty())
      QVERIFY(m_window->grab().save(
          QDir(QString::fromLocal8Bit(dir)).filePath(QStringLiteral("sweep-resume.png"))));

    // Settings edited since do not matter: Resume continues the interrupted sweep with its own.
    m_window->sweepView()->setBatches({8});
    QSignalSpy finished(sweep, &JobTracker::finished);
    m_window->sweepView()->resumeButton()->click();
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1 && !m_window->isBusy(), kJobTimeoutMs);
    QVERIFY(m_window->errorBox() == nullptr);
    const app::SweepResult& resumed = *m_window->lastSweep();
    QCOMPARE(resumed.stored.runId, interrupted.runId);
    QCOMPARE(resumed.resumedPoints, interrupted.storedPoints);
    QCOMPARE(resumed.points.size(), size_t(4));
    for (const auto& m : resumed.points) QVERIFY2(m.ok(), m.reason.c_str());
    std::map<int64_t, double> after = storedSweepPoints(db, interrupted.sessionId, interrupted.runId);
    QCOMPARE(after.size(), size_t(4));  // the missing points only: no point measured twice
    for (const auto& [id, median] : before) {
      QVERIFY(after.count(id));
      QCOMPARE(after.at(id), median);
    }
    QVERIFY(m_window->statusText().contains(QStringLiteral("resumed")));
    QVERIFY(!m_window->sweepView()->canResume());
    QVERIFY(!m_window->unfinishedSweep());
    QCOMPARE(m_window->sweepView()->latencyPoints("kiln").size(), 4);
  }

  void sweepChartHoldsPoints() {
    m_window->sweepView()->setBatches({1, 2});
    m_window->sweepView()->setBackends({"kiln"});
    m_window->sweep();
    QTRY_VERIFY_WITH_TIMEOUT(!m_window->isBusy() && m_window->lastSweep(), kJobTimeoutMs);
    const app::SweepResult& sweep = *m_window->lastSweep();
    QList<QPointF> latency = m_window->sweepView()->latencyPoints("kiln");
    QList<QPointF> throughput = m_window->sweepView()->throughputPoints("kiln");
    int ok = 0;
    for (const auto& m : sweep.points) {
      if (m.backend != "kiln" || !m.ok()) continue;
      QVERIFY(ok < latency.size());
      QCOMPARE(latency[ok].x(), static_cast<double>(m.batch));
      QCOMPARE(latency[ok].y(), m.timing.medianMs);
      QCOMPARE(throughput[ok].y(), m.throughput());
      ++ok;
    }
    QCOMPARE(ok, 2);
    QCOMPARE(latency.size(), 2);
    QVERIFY(m_window->sweepView()->latencyPoints("pytorch-eager").isEmpty());
  }

  void sessionsAndDiff() {
    m_window->setOptLevel(2);
    m_window->profile();
    QTRY_VERIFY_WITH_TIMEOUT(!m_window->isBusy(), kJobTimeoutMs);
    auto builds = m_window->lastTwoProfiledBuilds();
    QVERIFY(builds);
    m_window->refreshSessions();
    QTRY_VERIFY_WITH_TIMEOUT(!m_window->isBusy(), kJobTimeoutMs);
    QCOMPARE(m_window->sessionBrowser()->model()->rowCount(), 1);
    m_window->sessionBrowser()->selectBuilds({builds->first, builds->second});
    QCOMPARE(m_window->sessionBrowser()->selectedProfiledBuilds().size(), size_t(2));
    m_window->diffBuilds(builds->first, builds->second);
    QTRY_VERIFY_WITH_TIMEOUT(!m_window->isBusy(), kJobTimeoutMs);
    QVERIFY(m_window->diffView()->model()->rowCount() > 0);
    QCOMPARE(m_window->diffView()->model()->diff().buildA, builds->first);
    // Both builds on the roofline: an arrow per call of B whose output values A computes too.
    const app::BuildDiff& diff = m_window->diffView()->model()->diff();
    QVERIFY(diff.ceilingsB.has_value());
    RooflineView* roofline = m_window->rooflineView();
    QVERIFY(roofline->pointCount() > 0);
    QVERIFY(roofline->arrowCount() > 0);
    QVERIFY(roofline->arrowCount() <= roofline->pointCount());
    m_window->setOptLevel(3);
  }

  // The CLI and the workbench use one store at the same time (WAL and a busy timeout,
  // profiler/store.h): while `kiln tune` commits a record per candidate to the window's store,
  // the window profiles into it; neither fails, and both keep everything they reported.
  void sharesTheStoreWithARunningCli() {
    m_window->openModelFile(modelPath("ops/conv_bn_relu.pt"));
    QTRY_VERIFY_WITH_TIMEOUT(!m_window->isBusy() && m_window->inspection(), kJobTimeoutMs);
    const QString db = m_dir.filePath(QStringLiteral("kiln.db")), json = m_dir.filePath(QStringLiteral("tune.json"));
    auto storedProfiles = [&] {
      int n = 0;
      for (const auto& s : kiln::profiler::Store(db.toStdString()).listSessions()) n += s.profiles;
      return n;
    };
    const int profilesBefore = storedProfiles();
    QProcess cli;
    cli.setProgram(QCoreApplication::applicationDirPath() + QStringLiteral("/../app/kiln"));
    // Its convolution only: the layout transforms at its edges are nests residual_block shares.
    cli.setArguments({QStringLiteral("tune"), modelPath("ops/conv_bn_relu.pt"), QStringLiteral("--tasks"),
                      QStringLiteral("conv2d_nchwc"), QStringLiteral("--tuner"), QStringLiteral("random"),
                      QStringLiteral("--trials"), QStringLiteral("16"), QStringLiteral("--batch-size"),
                      QStringLiteral("2"), QStringLiteral("--threads"), QStringLiteral("1"),
                      QStringLiteral("--no-compare"), QStringLiteral("--db"), db, QStringLiteral("--json"),
                      json});
    cli.start();
    QVERIFY2(cli.waitForStarted(), qPrintable(cli.errorString()));
    int profiles = 0;
    do {  // at least one profile, however fast the tuning run is
      m_window->profile();
      QTRY_VERIFY_WITH_TIMEOUT(!m_window->isBusy(), kJobTimeoutMs);
      QVERIFY(m_window->errorBox() == nullptr);
      ++profiles;
    } while (cli.state() != QProcess::NotRunning && profiles < 6);
    qInfo("%d profile(s) while the CLI tuned (%s)", profiles,
          cli.state() == QProcess::NotRunning ? "it had finished" : "still tuning");
    if (cli.state() != QProcess::NotRunning) QVERIFY(cli.waitForFinished(kJobTimeoutMs));
    const QByteArray err = cli.readAllStandardError();
    QCOMPARE(cli.exitStatus(), QProcess::NormalExit);
    QVERIFY2(cli.exitCode() == 0 && !err.contains("locked"), err.constData());

    QFile out(json);
    QVERIFY(out.open(QIODevice::ReadOnly));
    const QJsonObject result = QJsonDocument::fromJson(out.readAll()).object();
    kiln::profiler::Store store(db.toStdString());
    int records = 0, measured = 0;  // the first tuning run on this store: nothing was skipped
    for (const QJsonValue& task : result[QStringLiteral("tasks")].toArray()) {
      records += static_cast<int>(store.tuningRecords(task[QStringLiteral("key")].toString().toStdString(),
                                                      result[QStringLiteral("target")].toString().toStdString())
                                      .size());
      measured += task[QStringLiteral("measured")].toInt();
      QCOMPARE(task[QStringLiteral("skipped")].toInt(), 0);
    }
    QVERIFY(measured > 0);
    QCOMPARE(records, measured + confirmedIn(result));
    QCOMPARE(storedProfiles(), profilesBefore + profiles);
  }

  // A short tuning run shows what it found: every task row done with its trials and GFLOP/s, the
  // records file holding the records the result line counts, and the end-to-end times (untuned →
  // tuned) in the view and in the status bar. residual_block: its convolution's shape was not
  // tuned before in this store (the CLI tuned conv_bn_relu's), so nothing is skipped.
  void tuneShowsTasksRecordsAndEndToEnd() {
    m_window->openModelFile(modelPath("ops/residual_block.pt"));
    QTRY_VERIFY_WITH_TIMEOUT(!m_window->isBusy() && m_window->inspection(), kJobTimeoutMs);
    m_window->tuningView()->setTrialsPerTask(2);
    m_window->tuningView()->setTimeLimit(0);  // none: the two trials per task bound the run
    JobTracker* tune = m_window->tracker(QStringLiteral("tune"));
    QVERIFY(tune);
    QSignalSpy finished(tune, &JobTracker::finished);
    m_window->tune(false);
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1 && !m_window->isBusy(), kJobTimeoutMs);
    QVERIFY(m_window->errorBox() == nullptr);
    QVERIFY2(m_window->statusText().startsWith(QStringLiteral("Tuning done: end to end ")),
             qPrintable(m_window->statusText()));

    TuneTaskModel* tasks = m_window->tuningView()->model();
    QVERIFY(tasks->rowCount() >= 1);
    for (int row = 0; row < tasks->rowCount(); ++row) {
      auto cell = [&](int column) { return tasks->index(row, column).data().toString(); };
      const QString name = cell(TuneTaskModel::Task);
      QVERIFY(!name.isEmpty());
      QCOMPARE(cell(TuneTaskModel::Status), QStringLiteral("done"));
      QVERIFY2(cell(TuneTaskModel::Trials) == QStringLiteral("2 / 2"), qPrintable(name + ": " + cell(TuneTaskModel::Trials)));
      QVERIFY2(cell(TuneTaskModel::Best).toDouble() > 0, qPrintable(name + ": " + cell(TuneTaskModel::Best)));
      QVERIFY2(cell(TuneTaskModel::Default).toDouble() > 0, qPrintable(name + ": " + cell(TuneTaskModel::Default)));
      QVERIFY(!tasks->history(row).empty());
    }

    // "Done: 2 candidates measured in 3 s, 0 failed; 5 records (3 of them finalists timed again
    // side by side) written to PATH. End to end: 0.051 ms untuned → 0.049 ms tuned (1.04×)."
    QString message;
    for (const QLabel* label : m_window->tuningView()->findChildren<QLabel*>())
      if (label->text().startsWith(QStringLiteral("Done:"))) message = label->text();
    const QRegularExpressionMatch done =
        QRegularExpression(QStringLiteral("^Done: (\\d+) candidates measured in .*, \\d+ failed; (\\d+) records .* written to "
                                          "(.+)\\. End to end: .+ untuned → .+ tuned \\(.+×\\)\\.$"))
            .match(message);
    QVERIFY2(done.hasMatch(), qPrintable(message));
    QCOMPARE(done.captured(1).toInt(), 2 * tasks->rowCount());
    QCOMPARE(done.captured(3), m_window->tuningView()->recordsPath());
    QFile records(done.captured(3));
    QVERIFY2(records.open(QIODevice::ReadOnly), qPrintable(records.fileName()));
    int lines = 0;
    for (const QByteArray& line : records.readAll().split('\n')) {
      if (line.isEmpty()) continue;
      const QJsonObject record = QJsonDocument::fromJson(line).object();
      QVERIFY2(!record.value(QStringLiteral("key")).toString().isEmpty(), line.constData());
      ++lines;
    }
    QCOMPARE(lines, done.captured(2).toInt());
    QVERIFY(lines >= done.captured(1).toInt());
  }

  void staleCompileIsDropped() {
    JobTracker* compile = m_window->tracker(QStringLiteral("compile"));
    QVERIFY(compile);
    QSignalSpy stale(compile, &JobTracker::staleResultDropped);
    QSignalSpy finished(compile, &JobTracker::finished);
    m_window->compile();
    quint64 first = compile->currentJobId();
    m_window->compile();
    QVERIFY(compile->currentJobId() > first);
    QTRY_VERIFY_WITH_TIMEOUT(!m_window->isBusy() && stale.count() == 1, kJobTimeoutMs);
    QCOMPARE(stale.front().front().toULongLong(), first);
    QCOMPARE(finished.count(), 1);
  }

  void corruptFilesShowErrors_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<QString>("expected");
    QTest::newRow("truncated") << modelPath("bad/truncated.pt") << QStringLiteral("not a TorchScript archive");
    QTest::newRow("not a model") << modelPath("bad/not_a_model.pt") << QStringLiteral("not a TorchScript archive");
    QTest::newRow("unsupported op") << modelPath("bad/unsupported_op.pt") << QStringLiteral("aten::grid_sampler");
    QTest::newRow("missing") << m_dir.filePath(QStringLiteral("missing.pt")) << QStringLiteral("no such file");
  }

  void corruptFilesShowErrors() {
    QFETCH(QString, file);
    QFETCH(QString, expected);
    m_window->openModelFile(file);
    QTRY_VERIFY_WITH_TIMEOUT(m_window->errorBox() != nullptr, kJobTimeoutMs);
    QMessageBox* box = m_window->errorBox();
    QString shown = box->text() + QLatin1Char('\n') + box->informativeText();
    QVERIFY2(shown.contains(expected), qPrintable(shown));
    QVERIFY(box->isVisible());
    box->close();  // the dialog is auto-closed here, as a user would
    QTRY_VERIFY(m_window->errorBox() == nullptr);
    QTRY_VERIFY_WITH_TIMEOUT(!m_window->isBusy(), kJobTimeoutMs);
    QVERIFY(m_window->isVisible());
  }

  // Issue 7's classes of bad model files: one dialog whose message is the CLI's one line (no
  // newline), and the window stays usable.
  void badInputClassesShowOneLine_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<QString>("expected");
    QString empty = m_dir.filePath(QStringLiteral("empty.pt"));
    QFile(empty).open(QIODevice::WriteOnly);
    QTest::newRow("empty") << empty << QStringLiteral("empty file");
    QTest::newRow("data-dependent if") << modelPath("bad/control_flow_if.pt") << QStringLiteral("prim::If");
    QTest::newRow("data-dependent loop") << modelPath("bad/control_flow_loop.pt") << QStringLiteral("prim::Loop");
  }

  void badInputClassesShowOneLine() {
    QFETCH(QString, file);
    QFETCH(QString, expected);
    m_window->openModelFile(file);
    QTRY_VERIFY_WITH_TIMEOUT(m_window->errorBox() != nullptr, kJobTimeoutMs);
    QString shown = m_window->errorBox()->informativeText();
    QVERIFY2(shown.contains(expected) && !shown.contains(QLatin1Char('\n')), qPrintable(shown));
    m_window->errorBox()->close();
    QTRY_VERIFY_WITH_TIMEOUT(!m_window->isBusy(), kJobTimeoutMs);
    m_window->openModelFile(modelPath("ops/relu.pt"));  // still usable
    QTRY_VERIFY_WITH_TIMEOUT(!m_window->isBusy(), kJobTimeoutMs);
    QVERIFY(m_window->errorBox() == nullptr);
  }

  // The doctor explains the file that failed to open: the unsupported operator is named.
  void doctorExplainsAFailedOpen() {
    m_window->openModelFile(modelPath("bad/unsupported_op.pt"));
    QTRY_VERIFY_WITH_TIMEOUT(m_window->errorBox() != nullptr, kJobTimeoutMs);
    m_window->errorBox()->close();
    QTRY_VERIFY_WITH_TIMEOUT(!m_window->isBusy(), kJobTimeoutMs);
    m_window->diagnose();
    QTRY_VERIFY_WITH_TIMEOUT(!m_window->isBusy(), kJobTimeoutMs);
    QVERIFY(m_window->errorBox() == nullptr);
    QCOMPARE(m_window->tabs()->currentWidget(), static_cast<QWidget*>(m_window->doctorView()));
    QVERIFY(m_window->doctorView()->kindRows() >= 2);
    QVERIFY2(m_window->doctorView()->detailsText().contains(QStringLiteral("aten::grid_sampler")),
             qPrintable(m_window->doctorView()->detailsText()));
  }

  void reopenAfterErrors() {
    m_window->openModelFile(modelPath("ops/classifier_head.pt"));
    QTRY_VERIFY_WITH_TIMEOUT(!m_window->isBusy() && m_window->inspection(), kJobTimeoutMs);
    QVERIFY(m_window->graphView()->nodeCount() > 0);
  }

 private:
  /// Records a tuning run's confirmation rounds wrote (its --json result).
  static int confirmedIn(const QJsonObject& result) {
    int n = 0;
    for (const QJsonValue& task : result[QStringLiteral("tasks")].toArray()) n += task[QStringLiteral("confirmed")].toInt();
    return n;
  }

  /// Cancels the running jobs as Esc and the status bar's Cancel button do, and expects the
  /// status "Cancelled", the measuring `workers` killed and reaped (expectWorkersGone), and no
  /// error once the abandoned job has returned (its result is dropped).
  void cancelAndExpectWorkersGone(const QList<qint64>& workers, const char* job) {
    m_window->cancelJobs();
    QVERIFY(!m_window->isBusy());
    QCOMPARE(m_window->statusText(), QStringLiteral("Cancelled"));
    expectWorkersGone(job);
    if (QTest::currentTestFailed()) return;
    for (qint64 pid : workers) QVERIFY(!QFileInfo::exists(QStringLiteral("/proc/%1").arg(pid)));  // reaped
    waitForAllJobs(30000);
    QTest::qWait(200);
    QVERIFY(m_window->errorBox() == nullptr);
    QCOMPARE(m_window->statusText(), QStringLiteral("Cancelled"));
  }

  /// Every measuring worker killed within 5 s of a cancel or close (not at their 30 s time limit),
  /// and reaped. A killed process's teardown may take long on a loaded host (a thread of a worker
  /// still loading torch waits for the disk before it can exit): reaping may take up to 60 s.
  static void expectWorkersGone(const char* job) {
    QElapsedTimer clock;
    clock.start();
    QTRY_VERIFY2_WITH_TIMEOUT(measureWorkers({}, true).isEmpty(), qPrintable(describeWorkers(measureWorkers())), 5000);
    const qint64 killedMs = clock.elapsed();
    QTRY_VERIFY2_WITH_TIMEOUT(measureWorkers().isEmpty(), qPrintable(describeWorkers(measureWorkers())), 60000);
    qInfo("%s worker killed %lld ms and gone %lld ms after cancel", job, static_cast<long long>(killedMs),
          static_cast<long long>(clock.elapsed()));
  }

  QTemporaryDir m_dir;
  std::unique_ptr<MainWindow> m_window;
};

QTEST_MAIN(WindowTest)
#include "window_test.moc"
