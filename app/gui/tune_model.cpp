#include "app/gui/tune_model.h"

#include "app/gui/format.h"

namespace kiln::gui {

void TuneTaskModel::setTasks(const std::vector<app::TuneTaskInfo>& tasks) {
  beginResetModel();
  m_rows.clear();
  for (const auto& t : tasks) m_rows.push_back(rowFor(t));
  endResetModel();
}

int TuneTaskModel::rowOfTask(const QString& name) const {
  for (int i = 0; i < static_cast<int>(m_rows.size()); ++i)
    if (qs(m_rows[i].info.name) == name) return i;
  return -1;
}

void TuneTaskModel::applyProgress(const app::TuneProgress& p) {
  int row = rowOfTask(qs(p.taskName));
  if (row < 0) {
    row = static_cast<int>(m_rows.size());
    beginInsertRows({}, row, row);
    Row r;
    r.info.name = p.taskName;
    m_rows.push_back(std::move(r));
    endInsertRows();
  }
  // Tasks before the one in progress are finished: tasks run in order.
  for (int i = 0; i < row; ++i) {
    if (m_rows[i].state == TaskState::Running || m_rows[i].state == TaskState::Pending) {
      m_rows[i].state = TaskState::Done;
      emit dataChanged(index(i, 0), index(i, ColumnCount - 1));
    }
  }
  Row& r = m_rows[row];
  r.trials = p.taskTrials;
  r.budget = p.taskBudget;
  r.best = p.bestGflops;
  r.defaultGflops = p.defaultGflops;
  r.state = p.taskTrials >= p.taskBudget && p.taskBudget > 0 ? TaskState::Done : TaskState::Running;
  if (r.history.empty() || r.history.back().x() != p.taskTrials) {
    r.history.emplace_back(p.taskTrials, p.bestGflops);
    emit historyChanged(row);
  }
  emit dataChanged(index(row, 0), index(row, ColumnCount - 1));
}

void TuneTaskModel::applyResult(const app::TuneResult& result) {
  beginResetModel();
  for (const auto& t : result.tasks) {
    int row = rowOfTask(qs(t.info.name));
    if (row < 0) {
      m_rows.push_back(rowFor(t.info));
      row = static_cast<int>(m_rows.size()) - 1;
    }
    Row& r = m_rows[row];
    r.info = t.info;
    r.trials = t.measured + t.skipped;
    r.budget = std::max(r.budget, r.trials);
    r.errors = t.errors;
    r.best = t.bestGflops;
    if (t.defaultMs > 0 && t.info.flops > 0) r.defaultGflops = t.info.flops / (t.defaultMs * 1e6);
    r.state = TaskState::Done;
    if (r.history.empty()) {
      // A resumed or finished run without live progress: rebuild the curve from the trials.
      double best = 0;
      for (const auto& trial : t.trials) {
        best = std::max(best, trial.gflops);
        r.history.emplace_back(trial.index, best);
      }
    }
  }
  if (result.cancelled)
    for (auto& r : m_rows)
      if (r.state != TaskState::Done || r.trials < r.budget) r.state = TaskState::Cancelled;
  endResetModel();
}

int TuneTaskModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

int TuneTaskModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant TuneTaskModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const Row& r = m_rows[index.row()];
  if (role == Qt::TextAlignmentRole)
    return QVariant::fromValue((index.column() <= Op ? Qt::AlignLeft : Qt::AlignRight) | Qt::AlignVCenter);
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case Task: return qs(r.info.name);
    case Op: return qs(r.info.op);
    case Weight: return r.info.weight;
    case Trials: return r.budget > 0 ? QStringLiteral("%1 / %2").arg(r.trials).arg(r.budget) : QString::number(r.trials);
    case Best: return r.best > 0 ? QString::number(r.best, 'f', 1) : QStringLiteral("—");
    case Default: return r.defaultGflops > 0 ? QString::number(r.defaultGflops, 'f', 1) : QStringLiteral("—");
    case Speedup:
      return r.best > 0 && r.defaultGflops > 0 ? QStringLiteral("%1×").arg(r.best / r.defaultGflops, 0, 'f', 2)
                                               : QStringLiteral("—");
    case Status:
      switch (r.state) {
        case TaskState::Pending: return QStringLiteral("pending");
        case TaskState::Running: return QStringLiteral("tuning");
        case TaskState::Done: return QStringLiteral("done");
        case TaskState::Cancelled: return QStringLiteral("cancelled");
      }
  }
  return {};
}

QVariant TuneTaskModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Task: return QStringLiteral("Task");
    case Op: return QStringLiteral("Op");
    case Weight: return QStringLiteral("Calls");
    case Trials: return QStringLiteral("Trials");
    case Best: return QStringLiteral("Best GFLOP/s");
    case Default: return QStringLiteral("Default GFLOP/s");
    case Speedup: return QStringLiteral("Speed-up");
    case Status: return QStringLiteral("Status");
  }
  return {};
}

}  // namespace kiln::gui
