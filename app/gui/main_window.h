// Kiln Workbench's main window: the toolbar (model, target, opt level, threads, batch and the
// actions), the views as tabs, the session browser as a dock, and the jobs behind every action.
// All compiler and measurement work goes through the façade (app/facade.h, measure.h, tune.h,
// inspect.h) on JobTrackers; this class only turns results into views and errors into messages.
#pragma once

#include <QIcon>
#include <QMainWindow>
#include <QMessageBox>
#include <QPointer>
#include <QString>

#include <map>
#include <memory>
#include <optional>

#include "app/facade.h"
#include "app/inspect.h"
#include "app/tune.h"

class QAction;
class QComboBox;
class QLabel;
class QMenu;
class QProgressBar;
class QSpinBox;
class QTabWidget;
class QToolButton;

namespace kiln::gui {

class CompareView;
class DoctorView;
class GraphView;
class IrView;
class JobTracker;
class ProfileView;
class RooflineView;
class SessionBrowser;
class SessionDiffView;
class SweepView;
class TuningView;
class InputShapesDialog;

/// The application icon (an orange tile with a K), drawn at several sizes.
QIcon workbenchIcon();

struct WorkbenchOptions {
  QString dbPath;     // the session store ("" : the façade's default)
  QString modelsDir;  // the sample models (KILN_MODELS_DIR at build time, or --models-dir)
  bool firstStartDialog = true;  // offer the sample models when nothing was opened before
  bool persistSettings = true;   // tests and screenshots leave the user's settings alone
};

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  enum Tab { GraphTab, IrTab, ProfileTab, CompareTab, SweepTab, TuningTab, DiffTab, DoctorTab, RooflineTab, TabCount };

  explicit MainWindow(WorkbenchOptions options, QWidget* parent = nullptr);
  ~MainWindow() override;

  // The actions, callable from tests and the screenshot driver as well as the UI.
  /// `path`: a model file or a Python reference ("my_models.py:build"). A file that records no
  /// input shapes gets them from what was remembered for it, else from the shapes dialog.
  void openModelFile(const QString& path);
  /// File ▸ Open Python model: a .py file and the function that returns (nn.Module, inputs).
  void openPythonModel();
  void compile();
  void profile();
  void compareBackends();
  /// resume: continue the model's interrupted sweep (unfinishedSweep()) with its own settings.
  void sweep(bool resume = false);
  /// Looks up (on a job) whether the model's latest stored sweep is unfinished, for Resume.
  void checkUnfinishedSweep();
  void tune(bool resume = false);
  /// The import doctor on the current model, or on the last file that failed to open.
  void diagnose();
  void exportLibrary(const QString& directory);
  void exportReport(int64_t sessionId, const QString& file);
  void refreshSessions();
  void diffBuilds(int64_t buildA, int64_t buildB);
  void openStoredRun(int64_t sessionId, int64_t runId);
  void cancelJobs();

  void setTarget(const QString& spec);
  void setOptLevel(int level);
  void setThreads(int threads);
  void setBatch(int batch);
  void showTab(Tab tab);

  /// True while any job runs.
  bool isBusy() const;
  const QString& modelPath() const { return m_modelPath; }
  /// The input shapes given for the open model (empty when its file records them).
  const std::vector<app::InputSpec>& inputShapes() const { return m_inputShapes; }
  /// The shapes dialog while it asks (tests answer it).
  InputShapesDialog* shapesDialog() const;
  /// The shapes remembered for a file as it is now (same path, size and modification time).
  std::vector<app::InputSpec> rememberedShapes(const QString& path) const;
  std::shared_ptr<const app::Inspection> inspection() const { return m_inspection; }
  const std::optional<app::ProfileResult>& lastProfile() const { return m_lastProfile; }
  const std::optional<app::SweepResult>& lastSweep() const { return m_lastSweep; }
  const std::optional<app::UnfinishedSweep>& unfinishedSweep() const { return m_unfinishedSweep; }
  /// The status bar's message.
  QString statusText() const;
  std::optional<std::pair<int64_t, int64_t>> lastTwoProfiledBuilds() const;
  QString dbPath() const;

  GraphView* graphView() const { return m_graph; }
  IrView* irView() const { return m_ir; }
  ProfileView* profileView() const { return m_profile; }
  RooflineView* rooflineView() const { return m_roofline; }
  CompareView* compareView() const { return m_compare; }
  SweepView* sweepView() const { return m_sweep; }
  TuningView* tuningView() const { return m_tuning; }
  SessionBrowser* sessionBrowser() const { return m_sessions; }
  SessionDiffView* diffView() const { return m_diff; }
  DoctorView* doctorView() const { return m_doctor; }
  QTabWidget* tabs() const { return m_tabs; }
  JobTracker* tracker(const QString& name) const;
  /// The error box on screen, if any (tests close it).
  QMessageBox* errorBox() const { return m_errorBox; }

 signals:
  /// A job finished (its result shown, or its error reported). kind: "open", "compile", ...
  void jobDone(const QString& kind, bool ok);
  /// No job is running any more.
  void idle();

 protected:
  void closeEvent(QCloseEvent* event) override;
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;

 private:
  void createActions();
  void createToolBar();
  void createViews();
  void createMenus();
  void connectTrackers();
  void restoreSettings();
  void saveSettings();
  void updateActions();
  void updateRecentMenu();
  void addRecent(const QString& path);
  void offerSampleModels();
  void rememberShapes(const QString& path, const std::vector<app::InputSpec>& specs);
  void askForShapes(const QString& path, const std::vector<std::string>& names);
  void populateSampleMenu(QMenu* menu);

  app::BuildOptions buildOptions() const;
  app::StoreOptions storeOptions() const;
  int64_t batchOption() const;
  QString buildLabel() const;
  /// Lays the graph out (on the worker) and shows it: shared by open and compile.
  void startInspect(const QString& kind);
  void requestKernelCode(const QString& kernel);
  void requestModuleText(app::IrStage stage);
  void showError(const QString& title, const QString& message);
  void setStatus(const QString& text);
  void finishJob(const QString& kind, bool ok);
  /// When `r` holds an error: shows it under `title`, ends job `kind` as failed, returns true.
  template <typename T>
  bool failed(const app::Result<T>& r, const QString& kind, const QString& title) {
    if (r) return false;
    showError(title, QString::fromStdString(r.error().message));
    finishJob(kind, false);
    return true;
  }
  void noteStored(const app::StoredIds& ids);

  WorkbenchOptions m_options;
  QString m_modelPath;
  std::vector<app::InputSpec> m_inputShapes;  // given for the open model (OpenOptions::inputs)
  QPointer<InputShapesDialog> m_shapesDialog;
  std::map<QString, QString> m_shapesMemory;  // when settings are not persisted
  std::shared_ptr<const app::Model> m_model;
  std::shared_ptr<const app::Inspection> m_inspection;
  std::optional<app::ProfileResult> m_lastProfile;
  std::optional<app::SweepResult> m_lastSweep;
  std::optional<app::UnfinishedSweep> m_unfinishedSweep;  // the model's, as last looked up
  std::vector<int64_t> m_profiledBuilds;  // this window's profiled builds, oldest first
  int64_t m_lastSessionId = 0;
  std::vector<app::TargetChoice> m_targets;

  // One tracker per kind of work: a new compile makes the previous compile stale but leaves a
  // running sweep alone.
  JobTracker* m_openJob;
  JobTracker* m_compileJob;
  JobTracker* m_inspectJob;
  JobTracker* m_codeJob;
  JobTracker* m_profileJob;
  JobTracker* m_compareJob;
  JobTracker* m_sweepJob;
  JobTracker* m_sweepStateJob;  // unfinishedSweep look-ups
  JobTracker* m_tuneJob;
  JobTracker* m_exportJob;
  JobTracker* m_sessionJob;
  JobTracker* m_doctorJob;
  QString m_failedPath;  // the last file that could not be opened (the doctor's subject)

  QTabWidget* m_tabs;
  GraphView* m_graph;
  IrView* m_ir;
  ProfileView* m_profile;
  RooflineView* m_roofline;
  CompareView* m_compare;
  SweepView* m_sweep;
  TuningView* m_tuning;
  SessionBrowser* m_sessions;
  SessionDiffView* m_diff;
  DoctorView* m_doctor;
  QDockWidget* m_sessionDock = nullptr;

  QComboBox* m_target;
  QComboBox* m_opt;
  QSpinBox* m_threads;
  QSpinBox* m_batch;
  QLabel* m_modelLabel;
  QLabel* m_statusLabel;
  QProgressBar* m_progress;
  QToolButton* m_cancelButton;
  QPointer<QMessageBox> m_errorBox;
  QMenu* m_recentMenu = nullptr;

  QAction* m_openAction;
  QAction* m_compileAction;
  QAction* m_profileAction;
  QAction* m_compareAction;
  QAction* m_sweepAction;
  QAction* m_tuneAction;
  QAction* m_exportLibAction;
  QAction* m_exportReportAction;
  QAction* m_cancelAction;
};

}  // namespace kiln::gui
