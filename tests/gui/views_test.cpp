// The Compare and Batch sweep views on synthetic results (offscreen, no measuring): the spread,
// the flag of a backend or point whose worker processes disagree, NaN output differences and the
// log-scale toggle; the Graph view on real inspections with control flow (a box per region
// around its calls, click, search, heat from a real profile). With KILN_GUI_SCREENSHOT_DIR set,
// each view is also saved as a PNG for a person to look at.
#include <QAreaSeries>
#include <QChart>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QScatterSeries>
#include <QTemporaryDir>
#include <QValueAxis>
#include <QtTest>

#include <cmath>

#include "app/gui/compare_view.h"
#include "app/gui/graph_view.h"
#include "app/gui/text_view.h"
#include "app/measure.h"
#include "app/model_text.h"
#include "app/gui/roofline_view.h"
#include "app/gui/sweep_view.h"
#include "tests/gui/gui_test_support.h"

using namespace kiln;
using namespace kiln::gui;
using namespace kiln::testing_support;

namespace {

/// PyTorch eager at 40 ms, compiled at 31 ms, Kiln at 5 ms with processes at 4.6 and 5.6 ms
/// (they disagree) and a NaN in its output, torch.compile timed out.
app::CompareResult comparison() {
  app::CompareResult c;
  c.model = "mobilenet_v2";
  c.batch = 1;
  c.threads = 2;
  c.target = "llvm -mcpu=znver3";
  c.cpu = "Test CPU";
  c.torchVersion = "2.1.2";
  c.blas = "OpenBLAS";
  c.processes = 2;
  c.backends.push_back(
      ranBackend("pytorch-eager", {37, 38.5, 39, 39.5, 40, 40.5, 41, 42, 55}, {39.2, 40.6}, false));
  c.backends.push_back(
      ranBackend("torchscript-optimized", {29, 30, 30.5, 31, 31, 31.5, 32, 33, 36}, {30.8, 31.2}, false, 2e-6));
  c.backends.push_back(failedBackend("torch-compile", "timeout", "timed out after 120 s compiling"));
  c.backends.push_back(
      ranBackend("kiln", {4.4, 4.5, 4.6, 4.7, 5.0, 5.5, 5.6, 5.7, 6.5}, {4.6, 5.6}, true, NAN));
  return c;
}

void save(QWidget* w, const char* name) {
  QByteArray dir = qgetenv("KILN_GUI_SCREENSHOT_DIR");
  if (dir.isEmpty()) return;
  QCoreApplication::processEvents();
  QVERIFY(w->grab().save(QString::fromUtf8(dir) + QLatin1Char('/') + QLatin1String(name)));
}

/// Peak 100 GFLOP/s; L1 64 KiB at 400 GB/s, L2 2 MiB at 200, DRAM at 20.
profiler::MachineCeilings ceilings() {
  profiler::MachineCeilings c;
  c.id = 1;
  c.threads = 2;
  c.peakGflops = 100;
  c.bandwidth = {{"L1", 64 * 1024, 32 * 1024, 400}, {"L2", 2 << 20, 1 << 20, 200}, {"DRAM", 0, 64 << 20, 20}};
  c.measuredAt = "2026-01-02T03:04:05Z";
  return c;
}

/// Five calls: three convolutions, a layout transform without FLOPs, a dense layer.
profiler::ProfileRecord rooflineProfile(double speedup) {
  profiler::ProfileRecord p;
  struct Call {
    const char* op;
    double flops, bytes, us;
  };
  const Call calls[] = {{"conv2d", 2.4e8, 3e6, 4000}, {"layout_transform", 0, 1e6, 80},
                        {"conv2d", 1.2e8, 1.5e6, 2500}, {"conv2d", 6e7, 5e5, 900}, {"dense", 4e6, 8e6, 700}};
  for (int i = 0; i < 5; ++i) {
    profiler::OpRecord op;
    op.index = i;
    op.key = "v" + std::to_string(i);
    op.name = "%" + op.key + " = " + calls[i].op;
    op.ops = {calls[i].op};
    op.flops = calls[i].flops;
    op.bytes = calls[i].bytes;
    op.timeUs = calls[i].us / speedup;
    p.sumMs += op.timeUs / 1000;
    p.ops.push_back(op);
  }
  for (auto& op : p.ops) op.percent = 100 * op.timeUs / (p.sumMs * 1000);
  return p;
}

/// Opens a sample model (.pt) or graph text (.kir) and inspects it as the Workbench does.
std::shared_ptr<const app::Inspection> inspectForView(const QString& path) {
  auto model = path.endsWith(QStringLiteral(".kir")) ? app::openGraphText(path.toStdString())
                                                     : app::openModel(path.toStdString());
  if (!model.ok()) return nullptr;
  app::BuildOptions o;
  o.threads = 1;
  auto inspected = app::inspect(model.value(), o);
  if (!inspected.ok()) return nullptr;
  return std::make_shared<const app::Inspection>(std::move(inspected.value()));
}

/// True when region `inner` is `outer` or lies inside it.
bool regionWithin(const app::GraphDescription& g, int inner, int outer) {
  for (int r = inner; r >= 0; r = g.regions[r].parent)
    if (r == outer) return true;
  return false;
}

}  // namespace

class ViewsTest : public QObject {
  Q_OBJECT

 private slots:
  void compareViewShowsTheSpreadAndTheFlag() {
    CompareView view;
    view.resize(1200, 720);
    view.show();
    view.addResult(comparison(), QStringLiteral("Kiln -O3"));
    QCOMPARE(view.bars().size(), size_t(3));  // the timed-out backend has no bar
    const CompareTableModel* model = view.tableModel();
    QCOMPARE(model->rowCount(), 4);
    int kiln = -1, timeout = -1;
    for (int r = 0; r < model->rowCount(); ++r) {
      if (model->rows()[static_cast<size_t>(r)].backend == "kiln") kiln = r;
      if (model->rows()[static_cast<size_t>(r)].backend == "torch-compile") timeout = r;
    }
    QVERIFY(kiln >= 0 && timeout >= 0);
    QCOMPARE(model->index(kiln, CompareTableModel::MaxDiff).data().toString(), QStringLiteral("NaN"));
    QCOMPARE(model->index(kiln, CompareTableModel::Note).data().toString(),
             QStringLiteral("⚠ processes disagree: 4.60 / 5.60 ms"));
    QCOMPARE(model->index(timeout, CompareTableModel::Note).data().toString(),
             QStringLiteral("timeout: timed out after 120 s compiling"));
    QVERIFY(view.barLabel(2).contains(QStringLiteral("⚠ processes disagree")));
    QVERIFY(!view.barLabel(0).contains(QStringLiteral("⚠")));
    // The spread is drawn: a box per bar (area series besides the bars) and the processes' dots.
    int areas = 0, dots = 0;
    for (QAbstractSeries* s : view.chart()->series()) {
      areas += s->type() == QAbstractSeries::SeriesTypeArea;
      dots += s->type() == QAbstractSeries::SeriesTypeScatter ? static_cast<QScatterSeries*>(s)->count() : 0;
    }
    QCOMPARE(areas, 2 * 3);  // bar + IQR box each
    QCOMPARE(dots, 2 * 3);   // two processes each
    save(&view, "compare-linear.png");
    QVERIFY(!view.summaryText().contains(QStringLiteral("moved")));

    // A row whose outputs differ from eager's (as TorchScript-optimized's on mobilenet_v3_small):
    // its bar says so instead of a speed-up, and its table row is flagged.
    app::CompareResult wrong = comparison();
    wrong.backends[1].maxAbsDiff = 7.7;
    wrong.backends[1].outputBound = 0.0034;
    CompareView flagged;
    flagged.resize(1200, 720);
    flagged.show();
    flagged.addResult(wrong, QStringLiteral("Kiln -O3"));
    QCOMPARE(flagged.bars()[1].backend, std::string("torchscript-optimized"));
    QVERIFY2(flagged.barLabel(1).contains(QStringLiteral("✗ outputs differ")), qPrintable(flagged.barLabel(1)));
    QVERIFY(!flagged.barLabel(1).contains(QStringLiteral("vs eager")));
    QVERIFY(flagged.barLabel(2).contains(QStringLiteral("vs eager")));
    save(&flagged, "compare-differ.png");
  }

  void compareViewWarnsWhenTheHostMovedTheCpus() {
    CompareView view;
    view.resize(1200, 720);
    view.show();
    app::CompareResult moved = comparison();
    moved.coreRoundTripNs = {71, 73, 318, 322};
    moved.placementChanged = true;
    view.addResult(moved, QStringLiteral("Kiln -O3"));
    QVERIFY2(view.summaryText().contains(QStringLiteral("⚠ The host moved this machine's CPUs during the run "
                                                        "(core-to-core round trip 71–322 ns)")),
             qPrintable(view.summaryText()));
    save(&view, "compare-placement.png");
  }

  void logScaleSwapsTheAxis() {
    CompareView view;
    view.resize(1200, 720);
    view.show();
    QVERIFY(!view.logScale());  // linear by default
    view.addResult(comparison(), QStringLiteral("Kiln -O3"));
    auto verticalAxis = [&] { return view.chart()->axes(Qt::Vertical).value(0); };
    QVERIFY(qobject_cast<QValueAxis*>(verticalAxis()));
    view.logScaleBox()->click();
    QVERIFY(view.logScale());
    auto* log = qobject_cast<QLogValueAxis*>(verticalAxis());
    QVERIFY(log);
    QVERIFY2(log->min() > 0 && log->min() <= 4.4 && log->max() >= 55,
             qPrintable(QStringLiteral("%1..%2").arg(log->min()).arg(log->max())));
    QCOMPARE(view.bars().size(), size_t(3));
    save(&view, "compare-log.png");
    view.setLogScale(false);
    QVERIFY(qobject_cast<QValueAxis*>(verticalAxis()));
    // Adding a result keeps the choice.
    view.setLogScale(true);
    view.addResult(comparison(), QStringLiteral("Kiln -O2"));
    QVERIFY(qobject_cast<QLogValueAxis*>(verticalAxis()));
    QCOMPARE(view.bars().size(), size_t(4));
  }

  void sweepViewShowsBandsAndFlagsPoints() {
    SweepView view;
    view.resize(1280, 760);
    view.show();
    app::SweepResult sweep;
    sweep.model = "mobilenet_v2";
    sweep.context.threads = 2;
    sweep.context.target = "llvm";
    sweep.batches = {1, 2, 4, 8};
    sweep.backends = {"kiln", "pytorch-eager", "torchscript-optimized"};
    for (const auto& backend : sweep.backends) {
      for (int64_t b : sweep.batches) {
        profiler::Measurement m;
        m.backend = backend;
        m.batch = b;
        if (backend == "pytorch-eager" && b == 8) {
          m.status = profiler::Status::Failed;
          m.reason = "worker crashed (signal 9)";
          sweep.points.push_back(m);
          continue;
        }
        double ms = (backend == "kiln" ? 4.0 : backend == "pytorch-eager" ? 9.0 : 7.0) * std::pow(b, 0.8);
        m.timing = profiler::timingFromSamples({ms * 0.93, ms * 0.97, ms, ms * 1.02, ms * 1.08, ms * 1.3});
        m.processMedianMs = {ms * 0.98, ms * 1.02};
        if (backend == "kiln" && b == 4) {
          m.processMedianMs = {ms * 0.9, ms * 1.15};
          m.processesDisagree = true;
        }
        sweep.points.push_back(m);
      }
    }
    view.setResult(sweep);
    QCOMPARE(view.latencyPoints("kiln").size(), 4);
    QCOMPARE(view.latencyBandLower("kiln").size(), 4);
    QCOMPARE(view.latencyBandUpper("pytorch-eager").size(), 3);  // the failed point has none
    QVERIFY(view.latencyBandLower("kiln")[0].y() < view.latencyPoints("kiln")[0].y());
    QVERIFY(view.latencyBandUpper("kiln")[0].y() > view.latencyPoints("kiln")[0].y());
    QCOMPARE(view.disagreeingPoints().size(), 1);
    QCOMPARE(view.disagreeingPoints()[0].x(), 4.0);
    QCOMPARE(view.pointModel()->rowCount(), 12);
    int flagged = 0;
    for (int r = 0; r < view.pointModel()->rowCount(); ++r)
      flagged += view.pointModel()->index(r, 0).data(SweepPointModel::DisagreeRole).toBool();
    QCOMPARE(flagged, 1);
    save(&view, "sweep.png");
  }

  void rooflineViewShowsOnePointPerCallWithFlops() {
    RooflineView view;
    view.resize(1000, 640);
    profiler::ProfileRecord profile = rooflineProfile(1);
    view.setProfile(profile, ceilings(), QStringLiteral("synthetic -O3"));
    QCOMPARE(view.pointCount(), 4);  // the layout transform has no FLOPs
    int dots = 0;
    for (QScatterSeries* series : view.callSeries()) dots += series->count();
    QCOMPARE(dots, 4);
    QCOMPARE(view.arrowCount(), 0);
    // Log-log axes, a line per bandwidth and one for the peak.
    int lines = 0;
    for (QAbstractSeries* s : view.chart()->series()) lines += qobject_cast<QLineSeries*>(s) && !qobject_cast<QScatterSeries*>(s);
    QCOMPARE(lines, 3 + 1);
    QCOMPARE(view.chart()->axes(Qt::Horizontal).size(), 1);
    QVERIFY(qobject_cast<QLogValueAxis*>(view.chart()->axes(Qt::Horizontal)[0]));
    QVERIFY(qobject_cast<QLogValueAxis*>(view.chart()->axes(Qt::Vertical)[0]));
    // Dots sized by their share of the time: the largest call has the largest marker.
    auto size = [&](int i) { return view.markerSizeOf(i); };
    QVERIFY(size(0) > size(2));
    QVERIFY(size(2) > size(3));
    // A click picks the nearest dot and names its call.
    QSignalSpy activated(&view, &RooflineView::callActivated);
    const profiler::RooflinePoint& third = view.points()[2];
    QCOMPARE(third.call, 3);
    emit view.callSeries().front()->clicked(QPointF(third.intensity * 1.01, third.gflops * 0.99));
    QCOMPARE(activated.size(), 1);
    QCOMPARE(activated[0][0].toInt(), 3);
    QVERIFY(view.detailText().contains(QStringLiteral("#3")));
    QVERIFY(view.detailText().contains(QStringLiteral("L2")));  // 500 kB fits L2, not L1
    save(&view, "roofline.png");
  }

  void rooflineViewDrawsArrowsFromOldToNew() {
    RooflineView view;
    view.resize(1000, 640);
    app::BuildDiff diff;
    diff.buildA = 1;
    diff.buildB = 2;
    diff.a.optLevel = 2;
    diff.b.optLevel = 3;
    diff.profileA = rooflineProfile(1);
    diff.profileB = rooflineProfile(1.6);
    diff.profileB.ops.pop_back();         // the dense call only in A
    diff.profileB.ops[3].key = "other";  // and one call of B that A does not have
    diff.ceilingsB = ceilings();
    QSignalSpy activated(&view, &RooflineView::callActivated);
    view.setComparison(diff);
    QCOMPARE(view.pointCount(), 3);  // B's calls with FLOPs
    QCOMPARE(view.arrowCount(), 2);  // B's calls A has too
    int lines = 0;
    for (QAbstractSeries* s : view.chart()->series()) lines += qobject_cast<QLineSeries*>(s) != nullptr;
    QCOMPARE(lines, 3 + 1 + 2);  // ceilings, peak, arrows
    emit view.callSeries().front()->clicked(QPointF(view.points()[0].intensity, view.points()[0].gflops));
    QCOMPARE(activated.size(), 0);  // B need not be the profile on show: details only
    QCOMPARE(view.selectedCall(), view.points()[0].call);
    save(&view, "roofline-diff.png");
  }

  // The regions of if/loop calls as boxes: one per region, its calls and its inputs and outputs
  // inside, nothing else overlapping it, below its call; an if's then and else side by side.
  void graphViewDrawsRegions_data() {
    QTest::addColumn<QString>("model");
    QTest::newRow("loop_on_value") << modelPath("ops/loop_on_value.pt");
    QTest::newRow("branch_on_value") << modelPath("ops/branch_on_value.pt");
    QTest::newRow("nested") << QString();
  }
  void graphViewDrawsRegions() {
    QFETCH(QString, model);
    QTemporaryDir dir;
    if (model.isEmpty()) model = writeNestedControlFlow(dir.path());
    auto inspection = inspectForView(model);
    QVERIFY(inspection);
    const app::GraphDescription& g = inspection->graph;
    QVERIFY(!g.regions.empty());
    GraphView view;
    view.resize(1400, 900);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QFontMetricsF fm(view.font());
    GraphLayout layout = layoutGraph(g, graphNodeSizes(g, fm.averageCharWidth() * 1.05, fm.height()));
    QVERIFY2(layout.error.isEmpty(), qPrintable(layout.error));
    view.setGraph(inspection, layout);
    QCOMPARE(view.nodeCount(), static_cast<int>(g.nodes.size()));
    QCOMPARE(view.regionCount(), static_cast<int>(g.regions.size()));

    for (int r = 0; r < view.regionCount(); ++r) {
      QRectF box = view.regionRect(r);
      QVERIFY(!box.isEmpty());
      // Its call sits above it; a region inside another lies inside that one's box.
      QVERIFY(view.nodeRect(g.regions[r].node).bottom() < box.top());
      if (g.regions[r].parent >= 0) QVERIFY(view.regionRect(g.regions[r].parent).contains(box));
      for (int n = 0; n < view.nodeCount(); ++n) {
        bool within = g.nodes[n].region >= 0 && regionWithin(g, g.nodes[n].region, r);
        QVERIFY2(within ? box.contains(view.nodeRect(n)) : !box.intersects(view.nodeRect(n)),
                 qPrintable(QStringLiteral("node %1 (%2), region %3 (%4)")
                                .arg(n)
                                .arg(QString::fromStdString(g.nodes[n].title))
                                .arg(r)
                                .arg(QString::fromStdString(g.regions[r].label))));
      }
      // Its label's line at the top is free of nodes.
      QRectF label(box.left(), box.top(), box.width(), fm.height() + 4);
      for (int n = 0; n < view.nodeCount(); ++n) QVERIFY(!label.intersects(view.nodeRect(n)));
      // The regions of one if side by side, apart.
      for (int other = r + 1; other < view.regionCount(); ++other)
        if (g.regions[other].node == g.regions[r].node) QVERIFY(!box.intersects(view.regionRect(other)));
    }

    // A click on a call inside a region shows where it runs and asks for its kernel's code.
    int nested = -1;
    for (int n = 0; n < view.nodeCount() && nested < 0; ++n) {
      const app::GraphNode& node = g.nodes[n];
      if (node.kind == app::GraphNodeKind::Call && node.region >= 0 && !node.kernel.empty()) nested = n;
    }
    QVERIFY(nested >= 0);
    const app::GraphNode& call = g.nodes[nested];
    QSignalSpy kernelRequests(&view, &GraphView::kernelCodeRequested);
    QSignalSpy selections(&view, &GraphView::callSelected);
    view.canvas()->centerOn(view.nodeRect(nested).center());
    QPoint where = view.canvas()->mapFromScene(view.nodeRect(nested).center());
    QTest::mouseClick(view.canvas()->viewport(), Qt::LeftButton, {}, where);
    QCOMPARE(view.selectedNode(), nested);
    QCOMPARE(selections.size(), 1);
    QCOMPARE(selections[0][0].toInt(), call.call);
    QCOMPARE(kernelRequests.size(), 1);
    QCOMPARE(kernelRequests[0][0].toString(), QString::fromStdString(call.kernel));
    QVERIFY(view.details()->text().contains(QString::fromStdString(g.regions[call.region].label).toHtmlEscaped()));
    auto* loopIr = qobject_cast<CodeView*>(view.codeTabs()->widget(0));
    QVERIFY(loopIr && loopIr->text().contains(QString::fromStdString(call.kernel)));
    save(&view, qPrintable(QStringLiteral("graph-%1.png").arg(QTest::currentDataTag())));
    // The profile and roofline views select a call by its row number, nested ones too.
    view.selectCall(-1);
    view.selectCall(g.nodes[g.regions[0].node].call);
    QCOMPARE(view.selectedNode(), g.regions[0].node);
    view.selectCall(call.call);
    QCOMPARE(view.selectedNode(), nested);

    // Search finds the calls inside regions like any other.
    QString text = QString::fromStdString(call.kernel);
    int expected = 0;
    for (const app::GraphNode& n : g.nodes)
      for (const std::string& field : {n.title, n.function, n.kernel, n.key})
        if (QString::fromStdString(field).contains(text, Qt::CaseInsensitive)) {
          ++expected;
          break;
        }
    QVERIFY(expected >= 1);
    QCOMPARE(view.search(text), expected);
  }

  // Heat colouring and the details of a call inside a loop body come from its own profile row.
  void graphViewShowsTheTimeOfNestedCalls() {
    QString model = modelPath("ops/loop_on_value.pt");
    auto inspection = inspectForView(model);
    QVERIFY(inspection);
    app::BuildOptions build;
    build.threads = 1;
    auto profiled = app::profile(model.toStdString(), quickProfileOptions(build));
    QVERIFY2(profiled.ok(), profiled.ok() ? "" : profiled.error().message.c_str());
    GraphView view;
    view.resize(1400, 900);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QFontMetricsF fm(view.font());
    const app::GraphDescription& g = inspection->graph;
    view.setGraph(inspection, layoutGraph(g, graphNodeSizes(g, fm.averageCharWidth() * 1.05, fm.height())));
    view.setProfile(profiled.value().profile);
    int shown = 0;
    for (const profiler::OpRecord& op : profiled.value().profile.ops) {
      if (op.parent < 0) continue;
      view.selectCall(op.index);
      QVERIFY(view.selectedNode() >= 0);
      QVERIFY2(view.details()->text().contains(QStringLiteral("per inference")), qPrintable(view.details()->text()));
      QVERIFY(!view.details()->text().contains(QStringLiteral("not profiled")));
      ++shown;
    }
    QVERIFY(shown > 0);
    save(&view, "graph-heat.png");
  }
};

QTEST_MAIN(ViewsTest)
#include "views_test.moc"
