// The Compare view's table as an item model: one row per backend of a comparison (and per Kiln
// build compared before), with the median, the spread (IQR and min–max), each worker process's
// median, the speed-up and output difference against PyTorch eager, and the status of a backend
// that did not run. A row whose processes disagree (medians more than 10 % apart) is tinted and
// says so. No widgets.
#pragma once

#include <QAbstractTableModel>

#include <vector>

#include "app/facade.h"
#include "app/gui/format.h"

namespace kiln::gui {

/// One bar of the compare chart and row of its table.
struct CompareRow {
  QString label;        // "PyTorch eager", "Kiln -O3"
  std::string backend;  // for the colour
  app::BackendResult result;
};

/// Why a backend has no numbers: "failed (kernel fault): REASON", "timeout: REASON",
/// "unavailable: REASON"; empty when it ran.
QString backendStatusText(const app::BackendResult& result);

class CompareTableModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  // The mean and std dev are in the tooltip: with outliers the IQR says more.
  enum Column { Backend, Median, Iqr, MinMax, Samples, Processes, Speedup, MaxDiff, Note, ColumnCount };
  enum Role {
    SortRole = Qt::UserRole + 1,  // the raw number (median ms, speed-up, ...)
    DisagreeRole,                 // bool: the row's processes disagree
    StatusRole,                   // "ok", "failed", "timeout", ...
    DifferRole,                   // bool: the row's outputs lie beyond tolerance from eager's
  };

  using QAbstractTableModel::QAbstractTableModel;

  /// Speed-ups and output differences are against the row of backend "pytorch-eager".
  void setRows(std::vector<CompareRow> rows);
  void clear() { setRows({}); }
  const std::vector<CompareRow>& rows() const { return m_rows; }
  /// Every number of row `row` as plain lines (the table's and the chart's tooltip).
  QString toolTip(int row) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  QString text(size_t row, int column) const;
  double eagerMs() const;
  bool eagerRan() const;

  std::vector<CompareRow> m_rows;
  std::vector<profiler::Spread> m_spreads;  // of each row's result
};

}  // namespace kiln::gui
