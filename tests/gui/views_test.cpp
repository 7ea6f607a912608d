// The Compare and Batch sweep views on synthetic results (offscreen, no measuring): the spread,
// the flag of a backend or point whose worker processes disagree, NaN output differences and the
// log-scale toggle. With KILN_GUI_SCREENSHOT_DIR set, each view is also saved as a PNG for a
// person to look at.
#include <QAreaSeries>
#include <QChart>
#include <QLogValueAxis>
#include <QScatterSeries>
#include <QValueAxis>
#include <QtTest>

#include <cmath>

#include "app/gui/compare_view.h"
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
};

QTEST_MAIN(ViewsTest)
#include "views_test.moc"
