// The Workbench's Qt-free-of-widgets layer: the item models (checked with
// QAbstractItemModelTester, filled from real façade results), the job tracker's stale-result
// logic, and the inspection façade it relies on (app/inspect.h).
#include <QAbstractItemModelTester>
#include <QBrush>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <set>
#include <thread>

#include "app/facade.h"
#include "app/inspect.h"
#include "app/measure.h"
#include "app/model_text.h"
#include "app/gui/compare_model.h"
#include "app/gui/diff_model.h"
#include "app/gui/format.h"
#include "app/gui/job_runner.h"
#include "app/gui/profile_model.h"
#include "app/gui/session_model.h"
#include "app/gui/sweep_model.h"
#include "app/gui/tune_model.h"
#include "tests/gui/gui_test_support.h"

using namespace kiln;
using namespace kiln::gui;
using namespace kiln::testing_support;

namespace {

bool isNestedCall(const app::GraphNode& n) { return n.kind == app::GraphNodeKind::Call && n.region >= 0; }

/// What every description with regions must hold: each region hangs off an if/loop call (listed
/// in its `regions`) and takes its inputs from that call; edges stay inside one region; every
/// region output is computed inside it (a region returning a constant or its input copies it);
/// calls inside regions are numbered after the top-level ones in node order (the profile's
/// numbering) and run kernels the build has.
void checkRegions(const app::Inspection& i) {
  const app::GraphDescription& g = i.graph;
  for (int r = 0; r < static_cast<int>(g.regions.size()); ++r) {
    const app::GraphRegion& region = g.regions[r];
    QVERIFY(region.node >= 0 && region.node < static_cast<int>(g.nodes.size()));
    const app::GraphNode& control = g.nodes[region.node];
    QVERIFY(control.kind == app::GraphNodeKind::Call && control.kernel.empty());
    QVERIFY(std::count(control.regions.begin(), control.regions.end(), r) == 1);
    QCOMPARE(region.parent, control.region);
    QString suffix = QStringLiteral(" · ") + QString::fromStdString(region.name);
    QVERIFY2(QString::fromStdString(region.label).endsWith(suffix), region.label.c_str());
  }
  auto inside = [&](int node, int region) { return g.nodes[node].region == region; };
  for (const app::GraphEdge& e : g.edges) {
    int region = g.nodes[e.to].region;
    bool binds = region >= 0 && g.regions[region].node == e.from && g.nodes[e.to].kind == app::GraphNodeKind::Input;
    QVERIFY2(binds || inside(e.from, region), qPrintable(QStringLiteral("edge %1 -> %2").arg(e.from).arg(e.to)));
  }
  int nextCall = i.numCalls;
  for (int n = 0; n < static_cast<int>(g.nodes.size()); ++n) {
    const app::GraphNode& node = g.nodes[n];
    auto edgeInto = [&](auto pred) {
      return std::any_of(g.edges.begin(), g.edges.end(),
                         [&](const app::GraphEdge& e) { return e.to == n && pred(e); });
    };
    if (node.region >= 0 && node.kind == app::GraphNodeKind::Input)
      QVERIFY(edgeInto([&](const app::GraphEdge& e) { return e.from == g.regions[node.region].node; }));
    if (node.region >= 0 && node.kind == app::GraphNodeKind::Output)
      QVERIFY(edgeInto([&](const app::GraphEdge& e) { return inside(e.from, node.region); }));
    if (!isNestedCall(node)) continue;
    QCOMPARE(node.call, nextCall++);
    QCOMPARE(g.nodeOfCall(node.call), n);
    if (!node.regions.empty()) continue;  // an if/loop inside a region: no kernel of its own
    QVERIFY2(i.loopIrByKernel.count(node.kernel), node.kernel.c_str());
  }
}

}  // namespace

class ModelsTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    m_db = m_dir.filePath(QStringLiteral("kiln.db")).toStdString();
    // Two profiled builds of one small model: real data for the profile, session and diff models.
    for (int level : {2, 3}) {
      app::ProfileOptions o;
      o.build.optLevel = level;
      o.build.threads = 1;
      o.repeat = 3;
      o.warmup = 1;
      o.minRepeatMs = 0;
      o.store.dbPath = m_db;
      auto r = app::profile(modelPath("ops/conv_bn_relu.pt").toStdString(), o);
      QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
      m_profiles.push_back(r.value());
    }
  }

  void profileModel() {
    ProfileTableModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    const auto& ops = m_profiles.back().profile.ops;
    model.setOps(ops);
    QCOMPARE(model.rowCount(), static_cast<int>(ops.size()));
    for (int row = 0; row < model.rowCount(); ++row) {
      QCOMPARE(model.index(row, ProfileTableModel::Index).data(ProfileTableModel::CallRole).toInt(), ops[row].index);
      QCOMPARE(model.index(row, ProfileTableModel::Time).data(ProfileTableModel::SortRole).toDouble(), ops[row].timeUs);
      QVERIFY(!model.index(row, ProfileTableModel::Operators).data().toString().isEmpty());
    }
    ProfileFilterModel proxy;
    QAbstractItemModelTester proxyTester(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
    proxy.setSourceModel(&model);
    proxy.sort(ProfileTableModel::Time, Qt::DescendingOrder);
    for (int row = 1; row < proxy.rowCount(); ++row)
      QVERIFY(proxy.index(row - 1, ProfileTableModel::Time).data(ProfileTableModel::SortRole).toDouble() >=
              proxy.index(row, ProfileTableModel::Time).data(ProfileTableModel::SortRole).toDouble());
    proxy.setFilterRegularExpression(QRegularExpression(QStringLiteral("no-such-operator")));
    QCOMPARE(proxy.rowCount(), 0);
    proxy.setFilterRegularExpression(QRegularExpression(QStringLiteral("conv"), QRegularExpression::CaseInsensitiveOption));
    QVERIFY(proxy.rowCount() >= 1);
    model.clear();
    QCOMPARE(proxy.rowCount(), 0);
  }

  void sessionModel() {
    auto list = app::listSessions(m_db);
    QVERIFY(list.ok());
    std::vector<profiler::SessionData> sessions;
    for (const auto& s : list.value()) sessions.push_back(app::loadSession(m_db, s.id).value());
    SessionTreeModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setSessions(sessions);
    QCOMPARE(model.rowCount(), 1);
    QModelIndex session = model.index(0, 0);
    QCOMPARE(model.rowCount(session), 2);  // two profile runs
    std::set<qlonglong> builds;
    for (int r = 0; r < 2; ++r) {
      QModelIndex run = model.index(r, 0, session);
      QCOMPARE(run.data(SessionTreeModel::KindRole).toString(), QStringLiteral("profile"));
      QVERIFY(run.data(SessionTreeModel::HasProfileRole).toBool());
      builds.insert(run.data(SessionTreeModel::BuildIdRole).toLongLong());
      QCOMPARE(model.parent(run), session);
    }
    QCOMPARE(builds, (std::set<qlonglong>{m_profiles[0].stored.buildId, m_profiles[1].stored.buildId}));
    model.setSessions({});
    QCOMPARE(model.rowCount(), 0);
  }

  void diffModel() {
    auto diff = app::diffBuilds(m_db, m_profiles[0].stored.buildId, m_profiles[1].stored.buildId);
    QVERIFY2(diff.ok(), diff.ok() ? "" : diff.error().message.c_str());
    BuildDiffModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setDiff(diff.value());
    QCOMPARE(model.rowCount(), static_cast<int>(diff.value().rows.size()));
    QVERIFY(model.rowCount() > 0);
    QVERIFY(model.headerData(BuildDiffModel::OpsA, Qt::Horizontal, Qt::DisplayRole).toString().contains(
        QString::number(m_profiles[0].stored.buildId)));
  }

  void tuneModel() {
    TuneTaskModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    app::TuneTaskInfo a{"fused_a", "key-a", "conv2d", 2, 1e6, 10};
    app::TuneTaskInfo b{"fused_b", "key-b", "dense", 1, 1e5, 4};
    model.setTasks({a, b});
    QCOMPARE(model.rowCount(), 2);
    QSignalSpy history(&model, &TuneTaskModel::historyChanged);
    app::TuneProgress p;
    p.numTasks = 2;
    p.taskName = "fused_b";
    p.taskIndex = 1;
    p.taskTrials = 3;
    p.taskBudget = 8;
    p.bestGflops = 12.5;
    p.defaultGflops = 10;
    model.applyProgress(p);
    QCOMPARE(history.count(), 1);
    QCOMPARE(model.history(1).size(), size_t(1));
    QCOMPARE(model.index(0, TuneTaskModel::Status).data().toString(), QStringLiteral("done"));  // earlier task
    QCOMPARE(model.index(1, TuneTaskModel::Status).data().toString(), QStringLiteral("tuning"));
    QCOMPARE(model.index(1, TuneTaskModel::Speedup).data().toString(), QStringLiteral("1.25×"));
    p.taskName = "fused_c";  // a task the list did not know is appended
    model.applyProgress(p);
    QCOMPARE(model.rowCount(), 3);
  }

  // The compare table: spread, per-process medians, a flagged row, NaN shown as NaN, and why a
  // backend did not run (its status, not only "unavailable").
  void compareTableModel() {
    CompareTableModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    app::BackendResult eager = ranBackend("pytorch-eager", {38, 39, 40, 41, 60}, {39.5, 40.5}, false);
    app::BackendResult kiln = ranBackend("kiln", {9, 9.4, 10, 12.4, 13.1}, {9.4, 13.1}, true, NAN);
    app::BackendResult timeout = failedBackend("torch-compile", "timeout", "timed out after 30 s");
    app::BackendResult crashed = failedBackend("kiln-untuned", "failed", "kernel crashed (signal 11) in fused_conv2d_3");
    crashed.kernelFault = true;
    app::BackendResult missing = failedBackend("torchscript-optimized", "unavailable", "no such thing");
    model.setRows({{QStringLiteral("PyTorch eager"), "pytorch-eager", eager},
                   {QStringLiteral("Kiln -O3"), "kiln", kiln},
                   {QStringLiteral("torch.compile"), "torch-compile", timeout},
                   {QStringLiteral("Kiln untuned"), "kiln-untuned", crashed},
                   {QStringLiteral("TorchScript optimized"), "torchscript-optimized", missing}});
    QCOMPARE(model.rowCount(), 5);
    auto text = [&](int row, int column) { return model.index(row, column).data().toString(); };
    QCOMPARE(text(0, CompareTableModel::Median), QStringLiteral("40.0 ms"));
    QCOMPARE(text(0, CompareTableModel::Iqr), QStringLiteral("39.0–41.0 ms"));
    QCOMPARE(text(0, CompareTableModel::MinMax), QStringLiteral("38.0–60.0 ms"));
    QCOMPARE(text(0, CompareTableModel::Processes), QStringLiteral("39.5 / 40.5 ms"));
    QCOMPARE(text(0, CompareTableModel::MaxDiff), QStringLiteral("(reference)"));
    QVERIFY(text(0, CompareTableModel::Note).isEmpty());
    QVERIFY(!model.index(0, 0).data(CompareTableModel::DisagreeRole).toBool());

    QCOMPARE(text(1, CompareTableModel::Backend), QStringLiteral("⚠ Kiln -O3"));
    QCOMPARE(text(1, CompareTableModel::MaxDiff), QStringLiteral("NaN"));  // not 0
    QCOMPARE(text(1, CompareTableModel::Processes), QStringLiteral("9.40 / 13.1 ms"));
    QCOMPARE(text(1, CompareTableModel::Note), QStringLiteral("⚠ processes disagree: 9.40 / 13.1 ms"));
    QCOMPARE(text(1, CompareTableModel::Speedup), QStringLiteral("4.00×"));
    QVERIFY(model.index(1, 0).data(CompareTableModel::DisagreeRole).toBool());
    QVERIFY(model.index(1, CompareTableModel::Note).data(Qt::BackgroundRole).isValid());  // tinted
    QString tip = model.index(1, 0).data(Qt::ToolTipRole).toString();
    QVERIFY2(tip.contains(QStringLiteral("IQR 9.40–12.4 ms")) && tip.contains(QStringLiteral("min–max 9.00–13.1 ms")) &&
                 tip.contains(QStringLiteral("disagree by 39 %")) && tip.contains(QStringLiteral("vs eager: NaN")),
             qPrintable(tip));

    QCOMPARE(text(2, CompareTableModel::Note), QStringLiteral("timeout: timed out after 30 s"));
    QCOMPARE(text(3, CompareTableModel::Note),
             QStringLiteral("failed (kernel fault): kernel crashed (signal 11) in fused_conv2d_3"));
    QCOMPARE(text(4, CompareTableModel::Note), QStringLiteral("unavailable: no such thing"));
    QVERIFY(text(2, CompareTableModel::Median).isEmpty());
    QCOMPARE(model.index(2, 0).data(CompareTableModel::StatusRole).toString(), QStringLiteral("timeout"));
    QVERIFY(model.index(2, 0).data(Qt::ForegroundRole).value<QBrush>().color() !=
            model.index(4, 0).data(Qt::ForegroundRole).value<QBrush>().color());  // failed is not just grey

    // Without eager's outputs, a NaN says nothing: no reference.
    model.setRows({{QStringLiteral("Kiln -O3"), "kiln", kiln}, {QStringLiteral("PyTorch eager"), "pytorch-eager",
                                                                 failedBackend("pytorch-eager", "failed", "boom")}});
    QCOMPARE(text(0, CompareTableModel::MaxDiff), QStringLiteral("— (no reference)"));
    QVERIFY(text(0, CompareTableModel::Speedup).isEmpty());
    // A stored run's unchecked difference (< 0) and an infinite one.
    app::BackendResult unchecked = ranBackend("kiln", {1, 2, 3}, {}, false, -1);
    app::BackendResult shape = ranBackend("torchscript-optimized", {1, 2, 3}, {}, false, INFINITY);
    model.setRows({{QStringLiteral("PyTorch eager"), "pytorch-eager", eager},
                   {QStringLiteral("Kiln"), "kiln", unchecked},
                   {QStringLiteral("TorchScript optimized"), "torchscript-optimized", shape}});
    QCOMPARE(text(1, CompareTableModel::MaxDiff), QStringLiteral("—"));
    QCOMPARE(text(2, CompareTableModel::MaxDiff), QStringLiteral("∞"));
    QVERIFY(text(1, CompareTableModel::Processes).isEmpty());
    QVERIFY(!model.index(2, 0).data(CompareTableModel::DifferRole).toBool());  // a stored row without its scale

    // Outputs beyond their bound (1e-3 of eager's scale) are flagged: in the cell, the note, the tint
    // and the tooltip (as TorchScript-optimized on mobilenet_v3_small: 7.7 from eager's outputs);
    // 2e-4 is within.
    app::BackendResult wrong = ranBackend("torchscript-optimized", {1, 2, 3}, {}, false, 7.7);
    app::BackendResult close = ranBackend("kiln", {1, 2, 3}, {}, false, 2e-4);
    app::BackendResult nan = ranBackend("onnxruntime", {1, 2, 3}, {}, false, NAN);
    for (app::BackendResult* b : {&wrong, &close, &nan}) b->outputBound = 0.0066;  // 1e-3 of 6.6
    model.setRows({{QStringLiteral("PyTorch eager"), "pytorch-eager", eager},
                   {QStringLiteral("TorchScript optimized"), "torchscript-optimized", wrong},
                   {QStringLiteral("Kiln"), "kiln", close},
                   {QStringLiteral("ONNX Runtime"), "onnxruntime", nan}});
    QCOMPARE(text(1, CompareTableModel::MaxDiff), QStringLiteral("✗ 7.7"));
    QVERIFY(text(1, CompareTableModel::Speedup).isEmpty());  // no speed-up for another computation
    QVERIFY(!text(2, CompareTableModel::Speedup).isEmpty());
    QVERIFY(text(1, CompareTableModel::Note).startsWith(QStringLiteral("✗ outputs differ from eager's")));
    QVERIFY(model.index(1, 0).data(CompareTableModel::DifferRole).toBool());
    QVERIFY(model.index(1, CompareTableModel::MaxDiff).data(Qt::BackgroundRole).isValid());
    tip = model.index(1, 0).data(Qt::ToolTipRole).toString();
    QVERIFY2(tip.contains(QStringLiteral("bound 0.0066")), qPrintable(tip));
    QCOMPARE(text(2, CompareTableModel::MaxDiff), QStringLiteral("0.0002"));
    QVERIFY(text(2, CompareTableModel::Note).isEmpty());
    QVERIFY(!model.index(2, 0).data(CompareTableModel::DifferRole).toBool());
    QVERIFY(!model.index(2, CompareTableModel::MaxDiff).data(Qt::BackgroundRole).isValid());
    QCOMPARE(text(3, CompareTableModel::MaxDiff), QStringLiteral("✗ NaN"));
    model.clear();
    QCOMPARE(model.rowCount(), 0);
  }

  // The WebAssembly rows have labels and colours of their own, never eager's "(TorchScript)" (their
  // display names, "kiln-wasm (node)", differ from their ids too).
  void webBackendLabels() {
    app::BackendResult wasm = ranBackend("kiln-wasm", {30, 31, 32}, {}, false);
    app::BackendResult ortWeb = ranBackend("onnxruntime-web", {50, 51, 52}, {}, false);
    QCOMPARE(backendLabel(wasm), QStringLiteral("Kiln wasm (Node)"));
    QCOMPARE(backendLabel(ortWeb), QStringLiteral("ONNX Runtime Web (Node)"));
    QVERIFY(backendColor("kiln-wasm") != backendColor("kiln"));
    QVERIFY(backendColor("onnxruntime-web") != backendColor("onnxruntime"));
  }

  // The status line of an export-only build: size, then agreement where it ran, else why not.
  void crossTargetStatusLine() {
    app::CrossCheck c;
    c.moduleBytes = 3 << 20;
    c.kernelsFile = "kernels.wasm";
    c.kernelsBytes = 1 << 20;
    c.runner = "node";
    c.maxAbsDiff = 1.5e-5;
    c.outputScale = 3.47;
    QString ran = crossTargetStatus(c, QString());
    QVERIFY2(ran.startsWith(QStringLiteral("Export-only target")), qPrintable(ran));
    QVERIFY2(ran.contains(QStringLiteral("kernels.wasm")), qPrintable(ran));
    QVERIFY2(ran.contains(QStringLiteral("In node its outputs lie within 1.5e-05")), qPrintable(ran));
    QVERIFY2(ran.contains(QStringLiteral("output scale 3.47")), qPrintable(ran));
    c.runner.clear();
    c.note = "no emulator runs it from here";
    QString notRun = crossTargetStatus(c, QString());
    QVERIFY2(notRun.contains(QStringLiteral("Not run: no emulator runs it from here.")), qPrintable(notRun));
    QVERIFY2(!notRun.contains(QStringLiteral("lie within")), qPrintable(notRun));
    QString failed = crossTargetStatus(std::nullopt, QStringLiteral("node crashed"));
    QVERIFY2(failed.contains(QStringLiteral("could not be checked: node crashed")), qPrintable(failed));
  }

  // The sweep's points: a row per backend and batch, spread, flagged and failed points.
  void sweepPointModel() {
    SweepPointModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    app::SweepResult sweep;
    sweep.batches = {1, 4};
    sweep.backends = {"kiln", "pytorch-eager"};
    auto point = [](const std::string& backend, int64_t batch, std::vector<double> samples) {
      profiler::Measurement m;
      m.backend = backend;
      m.batch = batch;
      m.timing = profiler::timingFromSamples(std::move(samples));
      return m;
    };
    profiler::Measurement flagged = point("kiln", 4, {4, 4.2, 4.4, 5.6, 6});
    flagged.processMedianMs = {4.2, 5.6};
    flagged.processesDisagree = true;
    profiler::Measurement oom;
    oom.backend = "pytorch-eager";
    oom.batch = 4;
    oom.status = profiler::Status::OutOfMemory;
    oom.reason = "out of memory";
    sweep.points = {point("pytorch-eager", 1, {2, 2, 2}), point("kiln", 1, {1, 1.1, 1.2}), flagged, oom};
    model.setResult(sweep);
    QCOMPARE(model.rowCount(), 4);
    auto text = [&](int row, int column) { return model.index(row, column).data().toString(); };
    // by backend in the sweep's order, then batch
    QCOMPARE(model.index(0, 0).data(SweepPointModel::BackendRole).toString(), QStringLiteral("kiln"));
    QCOMPARE(model.index(1, 0).data(SweepPointModel::BatchRole).toLongLong(), 4);
    QCOMPARE(text(1, SweepPointModel::Backend), QStringLiteral("⚠ Kiln"));
    QCOMPARE(text(1, SweepPointModel::Iqr), QStringLiteral("4.20–5.60 ms"));
    QCOMPARE(text(1, SweepPointModel::MinMax), QStringLiteral("4.00–6.00 ms"));
    QCOMPARE(text(1, SweepPointModel::Note), QStringLiteral("⚠ processes disagree: 4.20 / 5.60 ms"));
    QVERIFY(model.index(1, 0).data(SweepPointModel::DisagreeRole).toBool());
    QVERIFY(!model.index(0, 0).data(SweepPointModel::DisagreeRole).toBool());
    QCOMPARE(text(3, SweepPointModel::Note), QStringLiteral("out-of-memory: out of memory"));
    QVERIFY(text(3, SweepPointModel::Median).isEmpty());
    QVERIFY(model.point("kiln", 4) && model.point("kiln", 4)->processesDisagree);
    QVERIFY(!model.point("kiln", 16));
    QVERIFY(SweepPointModel::toolTip(flagged).contains(QStringLiteral("IQR 4.20–5.60 ms")));
    model.clear();
    QCOMPARE(model.rowCount(), 0);
  }

  // A newer job makes an older one stale: its result is dropped by id, never shown.
  void staleJobResultIsDropped() {
    JobTracker tracker(QStringLiteral("test"));
    QSignalSpy stale(&tracker, &JobTracker::staleResultDropped);
    QSignalSpy finished(&tracker, &JobTracker::finished);
    auto release = std::make_shared<std::atomic<bool>>(false);
    std::vector<int> delivered;
    quint64 first = tracker.start(
        [release](const JobControl& control) {
          while (!release->load()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
          return control.cancelled() ? -1 : 1;  // cancelled: the newer job asked it to stop
        },
        [&delivered](int v) { delivered.push_back(v); });
    quint64 second = tracker.start([](const JobControl&) { return 2; }, [&delivered](int v) { delivered.push_back(v); });
    QVERIFY(second > first);
    QCOMPARE(tracker.currentJobId(), second);
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30000);
    QCOMPARE(delivered, std::vector<int>{2});
    release->store(true);
    QTRY_COMPARE_WITH_TIMEOUT(stale.count(), 1, 30000);
    QCOMPARE(stale.front().front().toULongLong(), first);
    QCOMPARE(delivered, std::vector<int>{2});
    QVERIFY(!tracker.isRunning());
  }

  void cancelDropsResultAndDestroyedTrackerIsSafe() {
    auto release = std::make_shared<std::atomic<bool>>(false);
    bool delivered = false;
    {
      JobTracker tracker(QStringLiteral("test"));
      QSignalSpy cancelled(&tracker, &JobTracker::cancelled);
      tracker.start(
          [release](const JobControl& control) {
            while (!release->load() && !control.cancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
            return 0;
          },
          [&delivered](int) { delivered = true; });
      QVERIFY(tracker.isRunning());
      tracker.cancel();
      QCOMPARE(cancelled.count(), 1);
      QVERIFY(!tracker.isRunning());
    }
    // The tracker is gone; the worker's queued result must find its QPointer null.
    release->store(true);
    waitForAllJobs();
    QCoreApplication::processEvents();
    QVERIFY(!delivered);
  }

  void progressOfCurrentJobOnly() {
    JobTracker tracker(QStringLiteral("test"));
    QSignalSpy progress(&tracker, &JobTracker::progressed);
    tracker.start(
        [](const JobControl& control) {
          auto fn = control.progressFn();
          fn("step 1");
          fn("step 2");
          return 0;
        },
        [](int) {});
    QTRY_VERIFY_WITH_TIMEOUT(!tracker.isRunning(), 30000);
    QCOMPARE(progress.count(), 2);
    QCOMPARE(progress.at(1).at(1).toString(), QStringLiteral("step 2"));
  }

  void inspectFacade() {
    auto model = app::openModel(modelPath("ops/conv_bn_relu.pt").toStdString());
    QVERIFY(model.ok());
    app::BuildOptions o;
    auto ins = app::inspect(model.value(), o);
    QVERIFY2(ins.ok(), ins.ok() ? "" : ins.error().message.c_str());
    const app::Inspection& i = ins.value();
    int calls = 0;
    for (const auto& n : i.graph.nodes) calls += n.kind == app::GraphNodeKind::Call;
    QCOMPARE(calls, i.numCalls);
    QVERIFY(!i.graph.edges.empty());
    QVERIFY(i.graph.nodes.front().kind == app::GraphNodeKind::Input);
    QVERIFY(i.graph.nodes.back().kind == app::GraphNodeKind::Output);
    const app::GraphNode& first = i.graph.nodes[i.graph.nodeOfCall(0)];
    QVERIFY(i.loopIrByKernel.count(first.kernel));
    auto code = app::kernelCode(i, first.kernel);
    QVERIFY2(code.ok(), code.ok() ? "" : code.error().message.c_str());
    QVERIFY(QString::fromStdString(code.value().llvmIr).contains(QStringLiteral("define")));
    QVERIFY(!code.value().assembly.empty());
    QVERIFY(!app::kernelCode(i, "no_such_kernel").ok());
    auto targets = app::targetChoices();
    QVERIFY(targets.size() >= 3);
    QVERIFY(targets.front().host && targets.front().runnable);
  }

  // The calls inside an if/loop call are described in its regions, with the profile's row
  // numbers: every row of a real profile, nested ones included, finds its node (heat colouring
  // and click-to-details rely on it), under the right top-level call and in the right region.
  void inspectDescribesRegions_data() {
    QTest::addColumn<QString>("model");
    QTest::addColumn<QStringList>("regions");
    QTest::newRow("loop_on_value") << modelPath("ops/loop_on_value.pt") << QStringList{QStringLiteral("body")};
    QTest::newRow("branch_on_value") << modelPath("ops/branch_on_value.pt")
                                     << QStringList{QStringLiteral("then"), QStringLiteral("else")};
  }
  void inspectDescribesRegions() {
    QFETCH(QString, model);
    QFETCH(QStringList, regions);
    auto opened = app::openModel(model.toStdString());
    QVERIFY2(opened.ok(), opened.ok() ? "" : opened.error().message.c_str());
    app::BuildOptions build;
    build.threads = 1;
    auto ins = app::inspect(opened.value(), build);
    QVERIFY2(ins.ok(), ins.ok() ? "" : ins.error().message.c_str());
    const app::Inspection& i = ins.value();
    const app::GraphDescription& g = i.graph;
    QStringList names;
    for (const auto& r : g.regions) {
      names << QString::fromStdString(r.name);
      QCOMPARE(r.parent, -1);
    }
    QCOMPARE(names, regions);
    checkRegions(i);
    if (QTest::currentTestFailed()) return;
    int topLevel = 0, nested = 0;
    for (const auto& n : g.nodes) {
      topLevel += n.kind == app::GraphNodeKind::Call && n.region < 0;
      nested += isNestedCall(n);
    }
    QCOMPARE(topLevel, i.numCalls);
    QVERIFY(nested >= static_cast<int>(regions.size()));
    std::set<std::string> kernels;
    for (const auto& n : g.nodes)
      if (isNestedCall(n) && !n.kernel.empty()) kernels.insert(n.kernel);
    for (const std::string& k : kernels) {
      auto code = app::kernelCode(i, k);
      QVERIFY2(code.ok() && !code.value().assembly.empty(), k.c_str());
    }

    auto profiled = app::profile(model.toStdString(), quickProfileOptions(build));
    QVERIFY2(profiled.ok(), profiled.ok() ? "" : profiled.error().message.c_str());
    int nestedRows = 0;
    for (const profiler::OpRecord& op : profiled.value().profile.ops) {
      int node = g.nodeOfCall(op.index);
      QVERIFY2(node >= 0, op.name.c_str());
      const app::GraphNode& n = g.nodes[node];
      QCOMPARE(n.key, op.key);
      QCOMPARE(n.kernel, op.kernel);
      if (op.parent < 0) {
        QCOMPARE(n.region, -1);
        continue;
      }
      ++nestedRows;
      int top = node;
      while (g.nodes[top].region >= 0) top = g.regions[g.nodes[top].region].node;
      QCOMPARE(g.nodes[top].call, op.parent);
      // The call's label says where it runs: "%x0.body | %less = less".
      std::string where = "." + g.regions[n.region].name + " | ";
      QVERIFY2(op.name.find(where) != std::string::npos, (op.name + " lacks " + where).c_str());
    }
    QCOMPARE(nestedRows, nested);
  }

  // A region inside a region (an if in a loop body) hangs off its if, inside the body; an else
  // region that returns its input copies it (input → copy → output).
  void inspectDescribesNestedRegions() {
    QString path = writeNestedControlFlow(m_dir.path());
    auto opened = app::openGraphText(path.toStdString());
    QVERIFY2(opened.ok(), opened.ok() ? "" : opened.error().message.c_str());
    auto ins = app::inspect(opened.value(), app::BuildOptions{});
    QVERIFY2(ins.ok(), ins.ok() ? "" : ins.error().message.c_str());
    const app::GraphDescription& g = ins.value().graph;
    checkRegions(ins.value());
    QCOMPARE(g.regions.size(), size_t(3));
    QCOMPARE(g.regions[0].name, std::string("body"));
    QCOMPARE(g.regions[0].label, std::string("%y loop · body"));
    QCOMPARE(g.regions[1].name, std::string("then"));
    QCOMPARE(g.regions[1].label, std::string("%b if · then"));
    QCOMPARE(g.regions[2].name, std::string("else"));
    QCOMPARE(g.regions[1].parent, 0);
    QCOMPARE(g.regions[2].parent, 0);
    QCOMPARE(g.nodes[g.regions[1].node].region, 0);
    QCOMPARE(g.nodes[3].title, std::string("i (iteration)"));  // the body's inputs follow the loop
    std::vector<std::string> elseNodes;
    for (const auto& n : g.nodes)
      if (n.region == 2) elseNodes.push_back(n.title);
    QCOMPARE(elseNodes, (std::vector<std::string>{"a", "copy", "a_out0"}));
    auto hasEdge = [&](int from, int to) {
      return std::any_of(g.edges.begin(), g.edges.end(),
                         [&](const app::GraphEdge& e) { return e.from == from && e.to == to; });
    };
    int elseInput = 0;
    while (g.nodes[elseInput].region != 2) ++elseInput;
    QVERIFY(hasEdge(g.regions[2].node, elseInput));
    QVERIFY(hasEdge(elseInput, elseInput + 1));
    QVERIFY(hasEdge(elseInput + 1, elseInput + 2));
    // An operand read twice (the loop's %x, carried and captured) is one edge.
    int fromX = 0;
    for (const auto& e : g.edges) fromX += e.from == 0 && e.to == g.regions[0].node;
    QCOMPARE(fromX, 1);
    QVERIFY(g.nodes.back().kind == app::GraphNodeKind::Output && g.nodes.back().region < 0);
  }

  void lineDiff() {
    auto d = app::lineDiff("a\nb\nc\nd\n", "a\nc\nx\nd\n");
    std::string signs;
    for (const auto& l : d) signs += l.kind == app::DiffKind::Same ? '=' : l.kind == app::DiffKind::Added ? '+' : '-';
    QCOMPARE(QString::fromStdString(signs), QStringLiteral("=-=+="));
    QCOMPARE(app::lineDiff("", "").size(), size_t(0));
    QCOMPARE(app::lineDiff("same\n", "same\n").size(), size_t(1));
  }

 private:
  QTemporaryDir m_dir;
  std::string m_db;
  std::vector<app::ProfileResult> m_profiles;
};

QTEST_GUILESS_MAIN(ModelsTest)
#include "models_test.moc"
