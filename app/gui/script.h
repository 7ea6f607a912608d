// Drives a MainWindow through a list of steps without a user: each step starts some work and the
// next one runs once the window is idle again. Used by --screenshots (evidence for a person to
// look at) and --measure-stall (the UI-thread stall budget while compiling and profiling).
#pragma once

#include <QObject>
#include <QString>
#include <QTimer>

#include <functional>
#include <vector>

namespace kiln::gui {

class MainWindow;
class StallMonitor;

class WorkbenchScript : public QObject {
  Q_OBJECT
 public:
  explicit WorkbenchScript(MainWindow* window, QObject* parent = nullptr);
  void add(const QString& name, std::function<void()> step);
  void start();
  /// Exit code for the application: 0 when every step ran.
  int exitCode() const { return m_exitCode; }

  /// Opens `model`, compiles and profiles it; records the largest UI-thread gap per step with a
  /// StallMonitor and prints a table to stdout.
  void addStallMeasurement(const QString& model, StallMonitor* monitor);
  /// The screenshot tour: opens `model`, profiles at -O2 and -O3, compares, sweeps a few small
  /// batches, tries tuning, diffs the two builds, opens a corrupt file, and saves PNGs into `dir`.
  void addScreenshotTour(const QString& model, const QString& badModel, const QString& dir);
  /// Diffs two stored builds (the store given by --db) and saves the Sessions diff and the
  /// two-build Roofline as 07-sessions-diff.png and 07b-roofline-diff.png in `dir`.
  void addDiffShots(int64_t buildA, int64_t buildB, const QString& dir);

 signals:
  void finished(int exitCode);

 private:
  void runNext();
  void poll();
  void grab(const QString& dir, const QString& file);

  MainWindow* m_window;
  std::vector<std::pair<QString, std::function<void()>>> m_steps;
  size_t m_next = 0;
  QTimer m_poll;
  int m_idlePolls = 0;
  int m_exitCode = 0;
};

}  // namespace kiln::gui
