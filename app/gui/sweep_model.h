// The Batch sweep's points as an item model: one row per backend and batch size with the median,
// the spread (IQR and min–max), the throughput, each worker process's median, and the status of a
// point that was skipped or failed. A point whose processes disagree (medians more than 10 %
// apart) is tinted and says so. No widgets.
#pragma once

#include <QAbstractTableModel>

#include <vector>

#include "app/gui/format.h"
#include "app/measure.h"

namespace kiln::gui {

class SweepPointModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { Backend, Batch, Median, Iqr, MinMax, Throughput, Processes, Note, ColumnCount };
  enum Role {
    SortRole = Qt::UserRole + 1,  // the raw number
    DisagreeRole,                 // bool: the point's processes disagree
    BackendRole,                  // "kiln", "pytorch-eager", ...
    BatchRole,                    // qlonglong
  };

  using QAbstractTableModel::QAbstractTableModel;

  /// Rows by backend (in the sweep's order), then batch.
  void setResult(const app::SweepResult& result);
  void clear();
  /// The point of `backend` at `batch`, or null.
  const profiler::Measurement* point(const std::string& backend, int64_t batch) const;
  /// Every number of a point as plain lines (the table's and the charts' tooltip).
  static QString toolTip(const profiler::Measurement& m);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  struct Row {
    profiler::Measurement m;
    profiler::Spread spread;  // m.spread()
  };
  QString text(const Row& row, int column) const;
  std::vector<Row> m_rows;
};

}  // namespace kiln::gui
