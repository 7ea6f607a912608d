// The Tuning view: live progress of autotuning (app/tune.h) per task — trials, best GFLOP/s
// against trials, the heuristic schedule's GFLOP/s, ETA — with Start, Cancel (keeps what was
// measured) and Resume (continues from the records file). "Slurm" spreads the tasks over a job
// array of the cluster (app/tune.h SlurmOptions); progress then shows each array task's state.
#pragma once

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QTableView>
#include <QWidget>

#include "app/tune.h"
#include "app/gui/tune_model.h"

class QChartView;

namespace kiln::gui {

class TuningView : public QWidget {
  Q_OBJECT
 public:
  explicit TuningView(QWidget* parent = nullptr);
  /// The options the user set (tuner, trials, limits, records file) on top of `base`.
  app::TuneOptions options(const app::TuneOptions& base) const;
  void setRecordsPath(const QString& path);
  void setTrialsPerTask(int trials) { m_trials->setValue(trials); }
  void setTimeLimit(double seconds) { m_timeLimit->setValue(seconds); }
  QString recordsPath() const { return m_records->text(); }
  void setRunning(bool running);
  void setTasks(const std::vector<app::TuneTaskInfo>& tasks);
  void applyProgress(const app::TuneProgress& progress);
  void setResult(const app::TuneResult& result);
  void setMessage(const QString& message, bool error = false);
  TuneTaskModel* model() const { return m_model; }

 signals:
  void startRequested(bool resume);
  void cancelRequested();

 private:
  void showTaskChart(int row);

  QComboBox* m_tuner;
  QComboBox* m_features;  // what the xgb tuner's cost model sees
  QCheckBox* m_cacheFlush;  // TuneOptions::cacheFlush
  QSpinBox* m_trials;
  QSpinBox* m_earlyStop;
  QDoubleSpinBox* m_timeLimit;
  QLineEdit* m_records;
  QCheckBox* m_slurm;
  QLineEdit* m_partition;
  QSpinBox* m_arraySize;
  QPushButton* m_start;
  QPushButton* m_resume;
  QPushButton* m_cancel;
  QProgressBar* m_progress;
  QLabel* m_eta;
  QLabel* m_message;
  QTableView* m_table;
  QChartView* m_chart;
  TuneTaskModel* m_model;
  int m_chartRow = -1;
  bool m_followCurrent = true;
};

}  // namespace kiln::gui
