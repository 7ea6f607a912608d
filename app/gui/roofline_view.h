// The Roofline view: a profile's calls on the machine's roofline (Qt Charts, log–log: arithmetic
// intensity against achieved GFLOP/s), the FMA peak and each level's bandwidth as lines, one dot
// per call with FLOPs, its area proportional to its share of the time, blue when memory-bound and
// orange when compute-bound (profiler/roofline.h does the math). Clicking a dot shows the call's
// numbers and emits callActivated (the main window selects it in the Profile and Graph views).
// Two builds (the Sessions diff's A and B) go on one chart: A's dots grey, B's coloured, a line
// from each call's A point to its B point (calls matched by their output values).
#pragma once

#include <QLabel>
#include <QWidget>

#include <optional>
#include <vector>

#include "app/measure.h"

class QChart;
class QChartView;
class QScatterSeries;

namespace kiln::gui {

class RooflineView : public QWidget {
  Q_OBJECT
 public:
  explicit RooflineView(QWidget* parent = nullptr);
  /// One build: its calls against `ceilings` (none: the dots without lines, and a note).
  void setProfile(const profiler::ProfileRecord& profile, const std::optional<profiler::MachineCeilings>& ceilings,
                  const QString& title);
  /// Two builds: B's ceilings (else A's) as the lines, A's and B's dots, arrows from A to B.
  void setComparison(const app::BuildDiff& diff);
  void clear(const QString& message);

  QChart* chart() const;
  /// The dots of the (newer) build, in series order: the calls with FLOPs.
  const std::vector<profiler::RooflinePoint>& points() const { return m_points; }
  int pointCount() const { return static_cast<int>(m_points.size()); }
  /// Arrows drawn (comparison only).
  int arrowCount() const;
  /// The series holding points() (one per marker size and colour): their clicked() picks a call.
  const std::vector<QScatterSeries*>& callSeries() const { return m_callSeries; }
  /// The marker size (px) of points()[i]: larger for a larger share of the time.
  int markerSizeOf(int i) const { return m_markerSizes.at(static_cast<size_t>(i)); }
  /// The call last clicked (-1: none).
  int selectedCall() const { return m_selectedCall; }
  /// What the label under the chart says.
  QString detailText() const { return m_detail->text(); }

 signals:
  void callActivated(int call);

 private:
  void draw(const std::vector<profiler::RooflinePoint>& previous, const std::optional<profiler::MachineCeilings>& ceilings,
            const QString& title);
  void pick(const QPointF& at);

  QLabel* m_header;
  QLabel* m_detail;
  QChartView* m_chartView;
  std::vector<QScatterSeries*> m_callSeries;
  std::vector<int> m_markerSizes;
  int m_arrowCount = 0;
  std::vector<profiler::RooflinePoint> m_points;
  bool m_comparison = false;
  int m_selectedCall = -1;
};

}  // namespace kiln::gui
