#include "app/gui/script.h"

#include <QApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QMessageBox>
#include <QPainter>
#include <QPixmap>
#include <QTabWidget>

#include <cstdio>
#include <memory>

#include "app/gui/compare_view.h"
#include "app/gui/graph_view.h"
#include "app/gui/ir_view.h"
#include "app/gui/main_window.h"
#include "app/gui/session_view.h"
#include "app/gui/stall_monitor.h"
#include "app/gui/sweep_view.h"
#include "app/gui/tuning_view.h"

namespace kiln::gui {

WorkbenchScript::WorkbenchScript(MainWindow* window, QObject* parent) : QObject(parent), m_window(window) {
  m_poll.setInterval(50);
  connect(&m_poll, &QTimer::timeout, this, &WorkbenchScript::poll);
}

void WorkbenchScript::add(const QString& name, std::function<void()> step) { m_steps.emplace_back(name, std::move(step)); }

void WorkbenchScript::start() { QTimer::singleShot(0, this, &WorkbenchScript::runNext); }

void WorkbenchScript::runNext() {
  if (m_next >= m_steps.size()) {
    emit finished(m_exitCode);
    return;
  }
  auto& [name, step] = m_steps[m_next++];
  std::fprintf(stderr, "kiln-workbench: %s\n", name.toLocal8Bit().constData());
  step();
  m_idlePolls = 0;
  m_poll.start();
}

// A step is over once the window has been idle for a few polls in a row: results arrive as
// queued calls and may start follow-up jobs (open → inspect), so one idle poll is not enough.
void WorkbenchScript::poll() {
  if (m_window->isBusy()) {
    m_idlePolls = 0;
    return;
  }
  if (++m_idlePolls < 3) return;
  m_poll.stop();
  runNext();
}

void WorkbenchScript::grab(const QString& dir, const QString& file) {
  QString path = QDir(dir).filePath(file);
  if (!m_window->grab().save(path)) {
    std::fprintf(stderr, "kiln-workbench: cannot write %s\n", path.toLocal8Bit().constData());
    m_exitCode = 1;
    return;
  }
  std::printf("%s\n", path.toLocal8Bit().constData());
  std::fflush(stdout);
}

void WorkbenchScript::addStallMeasurement(const QString& model, StallMonitor* monitor) {
  auto phases = std::make_shared<std::vector<std::pair<QString, double>>>();
  auto phase = [this, monitor, phases](const QString& name, std::function<void()> work) {
    add(name, [monitor, phases, name, work] {
      monitor->reset();
      phases->emplace_back(name, 0.0);
      work();
    });
  };
  MainWindow* w = m_window;
  auto record = [monitor, phases] {
    if (!phases->empty()) phases->back().second = monitor->maxGapMs();
  };
  phase(QStringLiteral("open ") + model, [w, model] { w->openModelFile(model); });
  add(QStringLiteral("record"), record);
  phase(QStringLiteral("compile"), [w] { w->compile(); });
  add(QStringLiteral("record"), record);
  phase(QStringLiteral("profile"), [w] { w->profile(); });
  add(QStringLiteral("record"), record);
  // Tuning: live progress arrives on the UI thread for every batch of candidates.
  phase(QStringLiteral("tune (4 trials per task)"), [w] {
    w->tuningView()->setTrialsPerTask(4);
    w->tuningView()->setTimeLimit(120);
    w->tuningView()->setRecordsPath(QDir::temp().filePath(QStringLiteral("kiln-stall-records.jsonl")));
    QFile::remove(w->tuningView()->recordsPath());
    w->tune(true);
  });
  add(QStringLiteral("record"), record);
  add(QStringLiteral("report"), [this, phases, monitor] {
    double worst = 0;
    std::printf("UI-thread stall (largest gap between %d-ms heartbeats):\n", 5);
    for (const auto& [name, gap] : *phases) {
      std::printf("  %-50s %8.1f ms\n", name.toLocal8Bit().constData(), gap);
      worst = std::max(worst, gap);
    }
    std::printf("  %-50s %8.1f ms\n", "max over open, compile, profile and tune", worst);
    std::fflush(stdout);
    if (m_window->inspection() == nullptr || !m_window->lastProfile()) m_exitCode = 1;
  });
}

void WorkbenchScript::addDiffShots(int64_t buildA, int64_t buildB, const QString& dir) {
  MainWindow* w = m_window;
  QDir().mkpath(dir);
  add(QStringLiteral("diff"), [w, buildA, buildB] { w->diffBuilds(buildA, buildB); });
  const std::pair<MainWindow::Tab, const char*> tabs[] = {{MainWindow::DiffTab, "07-sessions-diff.png"},
                                                          {MainWindow::RooflineTab, "07b-roofline-diff.png"}};
  for (const auto& [tab, file] : tabs)
    add(QStringLiteral("grab ") + QLatin1String(file), [this, w, dir, tab = tab, file = file] {
      w->showTab(tab);
      QApplication::processEvents();
      grab(dir, QLatin1String(file));
    });
}

void WorkbenchScript::addScreenshotTour(const QString& model, const QString& badModel, const QString& dir) {
  MainWindow* w = m_window;
  QDir().mkpath(dir);
  add(QStringLiteral("open (-O2)"), [w, model] {
    w->setOptLevel(2);
    w->openModelFile(model);
  });
  add(QStringLiteral("profile -O2"), [w] { w->profile(); });
  add(QStringLiteral("compile -O3"), [w] {
    w->setOptLevel(3);
    w->compile();
  });
  add(QStringLiteral("profile -O3"), [w] { w->profile(); });
  add(QStringLiteral("grab roofline"), [this, w, dir] {
    w->showTab(MainWindow::RooflineTab);
    QApplication::processEvents();
    grab(dir, QStringLiteral("03b-roofline.png"));
  });
  add(QStringLiteral("compare"), [w] {
    w->compareView()->setIncludeTorchCompile(false);
    w->compareBackends();
  });
  add(QStringLiteral("sweep"), [w] {
    w->sweepView()->setBatches({1, 2, 4, 8});
    w->sweepView()->setBackends({"kiln", "pytorch-eager", "torchscript-optimized", "onnxruntime", "openvino"});
    w->sweep();
  });
  add(QStringLiteral("tune"), [w, dir] {
    // A short budget: enough to show live progress per task, not a real tuning run.
    w->tuningView()->setTrialsPerTask(6);
    w->tuningView()->setTimeLimit(60);
    w->tuningView()->setRecordsPath(QDir(dir).filePath(QStringLiteral("tuning-records.jsonl")));
    QFile::remove(w->tuningView()->recordsPath());
    w->tune(true);  // "resume" uses the records path set above: scripted runs keep out of the user's data
  });
  add(QStringLiteral("diff"), [w] {
    if (auto builds = w->lastTwoProfiledBuilds()) w->diffBuilds(builds->first, builds->second);
  });
  add(QStringLiteral("select builds"), [w] {
    if (auto builds = w->lastTwoProfiledBuilds()) w->sessionBrowser()->selectBuilds({builds->first, builds->second});
  });
  add(QStringLiteral("select hottest node"), [w] {
    w->showTab(MainWindow::GraphTab);
    if (!w->lastProfile()) return;
    const auto& ops = w->lastProfile()->profile.ops;
    int hottest = 0;
    for (size_t i = 0; i < ops.size(); ++i)
      if (ops[i].timeUs > ops[hottest].timeUs) hottest = static_cast<int>(i);
    if (!ops.empty()) w->graphView()->selectCall(ops[hottest].index);
  });
  add(QStringLiteral("grab graph"), [this, w, dir] {
    w->graphView()->codeTabs()->setCurrentIndex(2);
    grab(dir, QStringLiteral("01-graph.png"));
  });
  add(QStringLiteral("grab graph (loop IR)"), [this, w, dir] {
    w->graphView()->codeTabs()->setCurrentIndex(0);
    grab(dir, QStringLiteral("01b-graph-loop-ir.png"));
  });
  add(QStringLiteral("grab IR"), [this, w, dir] {
    w->showTab(MainWindow::IrTab);
    w->irView()->showEntry(1);
    grab(dir, QStringLiteral("02-ir-optimized.png"));
  });
  add(QStringLiteral("grab IR diff"), [this, w, dir] {
    w->irView()->showEntry(5);
    grab(dir, QStringLiteral("02b-ir-diff.png"));
  });
  add(QStringLiteral("grab assembly"), [w] { w->irView()->showEntry(4); });
  add(QStringLiteral("grab assembly"), [this, dir] { grab(dir, QStringLiteral("02c-ir-assembly.png")); });
  const std::pair<MainWindow::Tab, const char*> tabs[] = {{MainWindow::ProfileTab, "03-profile.png"},
                                                          {MainWindow::CompareTab, "04-compare.png"},
                                                          {MainWindow::SweepTab, "05-sweep.png"},
                                                          {MainWindow::TuningTab, "06-tuning.png"},
                                                          {MainWindow::DiffTab, "07-sessions-diff.png"},
                                                          {MainWindow::RooflineTab, "07b-roofline-o2-to-o3.png"}};
  for (const auto& [tab, file] : tabs) {
    add(QStringLiteral("grab ") + QLatin1String(file), [this, w, dir, tab = tab, file = file] {
      w->showTab(tab);
      QApplication::processEvents();
      grab(dir, QLatin1String(file));
    });
  }
  add(QStringLiteral("open a corrupt file"), [w, badModel] { w->openModelFile(badModel); });
  add(QStringLiteral("grab error"), [this, w, dir] {
    QString path = QDir(dir).filePath(QStringLiteral("08-error.png"));
    QMessageBox* box = w->errorBox();
    if (!box) {
      std::fprintf(stderr, "kiln-workbench: no error dialog for the corrupt file\n");
      m_exitCode = 1;
      return;
    }
    // The dialog is its own window: paint the main window with the dialog over its centre.
    QPixmap shot = w->grab();
    QPixmap dialog = box->grab();
    QPainter p(&shot);
    p.fillRect(shot.rect(), QColor(0, 0, 0, 60));
    p.drawPixmap((shot.width() - dialog.width()) / 2, (shot.height() - dialog.height()) / 2, dialog);
    p.end();
    if (shot.save(path)) std::printf("%s\n", path.toLocal8Bit().constData());
    box->close();
  });
  // The import doctor on a model with an unsupported operator.
  QString unsupported = QFileInfo(badModel).dir().filePath(QStringLiteral("unsupported_op.pt"));
  add(QStringLiteral("open an unsupported model"), [w, unsupported] { w->openModelFile(unsupported); });
  add(QStringLiteral("diagnose"), [w] {
    if (QMessageBox* box = w->errorBox()) box->close();
    w->diagnose();
  });
  add(QStringLiteral("grab doctor"), [this, dir] { grab(dir, QStringLiteral("09-doctor.png")); });
}

}  // namespace kiln::gui
