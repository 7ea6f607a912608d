// The main window's jobs: every action starts a JobTracker job that calls the façade on a worker
// and hands a value back to the GUI thread, where it is shown or reported as an error.
#include <QDir>
#include <QFileInfo>
#include <QCryptographicHash>
#include <QFontMetricsF>
#include <QLineEdit>
#include <QMessageBox>
#include <QStandardPaths>
#include <QCoreApplication>
#include <QDateTime>
#include <QInputDialog>
#include <QFileDialog>
#include <QSettings>

#include <fstream>

#include "app/gui/compare_view.h"
#include "app/gui/doctor_view.h"
#include "app/gui/format.h"
#include "app/gui/graph_layout.h"
#include "app/gui/graph_view.h"
#include "app/gui/input_shapes_dialog.h"
#include "app/gui/ir_view.h"
#include "app/gui/job_runner.h"
#include "app/gui/main_window.h"

#include "app/doctor.h"
#include "app/gui/profile_view.h"
#include "app/gui/roofline_view.h"
#include "app/gui/session_view.h"
#include "app/gui/sweep_view.h"
#include "app/gui/tuning_view.h"

namespace kiln::gui {

namespace {

// What the open/compile/inspect jobs hand back. Result<T> has no empty state, so outcomes are
// plain structs with an error string.
struct InspectOutcome {
  std::shared_ptr<const app::Model> model;
  std::shared_ptr<const app::Inspection> inspection;
  GraphLayout layout;
  QString error;
  // compile only
  bool compiled = false;
  double compileSeconds = 0;
  size_t planBytes = 0, unplannedBytes = 0;
  int numKernels = 0, numCalls = 0;
  // an export-only target: its module's size and, where it runs here, its agreement
  std::optional<app::CrossCheck> cross;
  QString crossError;
};

std::shared_ptr<const app::Model> modelFor(const std::shared_ptr<const app::Model>& cached, const std::string& path,
                                           const std::vector<app::InputSpec>& shapes, int64_t batch, QString& error) {
  if (batch <= 0 && cached) return cached;
  app::OpenOptions o;
  o.batch = batch;
  o.inputs = shapes;
  auto m = app::openModel(path, o);
  if (!m) {
    error = qs(m.error().message);
    return nullptr;
  }
  return m.value();
}

void inspectInto(InspectOutcome& out, const app::BuildOptions& options, double charWidth, double lineHeight) {
  auto inspected = app::inspect(out.model, options);
  if (!inspected) {
    out.error = qs(inspected.error().message);
    return;
  }
  auto shared = std::make_shared<const app::Inspection>(std::move(inspected.value()));
  out.layout = layoutGraph(shared->graph, graphNodeSizes(shared->graph, charWidth, lineHeight));
  out.inspection = std::move(shared);
}

app::BackendResult backendFromMeasurement(const profiler::Measurement& m) {
  app::BackendResult b;
  b.backend = m.backend;
  b.available = m.ok();
  b.status = profiler::statusName(m.status);
  b.reason = m.reason;
  b.timing = m.timing;
  b.processMedianMs = m.processMedianMs;
  b.processesDisagree = m.processesDisagree;
  b.maxAbsDiff = m.maxAbsDiff;  // < 0: not checked ("—"), NaN: a NaN in an output
  b.outputBound = m.outputBound;
  b.facts = m.facts;
  return b;
}

/// What opening a file gave: the model, or the forward arguments whose shapes must be asked for.
struct OpenOutcome {
  std::optional<app::Result<std::shared_ptr<const app::Model>>> model;
  std::vector<std::string> askFor;
};

/// The key shapes are remembered under: the file's absolute path, size and modification time
/// (a Python reference: its .py file's), so an edited or replaced file is asked about again.
QString shapesKey(const QString& path) {
  QString file = path;
  if (auto ref = app::parsePythonReference(path.toStdString()); ref && !ref->file.empty()) file = qs(ref->file);
  QFileInfo info(file);
  return QStringLiteral("%1|%2|%3")
      .arg(info.absoluteFilePath())
      .arg(info.size())
      .arg(info.lastModified().toMSecsSinceEpoch());
}

}  // namespace

InputShapesDialog* MainWindow::shapesDialog() const { return m_shapesDialog.data(); }

std::vector<app::InputSpec> MainWindow::rememberedShapes(const QString& path) const {
  QString key = shapesKey(path);
  QString text;
  if (m_options.persistSettings) {
    QSettings s;
    s.beginGroup(QStringLiteral("inputShapes"));
    // QSettings keys cannot hold '/' or '\\': the entry keeps the key beside the shapes.
    QStringList entry = s.value(QString::fromLatin1(QCryptographicHash::hash(key.toUtf8(), QCryptographicHash::Sha1).toHex()))
                            .toStringList();
    if (entry.size() == 2 && entry[0] == key) text = entry[1];
  } else if (auto it = m_shapesMemory.find(key); it != m_shapesMemory.end()) {
    text = it->second;
  }
  if (text.isEmpty()) return {};
  auto specs = app::parseInputShapes(text.toStdString());
  return specs ? specs.value() : std::vector<app::InputSpec>{};
}

void MainWindow::rememberShapes(const QString& path, const std::vector<app::InputSpec>& specs) {
  QString key = shapesKey(path), text = qs(app::inputShapesText(specs));
  if (!m_options.persistSettings) {
    m_shapesMemory[key] = text;
    return;
  }
  QSettings s;
  s.beginGroup(QStringLiteral("inputShapes"));
  s.setValue(QString::fromLatin1(QCryptographicHash::hash(key.toUtf8(), QCryptographicHash::Sha1).toHex()),
             QStringList{key, text});
}

void MainWindow::askForShapes(const QString& path, const std::vector<std::string>& names) {
  if (m_shapesDialog) m_shapesDialog->deleteLater();
  m_shapesDialog = new InputShapesDialog(QFileInfo(path).fileName(), names, {}, this);
  m_shapesDialog->setAttribute(Qt::WA_DeleteOnClose);
  connect(m_shapesDialog, &QDialog::accepted, this, [this, path, d = m_shapesDialog] {
    rememberShapes(path, d->specs());
    openModelFile(path);
  });
  connect(m_shapesDialog, &QDialog::rejected, this, [this, path] {
    setStatus(tr("Not opened: %1 needs its input shapes").arg(QFileInfo(path).fileName()));
  });
  m_shapesDialog->open();
}

void MainWindow::openPythonModel() {
  QSettings settings;
  QString dir = settings.value(QStringLiteral("lastDir"), QDir::homePath()).toString();
  QString file = QFileDialog::getOpenFileName(this, tr("Open Python model"), dir, tr("Python files (*.py)"));
  if (file.isEmpty()) return;
  bool ok = false;
  QString function = QInputDialog::getText(this, tr("Open Python model"),
                                           tr("The function in %1 that returns (nn.Module, example_inputs):")
                                               .arg(QFileInfo(file).fileName()),
                                           QLineEdit::Normal, QStringLiteral("build"), &ok)
                         .trimmed();
  if (!ok || function.isEmpty()) return;
  openModelFile(file + QLatin1Char(':') + function);
}

void MainWindow::openModelFile(const QString& path) {
  // A new model makes every result of the old one meaningless.
  for (JobTracker* t : {m_compileJob, m_inspectJob, m_codeJob, m_profileJob, m_compareJob, m_sweepJob, m_sweepStateJob})
    t->cancel();
  m_tuneJob->requestCancel();
  m_modelPath = path;
  m_model.reset();
  m_inspection.reset();
  m_lastProfile.reset();
  m_lastSweep.reset();
  m_unfinishedSweep.reset();
  m_sweep->setUnfinished(std::nullopt);
  QString name = QFileInfo(path).fileName();
  setWindowTitle(tr("%1 — Kiln Workbench").arg(name));
  m_modelLabel->setText(name);
  m_graph->clear(tr("Opening %1…").arg(name));
  m_ir->clear(tr("Opening %1…").arg(name));
  m_profile->clear(tr("No profile yet: press Profile (Ctrl+P) to time every kernel call."));
  m_roofline->clear(tr("No profile yet: press Profile (Ctrl+P); its calls are placed against the machine's ceilings."));
  m_compare->clear(tr("No comparison yet: press Compare (Ctrl+R) to time PyTorch and Kiln on the same input."));
  m_sweep->clear(tr("No sweep yet: choose batch sizes and backends, then Run sweep (Ctrl+Shift+S)."));
  m_graph->setProfile(std::nullopt);
  setStatus(tr("Opening %1…").arg(path));
  std::string p = path.toStdString();
  std::vector<app::InputSpec> remembered = rememberedShapes(path);
  m_inputShapes.clear();
  m_openJob->start([p, remembered](const JobControl&) {
                     OpenOutcome out;
                     if (remembered.empty()) {
                       // A file without shapes (a module traced by its user): ask, don't fail.
                       auto sig = app::modelSignature(p);
                       if (sig && sig->needsShapes()) {
                         out.askFor = sig->names;
                         return out;
                       }
                     }
                     app::OpenOptions open;
                     open.inputs = remembered;
                     out.model = app::openModel(p, open);
                     return out;
                   },
                   [this, path, remembered](OpenOutcome out) {
                     if (!out.askFor.empty()) {
                       m_modelPath.clear();
                       m_graph->clear(tr("%1 needs its input shapes.").arg(QFileInfo(path).fileName()));
                       setStatus(tr("%1 does not record its input shapes: enter them").arg(QFileInfo(path).fileName()));
                       finishJob(QStringLiteral("open"), false);
                       askForShapes(path, out.askFor);
                       return;
                     }
                     app::Result<std::shared_ptr<const app::Model>>& r = *out.model;
                     if (!r) {
                       m_failedPath = path;  // Run ▸ Diagnose import explains what failed
                       m_modelPath.clear();
                       m_modelLabel->clear();
                       setWindowTitle(tr("Kiln Workbench"));
                       m_graph->clear(tr("Could not open %1.").arg(QFileInfo(path).fileName()));
                       m_ir->clear(tr("No model."));
                       showError(tr("Cannot open model"), qs(r.error().message));
                       finishJob(QStringLiteral("open"), false);
                       return;
                     }
                     m_model = r.value();
                     m_inputShapes = remembered;
                     addRecent(path);
                     QStringList inputs;
                     for (const auto& in : m_model->inputs) {
                       QStringList dims;
                       for (int64_t d : in.shape) dims << QString::number(d);
                       inputs << QStringLiteral("%1 %2").arg(qs(in.name), dims.join(QStringLiteral("×")));
                     }
                     m_modelLabel->setText(QStringLiteral("%1 — %2 nodes — input %3")
                                               .arg(QFileInfo(path).fileName())
                                               .arg(m_model->graph.nodes().size())
                                               .arg(inputs.join(QStringLiteral(", "))));
                     setStatus(tr("Opened %1 in %2; optimizing for the graph view…")
                                   .arg(qs(m_model->name), formatMs(m_model->importSeconds * 1e3)));
                     finishJob(QStringLiteral("open"), true);
                     startInspect(QStringLiteral("inspect"));
                     checkUnfinishedSweep();
                   });
  updateActions();
}

void MainWindow::startInspect(const QString& kind) {
  if (!m_model) return;
  QFontMetricsF fm(font());
  double charWidth = fm.averageCharWidth() * 1.05, lineHeight = fm.height();
  auto model = m_model;
  std::string path = m_modelPath.toStdString();
  std::vector<app::InputSpec> shapes = m_inputShapes;
  int64_t batch = batchOption();
  app::BuildOptions options = buildOptions();
  m_inspectJob->start(
      [=](const JobControl&) {
        InspectOutcome out;
        out.model = modelFor(model, path, shapes, batch, out.error);
        if (out.model) inspectInto(out, options, charWidth, lineHeight);
        return out;
      },
      [this, kind](InspectOutcome out) {
        if (!out.inspection) {
          m_graph->clear(tr("The model could not be optimized."));
          showError(tr("Cannot optimize the model"), out.error);
          finishJob(kind, false);
          return;
        }
        m_inspection = out.inspection;
        m_graph->setGraph(m_inspection, out.layout);
        if (m_lastProfile) m_graph->setProfile(m_lastProfile->profile);
        m_ir->setInspection(m_inspection);
        setStatus(tr("%1: %2 calls of %3 kernels at -O%4 for %5 (optimized in %6)%7")
                      .arg(qs(m_inspection->model))
                      .arg(m_inspection->numCalls)
                      .arg(m_inspection->numKernels)
                      .arg(m_inspection->optLevel)
                      .arg(qs(m_inspection->targetString), formatMs(m_inspection->seconds * 1e3),
                           out.layout.error.isEmpty() ? QString() : QStringLiteral(" — ") + out.layout.error));
        finishJob(kind, true);
      });
}

void MainWindow::compile() {
  if (!m_model) return;
  QFontMetricsF fm(font());
  double charWidth = fm.averageCharWidth() * 1.05, lineHeight = fm.height();
  auto model = m_model;
  std::string path = m_modelPath.toStdString();
  std::vector<app::InputSpec> shapes = m_inputShapes;
  int64_t batch = batchOption();
  app::BuildOptions options = buildOptions();
  int t = m_target->currentIndex();
  bool runnable = t < 0 || t >= static_cast<int>(m_targets.size()) || m_targets[t].runnable;
  setStatus(tr("Compiling %1 for %2 at -O%3…").arg(qs(model->name), qs(options.target)).arg(options.optLevel));
  m_compileJob->start(
      [=](const JobControl& control) {
        InspectOutcome out;
        out.model = modelFor(model, path, shapes, batch, out.error);
        if (!out.model) return out;
        if (runnable) {
          auto built = app::build(out.model, options);
          if (!built) {
            out.error = qs(built.error().message);
            return out;
          }
          out.compiled = true;
          out.compileSeconds = built.value()->compileSeconds;
          out.planBytes = built.value()->planBytes;
          out.unplannedBytes = built.value()->unplannedBytes;
          out.numKernels = built.value()->numKernels;
          out.numCalls = built.value()->numCalls;
          // The JIT session is released here, on the worker, not on the GUI thread.
        }
        if (control.cancelled()) return out;
        inspectInto(out, options, charWidth, lineHeight);
        if (!runnable && out.inspection && !control.cancelled()) {
          auto checked = app::checkCrossTarget(out.model, options, "", control.cancelledFn());
          if (checked) out.cross = checked.value();
          else out.crossError = qs(checked.error().message);
        }
        return out;
      },
      [this, options](InspectOutcome out) {
        if (!out.inspection) {
          showError(tr("Compilation failed"), out.error);
          finishJob(QStringLiteral("compile"), false);
          return;
        }
        m_inspectJob->cancel();  // an older open-time inspection must not replace this one
        m_inspection = out.inspection;
        m_graph->setGraph(m_inspection, out.layout);
        m_ir->setInspection(m_inspection);
        if (out.compiled)
          setStatus(tr("Compiled %1 for %2 at -O%3 in %4: %5 kernels, %6 calls; %7 intermediate memory (%8 without reuse)")
                        .arg(qs(m_inspection->model), qs(m_inspection->targetString))
                        .arg(options.optLevel)
                        .arg(formatMs(out.compileSeconds * 1e3))
                        .arg(out.numKernels)
                        .arg(out.numCalls)
                        .arg(formatBytes(static_cast<double>(out.planBytes)), formatBytes(static_cast<double>(out.unplannedBytes))));
        else
          setStatus(crossTargetStatus(out.cross, out.crossError));
        finishJob(QStringLiteral("compile"), true);
      });
  updateActions();
}

void MainWindow::requestKernelCode(const QString& kernel) {
  auto inspection = m_inspection;
  if (!inspection) return;
  std::string k = kernel.toStdString();
  m_codeJob->start([inspection, k](const JobControl&) { return app::kernelCode(*inspection, k); },
                   [this, kernel](app::Result<app::KernelCode> r) {
                     if (r) m_graph->setKernelCode(r.value());
                     else m_graph->setKernelCodeError(kernel, qs(r.error().message));
                     finishJob(QStringLiteral("code"), r.ok());
                   });
}

void MainWindow::requestModuleText(app::IrStage stage) {
  auto inspection = m_inspection;
  if (!inspection) return;
  // Module text shares the code tracker: asking for assembly while LLVM IR is still being
  // generated drops the LLVM IR, which the user has navigated away from.
  m_codeJob->start([inspection, stage](const JobControl&) { return app::moduleText(*inspection, stage); },
                   [this, stage](app::Result<std::string> r) {
                     m_ir->setModuleText(stage, r ? qs(r.value()) : tr("Could not generate: %1").arg(qs(r.error().message)));
                     finishJob(QStringLiteral("code"), r.ok());
                   });
}

void MainWindow::profile() {
  if (!m_model) return;
  app::ProfileOptions o;
  o.build = buildOptions();
  o.batch = batchOption();
  o.inputs = m_inputShapes;
  o.store = storeOptions();
  // Generated code runs in a `kiln measure-worker`: a kernel that crashes or hangs fails the job,
  // not the workbench.
  o.isolate.enabled = true;
  // Every profile goes on the roofline: the ceilings are measured once per thread count.
  o.roofline = true;
  std::string path = m_modelPath.toStdString();
  setStatus(tr("Profiling %1 (compile, then time each call)…").arg(qs(m_model->name)));
  m_profileJob->start(
      [path, o](const JobControl& control) {
        app::ProfileOptions options = o;
        options.isolate.cancelled = control.cancelledFn();  // Cancel kills the worker at once
        return app::profile(path, options);
      },
      [this](app::Result<app::ProfileResult> r) {
        if (failed(r, QStringLiteral("profile"), tr("Profiling failed"))) return;
        m_lastProfile = r.value();
        const app::ProfileResult& p = *m_lastProfile;
        QString title = QStringLiteral("%1, %2 -O%3").arg(qs(p.model), qs(p.build.target)).arg(p.build.optLevel);
        m_profile->setProfile(p.profile, title);
        m_roofline->setProfile(p.profile, p.ceilings, title);
        // Heat colouring maps calls by index: only onto the same build's graph.
        bool sameBuild = m_inspection && m_inspection->targetString == p.build.target &&
                         m_inspection->optLevel == p.build.optLevel &&
                         m_inspection->numCalls == static_cast<int>(p.profile.ops.size());
        if (sameBuild) m_graph->setProfile(p.profile);
        else startInspect(QStringLiteral("inspect"));
        if (p.stored.buildId) m_profiledBuilds.push_back(p.stored.buildId);
        noteStored(p.stored);
        setStatus(tr("Profiled %1: end to end %2, Σ calls %3, %4 calls")
                      .arg(qs(p.model), formatMs(p.profile.endToEnd.medianMs), formatMs(p.profile.sumMs))
                      .arg(p.profile.ops.size()));
        showTab(ProfileTab);
        finishJob(QStringLiteral("profile"), true);
      });
  updateActions();
}

void MainWindow::diagnose() {
  QString path = m_modelPath.isEmpty() ? m_failedPath : m_modelPath;
  if (path.isEmpty()) {
    showError(tr("Nothing to diagnose"), tr("Open a model first (a file that fails to open can be diagnosed too)."));
    return;
  }
  std::string p = path.toStdString();
  app::OpenOptions open;
  open.batch = batchOption();
  if (!m_modelPath.isEmpty()) open.inputs = m_inputShapes;
  setStatus(tr("Diagnosing the import of %1…").arg(QFileInfo(path).fileName()));
  m_doctor->clear(tr("Diagnosing %1…").arg(QFileInfo(path).fileName()));
  showTab(DoctorTab);
  m_doctorJob->start([p, open](const JobControl&) { return app::diagnoseModel(p, open); },
                     [this](app::Result<app::DoctorReport> r) {
                       if (!r) {
                         m_doctor->clear(tr("The doctor could not read the file: %1").arg(qs(r.error().message)));
                         showError(tr("Diagnosis failed"), qs(r.error().message));
                         finishJob(QStringLiteral("doctor"), false);
                         return;
                       }
                       m_doctor->setReport(r.value());
                       setStatus(tr("Diagnosed %1: %2 unsupported operator(s), %3% of the FLOPs compile")
                                     .arg(qs(r.value().model))
                                     .arg(r.value().unsupported)
                                     .arg(r.value().compiledShare * 100, 0, 'f', 1));
                       finishJob(QStringLiteral("doctor"), true);
                     });
  updateActions();
}

void MainWindow::compareBackends() {
  if (!m_model) return;
  app::CompareOptions o;
  o.build = buildOptions();
  o.batch = batchOption();
  o.inputs = m_inputShapes;
  o.store = storeOptions();
  o.torchCompile = m_compare->includeTorchCompile();
  // Every backend runs in worker processes of its own (CompareOptions::processes, 2 by default:
  // the view flags a backend whose processes disagree).
  std::string path = m_modelPath.toStdString();
  QString label = buildLabel();
  setStatus(tr("Comparing %1 with PyTorch…").arg(qs(m_model->name)));
  m_compareJob->start(
      [path, o](const JobControl& control) {
        app::CompareOptions options = o;
        options.isolate.cancelled = control.cancelledFn();
        return app::compare(path, options);
      },
      [this, label](app::Result<app::CompareResult> r) {
        if (failed(r, QStringLiteral("compare"), tr("Comparison failed"))) return;
        m_compare->addResult(r.value(), label);
        noteStored(r.value().stored);
        setStatus(tr("Compared %1 (batch %2, %3 threads)").arg(qs(r.value().model)).arg(r.value().batch).arg(r.value().threads));
        showTab(CompareTab);
        finishJob(QStringLiteral("compare"), true);
      });
  updateActions();
}

void MainWindow::sweep(bool resume) {
  if (!m_model) return;
  app::SweepOptions o;
  o.build = buildOptions();
  o.inputs = m_inputShapes;
  if (resume && m_unfinishedSweep) {
    // The interrupted sweep's own settings, so that the façade finds it and fills in its gaps.
    const app::UnfinishedSweep& u = *m_unfinishedSweep;
    m_sweep->setBatches(u.batches);
    m_sweep->setBackends(u.backends);
    m_sweep->setBudgetSeconds(u.budgetSeconds);
    o.build.target = u.context.target;
    o.build.optLevel = u.context.optLevel;
    o.build.threads = u.context.threads;
    if (u.context.tuningRecords != "none") o.build.records = u.context.tuningRecords;
  }
  o.batches = m_sweep->batches();
  o.backends = m_sweep->backends();
  o.budgetSeconds = m_sweep->budgetSeconds();
  o.store = storeOptions();
  o.resume = resume;
  // Every backend runs in worker processes of its own: a crash or hang fails that point only.
  if (o.batches.empty() || o.backends.empty()) {
    showError(tr("Nothing to sweep"), tr("Enter at least one batch size and pick at least one backend."));
    return;
  }
  std::string path = m_modelPath.toStdString();
  setStatus((resume ? tr("Resuming the sweep of %1 over %2 batch sizes…") : tr("Sweeping %1 over %2 batch sizes…"))
                .arg(qs(m_model->name))
                .arg(o.batches.size()));
  showTab(SweepTab);
  QPointer<MainWindow> self(this);
  m_sweepJob->start(
      [path, o, self](const JobControl& control) {
        app::SweepOptions options = o;
        // Cancel stops between points and kills the worker of the point in flight; the points
        // already stored stay stored for Resume.
        options.isolate.cancelled = control.cancelledFn();
        auto r = app::sweep(path, options, control.progressFn());
        if (control.cancelled()) {
          // An abandoned sweep's result is dropped: show what it stored and offer Resume.
          QMetaObject::invokeMethod(
              QCoreApplication::instance(),
              [self] {
                if (!self) return;
                self->refreshSessions();
                self->checkUnfinishedSweep();
              },
              Qt::QueuedConnection);
        }
        return r;
      },
      [this](app::Result<app::SweepResult> r) {
        checkUnfinishedSweep();
        if (failed(r, QStringLiteral("sweep"), tr("Sweep failed"))) return;
        m_lastSweep = r.value();
        m_sweep->setResult(*m_lastSweep);
        noteStored(m_lastSweep->stored);
        int measured = static_cast<int>(m_lastSweep->points.size()) - m_lastSweep->resumedPoints;
        if (m_lastSweep->resumedPoints > 0)
          setStatus(tr("Sweep of %1 resumed: %2 points kept from the store, %3 measured")
                        .arg(qs(m_lastSweep->model))
                        .arg(m_lastSweep->resumedPoints)
                        .arg(measured));
        else
          setStatus(tr("Sweep of %1 done: %2 points").arg(qs(m_lastSweep->model)).arg(m_lastSweep->points.size()));
        finishJob(QStringLiteral("sweep"), true);
      });
  updateActions();
}

void MainWindow::checkUnfinishedSweep() {
  if (m_modelPath.isEmpty()) return;
  std::string path = m_modelPath.toStdString();
  app::StoreOptions store = storeOptions();
  m_sweepStateJob->start([path, store](const JobControl&) { return app::unfinishedSweep(path, store); },
                         [this](app::Result<std::optional<app::UnfinishedSweep>> r) {
                           // A store that cannot be read offers nothing to resume; the session
                           // browser reports why.
                           m_unfinishedSweep = r ? r.value() : std::nullopt;
                           m_sweep->setUnfinished(m_unfinishedSweep);
                           finishJob(QStringLiteral("sweep-state"), r.ok());
                         });
}

void MainWindow::tune(bool resume) {
  if (!m_model) return;
  app::TuneOptions base;
  base.build = buildOptions();
  base.batch = batchOption();
  base.inputs = m_inputShapes;
  base.store = storeOptions();
  if (!resume || m_tuning->recordsPath().isEmpty()) {
    // A fresh run writes a fresh records file; Resume continues the one in the field.
    QString dir = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) + QStringLiteral("/tuning");
    QDir().mkpath(dir);
    m_tuning->setRecordsPath(QDir(dir).filePath(QStringLiteral("%1-%2.jsonl")
                                                   .arg(qs(m_model->name), QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss")))));
  }
  app::TuneOptions o = m_tuning->options(base);
  // Candidates run in `kiln tune-worker` processes: the kiln built beside this executable.
  for (const char* rel : {"kiln", "../kiln"}) {
    QFileInfo worker(QDir(QCoreApplication::applicationDirPath()).filePath(QLatin1String(rel)));
    if (worker.isFile() && worker.isExecutable()) {
      o.workerCommand = worker.canonicalFilePath().toStdString();
      break;
    }
  }
  std::string path = m_modelPath.toStdString();
  QPointer<MainWindow> self(this);
  showTab(TuningTab);
  m_tuning->setMessage(resume ? tr("Resuming from %1…").arg(qs(o.recordsPath)) : tr("Extracting tuning tasks…"));
  quint64 id = m_tuneJob->start(
      [path, o, self](const JobControl& control) {
        quint64 job = control.id();
        // Progress structs travel to the GUI thread like results: queued, checked against the
        // current job id there.
        auto post = [self, job](auto apply) {
          QMetaObject::invokeMethod(
              QCoreApplication::instance(),
              [self, job, apply] {
                if (self && self->m_tuneJob->currentJobId() == job) apply(*self);
              },
              Qt::QueuedConnection);
        };
        auto tasks = app::tuneTasks(path, o);
        if (tasks) {
          std::vector<app::TuneTaskInfo> list = tasks.value();
          post([list](MainWindow& w) { w.m_tuning->setTasks(list); });
        }
        return app::tune(path, o, [control, post](const app::TuneProgress& p) {
          post([p](MainWindow& w) { w.m_tuning->applyProgress(p); });
          control.report(qs(p.message), p.totalBudget > 0 ? static_cast<double>(p.totalTrials) / p.totalBudget : -1);
          return !control.cancelled();
        });
      },
      [this](app::Result<app::TuneResult> r) {
        m_tuning->setRunning(false);
        if (!r) {
          m_tuning->setMessage(tr("Tuning is not possible: %1").arg(qs(r.error().message)), true);
          setStatus(tr("Tuning failed: %1").arg(qs(r.error().message)));
          finishJob(QStringLiteral("tune"), false);
          return;
        }
        m_tuning->setResult(r.value());
        noteStored(r.value().stored);
        const app::TuneResult& t = r.value();
        QString speed = t.untunedMs > 0 && t.tunedMs > 0
                            ? tr(": end to end %1 → %2").arg(formatMs(t.untunedMs), formatMs(t.tunedMs))
                            : QString();
        setStatus((t.cancelled ? tr("Tuning cancelled; measured records kept") : tr("Tuning done")) + speed);
        finishJob(QStringLiteral("tune"), true);
      });
  Q_UNUSED(id);
  updateActions();
}

void MainWindow::exportLibrary(const QString& directory) {
  if (!m_model) return;
  auto model = m_model;
  app::BuildOptions options = buildOptions();
  std::string dir = directory.toStdString();
  setStatus(tr("Exporting %1 to %2…").arg(qs(model->name), directory));
  m_exportJob->start([model, options, dir](const JobControl&) { return app::exportModel(model, options, dir); },
                     [this](app::Result<app::ExportResult> r) {
                       if (failed(r, QStringLiteral("export"), tr("Export failed"))) return;
                       const app::ExportResult& e = r.value();
                       QStringList files;
                       for (const auto& f : e.files) files << QStringLiteral("%1 (%2)").arg(qs(f.name), formatBytes(static_cast<double>(f.bytes)));
                       QString text = tr("Exported a module for %1 into %2:\n%3").arg(qs(e.targetString), qs(e.path), files.join(QStringLiteral("\n")));
                       if (!e.linked) text += QStringLiteral("\n\n") + qs(e.note);
                       setStatus(tr("Exported %1 kernels to %2").arg(e.numKernels).arg(qs(e.path)));
                       auto* box = new QMessageBox(QMessageBox::Information, tr("Library exported"), text, QMessageBox::Ok, this);
                       box->setAttribute(Qt::WA_DeleteOnClose);
                       box->open();
                       finishJob(QStringLiteral("export"), true);
                     });
  updateActions();
}

void MainWindow::exportReport(int64_t sessionId, const QString& file) {
  std::string db = dbPath().toStdString(), out = file.toStdString();
  app::ReportFormat format = file.endsWith(QStringLiteral(".csv"), Qt::CaseInsensitive) ? app::ReportFormat::Csv : app::ReportFormat::Html;
  m_exportJob->start(
      [db, out, sessionId, format](const JobControl&) -> QString {
        auto report = app::sessionReport(db, sessionId, format);
        if (!report) return qs(report.error().message);
        std::ofstream f(out, std::ios::binary);
        f << report.value();
        return f.good() ? QString() : QStringLiteral("%1: cannot write").arg(qs(out));
      },
      [this, file](QString error) {
        if (!error.isEmpty()) showError(tr("Report failed"), error);
        else setStatus(tr("Report written to %1").arg(file));
        finishJob(QStringLiteral("report"), error.isEmpty());
      });
  updateActions();
}

void MainWindow::noteStored(const app::StoredIds& ids) {
  if (ids.sessionId) m_lastSessionId = ids.sessionId;
  m_exportReportAction->setEnabled(m_lastSessionId != 0);
  refreshSessions();
}

void MainWindow::refreshSessions() {
  std::string db = dbPath().toStdString();
  m_sessionJob->start(
      [db](const JobControl&) -> std::pair<std::vector<profiler::SessionData>, QString> {
        auto list = app::listSessions(db);
        if (!list) return {{}, qs(list.error().message)};
        std::vector<profiler::SessionData> sessions;
        for (const auto& s : list.value()) {
          auto data = app::loadSession(db, s.id);
          if (data) sessions.push_back(std::move(data.value()));
        }
        return {std::move(sessions), QString()};
      },
      [this](std::pair<std::vector<profiler::SessionData>, QString> r) {
        if (!r.second.isEmpty()) m_sessions->setError(tr("Cannot read the session store: %1").arg(r.second));
        else m_sessions->setSessions(std::move(r.first), dbPath());
        finishJob(QStringLiteral("sessions"), r.second.isEmpty());
      });
}

std::optional<std::pair<int64_t, int64_t>> MainWindow::lastTwoProfiledBuilds() const {
  if (m_profiledBuilds.size() < 2) return std::nullopt;
  return std::pair{m_profiledBuilds[m_profiledBuilds.size() - 2], m_profiledBuilds.back()};
}

void MainWindow::diffBuilds(int64_t buildA, int64_t buildB) {
  std::string db = dbPath().toStdString();
  m_sessionJob->start([db, buildA, buildB](const JobControl&) { return app::diffBuilds(db, buildA, buildB); },
                      [this](app::Result<app::BuildDiff> r) {
                        if (failed(r, QStringLiteral("diff"), tr("Cannot diff these builds"))) return;
                        m_diff->setDiff(r.value());
                        m_roofline->setComparison(r.value());
                        showTab(DiffTab);
                        finishJob(QStringLiteral("diff"), true);
                      });
}

void MainWindow::openStoredRun(int64_t sessionId, int64_t runId) {
  const profiler::SessionData* s = m_sessions->model()->session(sessionId);
  const profiler::StoredRun* run = s ? s->run(runId) : nullptr;
  if (!run) return;
  QString title = QStringLiteral("%1, stored %2 run #%3").arg(qs(s->summary.model.name), qs(run->kind)).arg(runId);
  if (run->kind == "profile") {
    for (const auto& p : s->profiles) {
      if (p.runId != runId) continue;
      m_profile->setProfile(p.profile, title);
      const profiler::MachineCeilings* ceilings = s->ceilingsOfRun(runId);
      m_roofline->setProfile(p.profile, ceilings ? std::optional(*ceilings) : std::nullopt, title);
      showTab(ProfileTab);
      return;
    }
  }
  if (run->kind == "compare") {
    app::CompareResult c;
    c.model = s->summary.model.name;
    c.threads = run->context.threads;
    c.target = run->context.target;
    c.optLevel = run->context.optLevel;
    c.torchVersion = run->context.torchVersion;
    c.blas = run->context.blas;
    c.cpu = run->context.cpu;
    for (const auto& m : s->measurements) {
      if (m.runId != runId) continue;
      c.batch = m.measurement.batch;
      c.backends.push_back(backendFromMeasurement(m.measurement));
    }
    m_compare->addResult(c, QStringLiteral("Kiln -O%1 (run #%2)").arg(run->context.optLevel).arg(runId));
    showTab(CompareTab);
    return;
  }
  if (run->kind == "sweep") {
    for (const auto& sw : s->sweeps) {
      if (sw.runId != runId) continue;
      app::SweepResult r;
      r.model = s->summary.model.name;
      r.context = run->context;
      r.batches = sw.batches;
      r.backends = sw.backends;
      for (const auto& m : s->measurements)
        if (m.sweepId == sw.id) r.points.push_back(m.measurement);
      m_sweep->setResult(r);
      showTab(SweepTab);
      return;
    }
  }
  setStatus(tr("Run #%1 has no result to show").arg(runId));
}

void MainWindow::cancelJobs() {
  bool any = isBusy();
  m_tuneJob->requestCancel();  // tuning keeps what it measured: wait for its partial result
  for (JobTracker* t : findChildren<JobTracker*>())
    if (t != m_tuneJob) t->cancel();
  if (any) setStatus(tr("Cancelled"));
  updateActions();
  if (!isBusy()) emit idle();
}

}  // namespace kiln::gui
