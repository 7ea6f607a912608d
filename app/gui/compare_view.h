// The Compare view: latency of PyTorch eager, compiled PyTorch (and torch.compile when
// available) and every Kiln build compared so far (each opt level / target / tuned build is kept
// as its own bar), as bars at the median with min–max whiskers and a speed-up label against
// PyTorch eager; a table below holds the exact numbers and output differences.
#pragma once

#include <QCheckBox>
#include <QLabel>
#include <QTreeWidget>
#include <QWidget>

#include <vector>

#include "app/facade.h"

class QChart;
class QChartView;
class QGraphicsSimpleTextItem;

namespace kiln::gui {

class CompareView : public QWidget {
  Q_OBJECT
 public:
  struct Bar {
    QString label;        // "PyTorch eager", "Kiln -O3"
    std::string backend;  // for the colour
    app::BackendResult result;
  };

  explicit CompareView(QWidget* parent = nullptr);
  /// Adds a comparison: the PyTorch bars are replaced, the Kiln build is added (or replaced when
  /// the same build was compared before). `kilnLabel` names the build ("Kiln -O3").
  void addResult(const app::CompareResult& result, const QString& kilnLabel);
  void clear(const QString& message);
  bool includeTorchCompile() const { return m_torchCompile->isChecked(); }
  void setIncludeTorchCompile(bool on) { m_torchCompile->setChecked(on); }
  const std::vector<Bar>& bars() const { return m_bars; }
  QChart* chart() const;

 private:
  void rebuild();
  void placeLabels();

  QLabel* m_summary;
  QCheckBox* m_torchCompile;
  QChartView* m_chartView;
  QTreeWidget* m_table;
  std::vector<Bar> m_bars;
  std::vector<Bar> m_unavailable;
  std::vector<QGraphicsSimpleTextItem*> m_labels;
  double m_eagerMs = 0;
};

}  // namespace kiln::gui
