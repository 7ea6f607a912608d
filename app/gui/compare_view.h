// The Compare view: latency of PyTorch eager, compiled PyTorch (and torch.compile when
// available) and every Kiln build compared so far (each opt level / target / tuned build is kept
// as its own bar), as bars at the median with the spread drawn on them (a box over the
// interquartile range, whiskers from min to max, a dot per worker process's median) and a
// speed-up label against PyTorch eager. A bar whose processes disagree is marked ⚠. The y axis
// is linear or, with Log scale, logarithmic (a 5 ms bar beside a 40 ms one stays readable). The
// table below (CompareTableModel) holds the exact numbers, output differences and why a backend
// did not run.
#pragma once

#include <QCheckBox>
#include <QLabel>
#include <QTreeView>
#include <QWidget>

#include <vector>

#include "app/facade.h"
#include "app/gui/compare_model.h"

class QChart;
class QChartView;
class QGraphicsSimpleTextItem;

namespace kiln::gui {

class CompareView : public QWidget {
  Q_OBJECT
 public:
  using Bar = CompareRow;

  explicit CompareView(QWidget* parent = nullptr);
  /// Adds a comparison: the PyTorch bars are replaced, the Kiln build is added (or replaced when
  /// the same build was compared before). `kilnLabel` names the build ("Kiln -O3").
  void addResult(const app::CompareResult& result, const QString& kilnLabel);
  void clear(const QString& message);
  bool includeTorchCompile() const { return m_torchCompile->isChecked(); }
  void setIncludeTorchCompile(bool on) { m_torchCompile->setChecked(on); }
  bool logScale() const { return m_logScale->isChecked(); }
  void setLogScale(bool on) { m_logScale->setChecked(on); }
  QCheckBox* logScaleBox() const { return m_logScale; }
  /// The charted bars (backends that ran), in chart order; the table lists the others after them.
  const std::vector<Bar>& bars() const { return m_bars; }
  const CompareTableModel* tableModel() const { return m_model; }
  QChart* chart() const;
  /// The text above bar `i` (median, speed-up, ⚠ when its processes disagree).
  QString barLabel(size_t i) const;
  /// The line above the chart: model, machine, how the bars were measured and any warning.
  QString summaryText() const;

 private:
  void rebuild();
  void placeLabels();

  QLabel* m_summary;
  QCheckBox* m_torchCompile;
  QCheckBox* m_logScale;
  QChartView* m_chartView;
  QTreeView* m_table;
  CompareTableModel* m_model;
  std::vector<Bar> m_bars;
  std::vector<Bar> m_unavailable;
  std::vector<QGraphicsSimpleTextItem*> m_labels;
  std::vector<double> m_labelAt;  // the y value each label sits above (the whisker's top)
  double m_eagerMs = 0;
};

}  // namespace kiln::gui
