// The main window's construction: actions, toolbar, views, menus, settings, drag and drop and the
// sample models. The jobs behind the actions are in actions.cpp.
#include "app/gui/main_window.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDir>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QGridLayout>
#include <QLabel>
#include <QListWidget>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPainter>
#include <QProgressBar>
#include <QSettings>
#include <QSpinBox>
#include <QStatusBar>
#include <QStyle>
#include <QTabWidget>
#include <QThread>
#include <QTimer>
#include <QToolBar>
#include <QToolButton>
#include <QVBoxLayout>

#include "app/gui/compare_view.h"
#include "app/gui/doctor_view.h"
#include "app/gui/format.h"
#include "app/gui/graph_view.h"
#include "app/gui/input_shapes_dialog.h"
#include "app/gui/ir_view.h"
#include "app/gui/job_runner.h"
#include "app/gui/profile_view.h"
#include "app/gui/roofline_view.h"
#include "app/gui/session_view.h"
#include "app/gui/sweep_view.h"
#include "app/gui/tuning_view.h"

namespace kiln::gui {

namespace {
constexpr int kMaxRecent = 8;
}

QIcon workbenchIcon() {
  // Drawn rather than loaded: no image plugin or resource file needed for one small glyph.
  QIcon icon;
  for (int size : {16, 32, 64, 128}) {
    QPixmap pm(size, size);
    pm.fill(Qt::transparent);
    QPainter p(&pm);
    p.setRenderHint(QPainter::Antialiasing);
    p.setPen(Qt::NoPen);
    p.setBrush(QColor(0xe6, 0x6a, 0x1f));
    p.drawRoundedRect(QRectF(0, 0, size, size), size * 0.18, size * 0.18);
    QFont f = p.font();
    f.setBold(true);
    f.setPixelSize(static_cast<int>(size * 0.7));
    p.setFont(f);
    p.setPen(Qt::white);
    p.drawText(QRectF(0, 0, size, size), Qt::AlignCenter, QStringLiteral("K"));
    p.end();
    icon.addPixmap(pm);
  }
  return icon;
}

MainWindow::MainWindow(WorkbenchOptions options, QWidget* parent)
    : QMainWindow(parent), m_options(std::move(options)) {
  setWindowTitle(tr("Kiln Workbench"));
  setWindowIcon(workbenchIcon());
  setAcceptDrops(true);
  m_openJob = new JobTracker(QStringLiteral("open"), this);
  m_compileJob = new JobTracker(QStringLiteral("compile"), this);
  m_inspectJob = new JobTracker(QStringLiteral("inspect"), this);
  m_codeJob = new JobTracker(QStringLiteral("code"), this);
  m_profileJob = new JobTracker(QStringLiteral("profile"), this);
  m_compareJob = new JobTracker(QStringLiteral("compare"), this);
  m_sweepJob = new JobTracker(QStringLiteral("sweep"), this);
  m_sweepStateJob = new JobTracker(QStringLiteral("sweep-state"), this);
  m_tuneJob = new JobTracker(QStringLiteral("tune"), this);
  m_exportJob = new JobTracker(QStringLiteral("export"), this);
  m_sessionJob = new JobTracker(QStringLiteral("sessions"), this);
  m_doctorJob = new JobTracker(QStringLiteral("doctor"), this);
  m_targets = app::targetChoices();

  createActions();
  createViews();
  createToolBar();
  createMenus();
  connectTrackers();

  m_statusLabel = new QLabel(tr("Ready"), this);
  m_statusLabel->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);  // long messages elide, not widen
  m_progress = new QProgressBar(this);
  m_progress->setMaximumWidth(180);
  m_progress->setTextVisible(false);
  m_progress->hide();
  m_cancelButton = new QToolButton(this);
  m_cancelButton->setDefaultAction(m_cancelAction);
  m_cancelButton->hide();
  m_modelLabel = new QLabel(this);
  m_modelLabel->setStyleSheet(QStringLiteral("color: #444; padding-right: 6px"));
  m_modelLabel->setMaximumWidth(420);
  statusBar()->addWidget(m_statusLabel, 1);
  statusBar()->addPermanentWidget(m_progress);
  statusBar()->addPermanentWidget(m_cancelButton);
  statusBar()->addPermanentWidget(m_modelLabel);

  restoreSettings();
  updateActions();
  refreshSessions();
  if (m_options.firstStartDialog) QTimer::singleShot(0, this, &MainWindow::offerSampleModels);
}

MainWindow::~MainWindow() {
  // Trackers cancel in their destructors; results still in flight find the QPointer null. Their
  // signals must not reach this half-destroyed window (a tracker cancelling a running job while
  // QWidget deletes the children called updateActions() → findChildren() on freed children).
  for (JobTracker* t : findChildren<JobTracker*>()) t->disconnect(this);
}

JobTracker* MainWindow::tracker(const QString& name) const {
  for (JobTracker* t : findChildren<JobTracker*>())
    if (t->name() == name) return t;
  return nullptr;
}

bool MainWindow::isBusy() const {
  for (JobTracker* t : findChildren<JobTracker*>())
    if (t->isRunning()) return true;
  return false;
}

QString MainWindow::dbPath() const { return qs(app::resolveDbPath(m_options.dbPath.toStdString())); }

void MainWindow::createActions() {
  auto make = [this](const QString& text, const QKeySequence& key, const QString& tip, QStyle::StandardPixmap icon,
                     auto slot) {
    auto* a = new QAction(style()->standardIcon(icon), text, this);
    a->setShortcut(key);
    a->setToolTip(QStringLiteral("%1 (%2)").arg(tip, key.toString(QKeySequence::NativeText)));
    a->setStatusTip(tip);
    connect(a, &QAction::triggered, this, slot);
    return a;
  };
  m_openAction = make(tr("&Open…"), QKeySequence::Open, tr("Open a model: TorchScript, torch.export (.pt2) or ONNX"), QStyle::SP_DialogOpenButton, [this] {
    QSettings settings;
    QString dir = settings.value(QStringLiteral("lastDir"), m_options.modelsDir).toString();
    QString path = QFileDialog::getOpenFileName(
        this, tr("Open model"), dir,
        tr("Models (*.pt *.pth *.pt2 *.onnx);;TorchScript (*.pt *.pth);;torch.export (*.pt2);;ONNX (*.onnx);;All files (*)"));
    if (!path.isEmpty()) openModelFile(path);
  });
  m_compileAction = make(tr("&Compile"), QKeySequence(Qt::CTRL | Qt::Key_B), tr("Compile the model for the target and opt level"),
                         QStyle::SP_MediaPlay, [this] { compile(); });
  m_profileAction = make(tr("&Profile"), QKeySequence(Qt::CTRL | Qt::Key_P), tr("Time every kernel call (per-operator profile)"),
                         QStyle::SP_FileDialogDetailedView, [this] { profile(); });
  m_compareAction = make(tr("Co&mpare"), QKeySequence(Qt::CTRL | Qt::Key_R), tr("Compare latency with PyTorch eager and compiled"),
                         QStyle::SP_BrowserReload, [this] { compareBackends(); });
  m_sweepAction = make(tr("&Sweep"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_S), tr("Latency and throughput over batch sizes"),
                       QStyle::SP_ArrowUp, [this] { sweep(); });
  m_tuneAction = make(tr("&Tune"), QKeySequence(Qt::CTRL | Qt::Key_T), tr("Autotune the kernels' schedules"),
                      QStyle::SP_ComputerIcon, [this] { tune(false); });
  m_exportLibAction = make(tr("Export &library…"), QKeySequence(Qt::CTRL | Qt::Key_E),
                           tr("Write a module directory the runtime alone can load"), QStyle::SP_DriveHDIcon, [this] {
                             QString dir = QFileDialog::getExistingDirectory(this, tr("Export module into"), QDir::homePath());
                             if (!dir.isEmpty()) exportLibrary(QDir(dir).filePath(QFileInfo(m_modelPath).completeBaseName() + QStringLiteral("_module")));
                           });
  m_exportReportAction = make(tr("Export &report…"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_E),
                              tr("Write the session as an HTML page or CSV"), QStyle::SP_FileIcon, [this] {
                                int64_t session = m_sessions->currentSession() ? m_sessions->currentSession() : m_lastSessionId;
                                if (!session) {
                                  showError(tr("No session"), tr("Profile, compare or sweep first, or select a session in the browser."));
                                  return;
                                }
                                QString file = QFileDialog::getSaveFileName(this, tr("Export report"),
                                                                            QDir::home().filePath(QStringLiteral("kiln-session-%1.html").arg(session)),
                                                                            tr("HTML report (*.html);;CSV (*.csv)"));
                                if (!file.isEmpty()) exportReport(session, file);
                              });
  m_cancelAction = make(tr("Cancel"), QKeySequence(Qt::Key_Escape), tr("Stop the running jobs"), QStyle::SP_DialogCancelButton,
                        [this] { cancelJobs(); });
}

void MainWindow::createToolBar() {
  QToolBar* bar = addToolBar(tr("Main"));
  bar->setObjectName(QStringLiteral("mainToolBar"));
  bar->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  bar->setMovable(false);
  bar->addAction(m_openAction);
  bar->addSeparator();

  m_target = new QComboBox(this);
  for (const auto& t : m_targets) {
    m_target->addItem(qs(t.label), qs(t.spec));
    m_target->setItemData(m_target->count() - 1, qs(t.description) + QStringLiteral("\n") + qs(t.spec), Qt::ToolTipRole);
  }
  m_target->setToolTip(tr("Code-generation target; export-only targets can be inspected and exported, not run"));
  m_target->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  m_target->setMaximumWidth(250);
  m_opt = new QComboBox(this);
  const char* levels[] = {"no optimization", "+ constant folding, CSE, DCE", "+ operator fusion",
                          "+ packed NCHW[x]c layout (default)", "+ fast-math code generation"};
  for (int i = 0; i <= 4; ++i) {
    m_opt->addItem(QStringLiteral("-O%1").arg(i), i);
    m_opt->setItemData(i, QString::fromLatin1(levels[i]), Qt::ToolTipRole);
  }
  m_opt->setCurrentIndex(3);
  m_opt->setToolTip(tr("Optimization level (pass pipeline)"));
  m_threads = new QSpinBox(this);
  m_threads->setRange(0, std::max(1, QThread::idealThreadCount()));
  m_threads->setSpecialValueText(tr("all"));
  m_threads->setToolTip(tr("Threads for every backend (all: every hardware thread)"));
  m_batch = new QSpinBox(this);
  m_batch->setRange(0, 1024);
  m_batch->setSpecialValueText(tr("model's"));
  m_batch->setToolTip(tr("Batch size (model's: the batch the model file declares)"));

  auto label = [this](const QString& text) {
    auto* l = new QLabel(text, this);
    l->setContentsMargins(8, 0, 3, 0);
    return l;
  };
  bar->addWidget(label(tr("Target")));
  bar->addWidget(m_target);
  bar->addWidget(label(tr("Opt")));
  bar->addWidget(m_opt);
  bar->addWidget(label(tr("Threads")));
  bar->addWidget(m_threads);
  bar->addWidget(label(tr("Batch")));
  bar->addWidget(m_batch);
  bar->addSeparator();
  for (QAction* a : {m_compileAction, m_profileAction, m_compareAction, m_sweepAction, m_tuneAction}) bar->addAction(a);
  bar->addSeparator();
  // Exports live in the File menu; the toolbar stays within 1280 px.
  connect(m_target, &QComboBox::currentIndexChanged, this, &MainWindow::updateActions);
}

void MainWindow::createViews() {
  m_tabs = new QTabWidget(this);
  m_tabs->setDocumentMode(true);
  m_graph = new GraphView(this);
  m_ir = new IrView(this);
  m_profile = new ProfileView(this);
  m_compare = new CompareView(this);
  m_sweep = new SweepView(this);
  m_tuning = new TuningView(this);
  m_diff = new SessionDiffView(this);
  m_doctor = new DoctorView(this);
  m_roofline = new RooflineView(this);
  m_tabs->addTab(m_graph, tr("Graph"));
  m_tabs->addTab(m_ir, tr("IR"));
  m_tabs->addTab(m_profile, tr("Profile"));
  m_tabs->addTab(m_compare, tr("Compare"));
  m_tabs->addTab(m_sweep, tr("Batch sweep"));
  m_tabs->addTab(m_tuning, tr("Tuning"));
  m_tabs->addTab(m_diff, tr("Sessions diff"));
  m_tabs->addTab(m_doctor, tr("Doctor"));
  m_tabs->addTab(m_roofline, tr("Roofline"));
  setCentralWidget(m_tabs);

  m_sessions = new SessionBrowser(this);
  m_sessionDock = new QDockWidget(tr("Sessions"), this);
  m_sessionDock->setObjectName(QStringLiteral("sessionsDock"));
  m_sessionDock->setWidget(m_sessions);
  m_sessionDock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetClosable | QDockWidget::DockWidgetFloatable);
  addDockWidget(Qt::LeftDockWidgetArea, m_sessionDock);
  resizeDocks({m_sessionDock}, {300}, Qt::Horizontal);

  connect(m_graph, &GraphView::kernelCodeRequested, this, &MainWindow::requestKernelCode);
  connect(m_ir, &IrView::moduleTextRequested, this, &MainWindow::requestModuleText);
  connect(m_profile, &ProfileView::callActivated, this, [this](int call) {
    m_graph->selectCall(call);
    showTab(GraphTab);
  });
  connect(m_roofline, &RooflineView::callActivated, this, [this](int call) {
    // The call stays on screen; the Profile and Graph views show it selected when opened.
    m_profile->selectCall(call);
    m_graph->selectCall(call);
  });
  connect(m_sweep, &SweepView::runRequested, this, [this] { sweep(); });
  connect(m_sweep, &SweepView::resumeRequested, this, [this] { sweep(true); });
  connect(m_tuning, &TuningView::startRequested, this, [this](bool resume) { tune(resume); });
  connect(m_tuning, &TuningView::cancelRequested, this, [this] { m_tuneJob->requestCancel(); });
  connect(m_sessions, &SessionBrowser::refreshRequested, this, &MainWindow::refreshSessions);
  connect(m_sessions, &SessionBrowser::openRunRequested, this, &MainWindow::openStoredRun);
  connect(m_sessions, &SessionBrowser::diffRequested, this, &MainWindow::diffBuilds);
  connect(m_sessions, &SessionBrowser::reportRequested, this, [this](int64_t session) {
    QString file = QFileDialog::getSaveFileName(this, tr("Export report"),
                                                QDir::home().filePath(QStringLiteral("kiln-session-%1.html").arg(session)),
                                                tr("HTML report (*.html);;CSV (*.csv)"));
    if (!file.isEmpty()) exportReport(session, file);
  });
}

void MainWindow::createMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(m_openAction);
  file->addAction(tr("Open &Python model…"), this, &MainWindow::openPythonModel);
  m_recentMenu = file->addMenu(tr("Open &recent"));
  QMenu* samples = file->addMenu(tr("&Sample models"));
  populateSampleMenu(samples);
  file->addSeparator();
  file->addAction(m_exportLibAction);
  file->addAction(m_exportReportAction);
  file->addSeparator();
  QAction* quit = file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);
  quit->setMenuRole(QAction::QuitRole);

  QMenu* run = menuBar()->addMenu(tr("&Run"));
  for (QAction* a : {m_compileAction, m_profileAction, m_compareAction, m_sweepAction, m_tuneAction}) run->addAction(a);
  run->addSeparator();
  QAction* doctor = run->addAction(tr("&Diagnose import"), this, &MainWindow::diagnose);
  doctor->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_D));
  doctor->setToolTip(tr("List every operator of the model and whether Kiln compiles it"));
  run->addSeparator();
  run->addAction(m_cancelAction);

  QMenu* view = menuBar()->addMenu(tr("&View"));
  for (int i = 0; i < TabCount; ++i) {
    QAction* a = view->addAction(m_tabs->tabText(i), this, [this, i] { showTab(static_cast<Tab>(i)); });
    a->setShortcut(QKeySequence(Qt::CTRL | static_cast<Qt::Key>(Qt::Key_1 + i)));
  }
  view->addSeparator();
  view->addAction(m_sessionDock->toggleViewAction());
  QAction* refresh = view->addAction(tr("Refresh sessions"), this, &MainWindow::refreshSessions);
  refresh->setShortcut(QKeySequence::Refresh);

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&About Kiln Workbench"), this, [this] {
    QMessageBox::about(this, tr("About Kiln Workbench"),
                       tr("<h3>Kiln Workbench %1</h3><p>A deep-learning model compiler for CPUs: compile PyTorch models, "
                          "inspect their fused graphs and kernels, profile them and compare with PyTorch.</p>"
                          "<p>Session store: <tt>%2</tt></p>")
                           .arg(qs(app::version()), dbPath().toHtmlEscaped()));
  });
}

void MainWindow::connectTrackers() {
  for (JobTracker* t : findChildren<JobTracker*>()) {
    connect(t, &JobTracker::started, this, &MainWindow::updateActions);
    connect(t, &JobTracker::finished, this, &MainWindow::updateActions);
    connect(t, &JobTracker::cancelled, this, &MainWindow::updateActions);
    connect(t, &JobTracker::progressed, this, [this](quint64, const QString& text, double fraction) {
      setStatus(text);
      if (fraction >= 0) {
        m_progress->setRange(0, 1000);
        m_progress->setValue(static_cast<int>(fraction * 1000));
      }
    });
  }
}

void MainWindow::updateActions() {
  bool haveModel = !m_modelPath.isEmpty() && m_model;
  int t = m_target->currentIndex();
  bool runnable = t < 0 || t >= static_cast<int>(m_targets.size()) || m_targets[t].runnable;
  m_compileAction->setEnabled(haveModel);
  for (QAction* a : {m_profileAction, m_compareAction, m_sweepAction, m_tuneAction}) {
    a->setEnabled(haveModel && runnable);
    a->setStatusTip(runnable ? a->toolTip() : tr("The target is export-only: it cannot run on this machine"));
  }
  m_exportLibAction->setEnabled(haveModel);
  bool busy = isBusy();
  m_cancelAction->setEnabled(busy);
  m_progress->setVisible(busy);
  m_cancelButton->setVisible(busy);
  if (busy && m_progress->maximum() != 0 && m_progress->value() <= 0) m_progress->setRange(0, 0);
  if (!busy) m_progress->setRange(0, 0);
  m_tuning->setRunning(m_tuneJob->isRunning());
}

void MainWindow::setStatus(const QString& text) { m_statusLabel->setText(text); }
QString MainWindow::statusText() const { return m_statusLabel->text(); }

void MainWindow::showTab(Tab tab) { m_tabs->setCurrentIndex(tab); }

void MainWindow::setTarget(const QString& spec) {
  int i = m_target->findData(spec);
  if (i >= 0) m_target->setCurrentIndex(i);
}
void MainWindow::setOptLevel(int level) { m_opt->setCurrentIndex(std::clamp(level, 0, 4)); }
void MainWindow::setThreads(int threads) { m_threads->setValue(threads); }
void MainWindow::setBatch(int batch) { m_batch->setValue(batch); }

app::BuildOptions MainWindow::buildOptions() const {
  app::BuildOptions o;
  o.target = m_target->currentData().toString().toStdString();
  if (o.target.empty()) o.target = "llvm";
  o.optLevel = m_opt->currentData().toInt();
  o.threads = m_threads->value();
  return o;
}

app::StoreOptions MainWindow::storeOptions() const {
  app::StoreOptions s;
  s.dbPath = m_options.dbPath.toStdString();
  return s;
}

int64_t MainWindow::batchOption() const { return m_batch->value(); }

QString MainWindow::buildLabel() const {
  QString label = QStringLiteral("Kiln -O%1").arg(m_opt->currentData().toInt());
  int t = m_target->currentIndex();
  if (t > 0 && t < static_cast<int>(m_targets.size())) label += QStringLiteral("\n") + qs(m_targets[t].spec).section(QLatin1Char('='), -1);
  if (batchOption() > 0) label += QStringLiteral(" b%1").arg(batchOption());
  return label;
}

void MainWindow::restoreSettings() {
  QSettings s;
  if (!m_options.persistSettings || !restoreGeometry(s.value(QStringLiteral("geometry")).toByteArray())) resize(1280, 800);
  if (m_options.persistSettings) {
    restoreState(s.value(QStringLiteral("windowState")).toByteArray());
    setTarget(s.value(QStringLiteral("target"), QStringLiteral("llvm")).toString());
    setOptLevel(s.value(QStringLiteral("optLevel"), 3).toInt());
    m_threads->setValue(s.value(QStringLiteral("threads"), 0).toInt());
    m_batch->setValue(s.value(QStringLiteral("batch"), 0).toInt());
    m_tabs->setCurrentIndex(s.value(QStringLiteral("tab"), 0).toInt());
    m_compare->setLogScale(s.value(QStringLiteral("compareLogScale"), false).toBool());
  }
  updateRecentMenu();
}

void MainWindow::saveSettings() {
  if (!m_options.persistSettings) return;
  QSettings s;
  s.setValue(QStringLiteral("geometry"), saveGeometry());
  s.setValue(QStringLiteral("windowState"), saveState());
  s.setValue(QStringLiteral("target"), m_target->currentData().toString());
  s.setValue(QStringLiteral("optLevel"), m_opt->currentData().toInt());
  s.setValue(QStringLiteral("threads"), m_threads->value());
  s.setValue(QStringLiteral("batch"), m_batch->value());
  s.setValue(QStringLiteral("tab"), m_tabs->currentIndex());
  s.setValue(QStringLiteral("compareLogScale"), m_compare->logScale());
}

void MainWindow::addRecent(const QString& path) {
  if (!m_options.persistSettings) return;
  QSettings s;
  QStringList recent = s.value(QStringLiteral("recentFiles")).toStringList();
  QString absolute = QFileInfo(path).absoluteFilePath();
  recent.removeAll(absolute);
  recent.prepend(absolute);
  while (recent.size() > kMaxRecent) recent.removeLast();
  s.setValue(QStringLiteral("recentFiles"), recent);
  s.setValue(QStringLiteral("lastDir"), QFileInfo(path).absolutePath());
  updateRecentMenu();
}

void MainWindow::updateRecentMenu() {
  if (!m_recentMenu) return;
  m_recentMenu->clear();
  QStringList recent = m_options.persistSettings ? QSettings().value(QStringLiteral("recentFiles")).toStringList() : QStringList();
  for (int i = 0; i < recent.size(); ++i) {
    QString path = recent[i];
    QAction* a = m_recentMenu->addAction(QStringLiteral("&%1 %2").arg(i + 1).arg(QFileInfo(path).fileName()),
                                         this, [this, path] { openModelFile(path); });
    a->setToolTip(path);
    a->setStatusTip(path);
  }
  m_recentMenu->setEnabled(!recent.isEmpty());
}

namespace {
struct Sample {
  QString name, path, kind;
};

// The sample models' manifest (written by resources/models/export_models.py).
std::vector<Sample> readSamples(const QString& dir) {
  std::vector<Sample> out;
  QFile f(QDir(dir).filePath(QStringLiteral("manifest.json")));
  if (!f.open(QIODevice::ReadOnly)) return out;
  QJsonArray models = QJsonDocument::fromJson(f.readAll()).object().value(QStringLiteral("models")).toArray();
  for (const QJsonValue& v : models) {
    QJsonObject o = v.toObject();
    QString path = QDir(dir).filePath(o.value(QStringLiteral("file")).toString());
    if (QFileInfo::exists(path))
      out.push_back({o.value(QStringLiteral("name")).toString(), path, o.value(QStringLiteral("kind")).toString()});
  }
  return out;
}
}  // namespace

void MainWindow::populateSampleMenu(QMenu* menu) {
  std::vector<Sample> samples = readSamples(m_options.modelsDir);
  if (samples.empty()) {
    menu->addAction(tr("(none found in %1)").arg(m_options.modelsDir))->setEnabled(false);
    return;
  }
  QMenu* ops = nullptr;
  for (const Sample& s : samples) {
    if (s.kind == QLatin1String("network")) {
      menu->addAction(s.name, this, [this, p = s.path] { openModelFile(p); });
      continue;
    }
    if (!ops) ops = menu->addMenu(tr("Single operators"));
    ops->addAction(s.name, this, [this, p = s.path] { openModelFile(p); });
  }
}

void MainWindow::offerSampleModels() {
  QSettings s;
  if (!m_modelPath.isEmpty() || s.value(QStringLiteral("sampleOffered"), false).toBool()) return;
  if (!s.value(QStringLiteral("recentFiles")).toStringList().isEmpty()) return;
  std::vector<Sample> samples = readSamples(m_options.modelsDir);
  if (samples.empty()) return;
  s.setValue(QStringLiteral("sampleOffered"), true);

  QDialog dialog(this);
  dialog.setWindowTitle(tr("Welcome to Kiln Workbench"));
  auto* text = new QLabel(tr("<h3>Open a sample model?</h3><p>These torchvision networks were exported with random "
                             "weights when Kiln was built. You can also open your own TorchScript file with "
                             "<b>File ▸ Open</b> or drop it on the window.</p>"),
                          &dialog);
  text->setWordWrap(true);
  auto* list = new QListWidget(&dialog);
  for (const Sample& sample : samples) {
    if (sample.kind != QLatin1String("network")) continue;
    auto* item = new QListWidgetItem(sample.name, list);
    item->setData(Qt::UserRole, sample.path);
    item->setToolTip(sample.path);
  }
  list->setCurrentRow(0);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Open | QDialogButtonBox::Cancel, &dialog);
  connect(buttons, &QDialogButtonBox::accepted, &dialog, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
  connect(list, &QListWidget::itemDoubleClicked, &dialog, &QDialog::accept);
  auto* layout = new QVBoxLayout(&dialog);
  layout->addWidget(text);
  layout->addWidget(list);
  layout->addWidget(buttons);
  dialog.resize(420, 360);
  if (dialog.exec() == QDialog::Accepted && list->currentItem())
    openModelFile(list->currentItem()->data(Qt::UserRole).toString());
}

void MainWindow::closeEvent(QCloseEvent* event) {
  saveSettings();
  cancelJobs();
  event->accept();
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
  if (event->mimeData()->hasUrls()) event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event) {
  const QList<QUrl> urls = event->mimeData()->urls();
  if (urls.isEmpty() || !urls.front().isLocalFile()) return;
  openModelFile(urls.front().toLocalFile());
  event->acceptProposedAction();
}

void MainWindow::showError(const QString& title, const QString& message) {
  // Non-blocking: a job's result must not spin a nested event loop inside the queued call.
  if (m_errorBox) m_errorBox->close();
  // The façade's diagnostics sometimes repeat their file prefix ("a.pt: a.pt: ..."): show it once.
  QString text = message;
  int colon = text.indexOf(QStringLiteral(": "));
  if (colon > 0 && text.mid(colon + 2).startsWith(text.left(colon + 2))) text = text.mid(colon + 2);
  m_errorBox = new QMessageBox(QMessageBox::Warning, title, QStringLiteral("<b>%1</b>").arg(title.toHtmlEscaped()),
                               QMessageBox::Ok, this);
  m_errorBox->setInformativeText(text);
  // QMessageBox sizes itself to the title: a spacer row keeps long diagnostics from wrapping at
  // every word.
  if (auto* grid = qobject_cast<QGridLayout*>(m_errorBox->layout()))
    grid->addItem(new QSpacerItem(520, 0, QSizePolicy::Minimum, QSizePolicy::Expanding), grid->rowCount(), 0, 1,
                  grid->columnCount());
  m_errorBox->setAttribute(Qt::WA_DeleteOnClose);
  m_errorBox->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_errorBox->open();
  setStatus(title + QStringLiteral(": ") + text);
}

void MainWindow::finishJob(const QString& kind, bool ok) {
  updateActions();
  emit jobDone(kind, ok);
  if (!isBusy()) emit idle();
}

}  // namespace kiln::gui
