// The Profile view: the per-call profile of one build in a sortable, filterable table
// (ProfileTableModel behind a ProfileFilterModel), a top-N bar chart of where the time goes with
// each bar's share of the total, and the totals: Σ per-call medians against the end-to-end time.
#pragma once

#include <QCheckBox>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>
#include <QTableView>
#include <QWidget>

#include <optional>

#include "app/measure.h"
#include "app/gui/profile_model.h"

class QChartView;
class QChart;

namespace kiln::gui {

class ProfileView : public QWidget {
  Q_OBJECT
 public:
  explicit ProfileView(QWidget* parent = nullptr);
  void setProfile(const profiler::ProfileRecord& profile, const QString& title);
  void clear(const QString& message);
  ProfileTableModel* model() const { return m_model; }
  ProfileFilterModel* proxy() const { return m_proxy; }
  QTableView* table() const { return m_table; }
  QChart* chart() const;
  /// Bars in the top-N chart (for tests).
  int chartBarCount() const { return m_barCount; }
  /// Selects (and scrolls to) the row of call `call` in the per-call table; false when not shown
  /// (grouped by operator, or filtered out).
  bool selectCall(int call);

 signals:
  void callActivated(int call);

 private:
  void rebuild();
  void rebuildChart();

  QLabel* m_summary;
  QLineEdit* m_filter;
  QCheckBox* m_byOperator;
  QSpinBox* m_topN;
  QTableView* m_table;
  QChartView* m_chartView;
  ProfileTableModel* m_model;
  ProfileFilterModel* m_proxy;
  std::optional<profiler::ProfileRecord> m_profile;
  QString m_title;
  int m_barCount = 0;
};

}  // namespace kiln::gui
