// The Batch sweep view: latency and throughput against batch size per backend (line charts,
// log₂ batch axis, log latency axis), with the sweep's settings (batches, backends, time budget)
// above them and the skipped or failed points listed below. Resume continues the model's latest
// sweep when it was interrupted (killed or cancelled): only its missing points are measured.
#pragma once

#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QWidget>

#include <map>
#include <optional>

#include "app/measure.h"

class QChart;
class QChartView;
class QLineSeries;

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
  std::map<std::string, QLineSeries*> m_latencySeries, m_throughputSeries;
};

}  // namespace kiln::gui
