// Tuning tasks and their live progress as a table model, fed by app::tuneTasks and the
// TuneProgress callback (app/tune.h). It also keeps each task's best-GFLOP/s-versus-trials
// history for the Tuning view's chart. No widgets.
#pragma once

#include <QAbstractTableModel>
#include <QPointF>

#include <vector>

#include "app/tune.h"

namespace kiln::gui {

class TuneTaskModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { Task, Op, Weight, Trials, Best, Default, Speedup, Status, ColumnCount };
  enum class TaskState { Pending, Running, Done, Cancelled };

  using QAbstractTableModel::QAbstractTableModel;

  void setTasks(const std::vector<app::TuneTaskInfo>& tasks);
  /// Updates the task the progress names (adding it when the task list was not known).
  void applyProgress(const app::TuneProgress& progress);
  /// Final numbers from the result; unfinished tasks become Cancelled when it was cancelled.
  void applyResult(const app::TuneResult& result);
  /// Best GFLOP/s after each reported trial count, for task row `row`.
  const std::vector<QPointF>& history(int row) const { return m_rows[row].history; }
  int rowOfTask(const QString& name) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 signals:
  void historyChanged(int row);

 private:
  struct Row {
    app::TuneTaskInfo info;
    int trials = 0, budget = 0, errors = 0;
    double best = 0, defaultGflops = 0;
    TaskState state = TaskState::Pending;
    std::vector<QPointF> history;
  };
  static Row rowFor(const app::TuneTaskInfo& info) {
    Row row;
    row.info = info;
    return row;
  }
  std::vector<Row> m_rows;
};

}  // namespace kiln::gui
