// The Batch sweep view: latency and throughput against batch size per backend (line charts,
// log₂ batch axis, log latency axis; a translucent band over each point's interquartile range, a
// ⚠ ring on a point whose worker processes disagree, every number in the tooltip), with the
// sweep's settings (batches, backends, time budget) above them and a table of the points
// (SweepPointModel: spread, per-process medians, why a point was skipped or failed) below. Resume continues the model's latest
// sweep when it was interrupted (killed or cancelled): only its missing points are measured.
#pragma once

#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QTreeView>
#include <QWidget>

#include <map>
#include <optional>

#include "app/gui/sweep_model.h"
#include "app/measure.h"

class QAreaSeries;
class QChart;
class QChartView;
class QLineSeries;
class QScatterSeries;

namespace kiln::gui {

class SweepView : public QWidget {
  Q_OBJECT
 public:
  explicit SweepView(QWidget* parent = nullptr);
  void setResult(const app::SweepResult& result);
  void clear(const QString& message);

  /// The settings as the user left them (invalid batch entries are dropped).
  std::vector<int64_t> batches() const;
  std::vector<std::string> backends() const;
  double budgetSeconds() const { return m_budget->value(); }
  void setBatches(const std::vector<int64_t>& batches);
  void setBackends(const std::vector<std::string>& backends);
  void setBudgetSeconds(double seconds) { m_budget->setValue(seconds); }
  /// The model's interrupted sweep, if any: enables Resume and says what it will measure.
  void setUnfinished(const std::optional<app::UnfinishedSweep>& sweep);
  bool canResume() const { return m_resume->isEnabled(); }
  QPushButton* resumeButton() const { return m_resume; }

  /// The plotted points of one backend: (batch, median ms) and (batch, items/s).
  QList<QPointF> latencyPoints(const std::string& backend) const;
  QList<QPointF> throughputPoints(const std::string& backend) const;
  /// The latency band of one backend: (batch, q1 ms) and (batch, q3 ms).
  QList<QPointF> latencyBandLower(const std::string& backend) const;
  QList<QPointF> latencyBandUpper(const std::string& backend) const;
  /// The (batch, median ms) of every point whose processes disagree (ringed in the chart).
  QList<QPointF> disagreeingPoints() const;
  const SweepPointModel* pointModel() const { return m_points; }
  QChart* latencyChart() const;
  QChart* throughputChart() const;

 signals:
  void runRequested();
  void resumeRequested();

 private:
  QLineEdit* m_batches;
  std::map<std::string, QCheckBox*> m_backendBoxes;
  QDoubleSpinBox* m_budget;
  QPushButton* m_resume;
  QLabel* m_resumeNote;
  QLabel* m_summary;
  QLabel* m_notes;
  QChartView* m_latency;
  QChartView* m_throughput;
  QTreeView* m_table;
  SweepPointModel* m_points;
  std::map<std::string, QLineSeries*> m_latencySeries, m_throughputSeries;
  std::map<std::string, std::pair<QList<QPointF>, QList<QPointF>>> m_latencyBands;  // (q1, q3)
  QList<QPointF> m_disagreeing;
};

}  // namespace kiln::gui
