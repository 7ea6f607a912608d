// Small helpers for Qt Charts shared by the chart views.
#pragma once

#include <QChart>
#include <QChartView>

namespace kiln::gui {

/// QChartView::setChart releases (does not delete) the previous chart: swap and delete it.
inline void replaceChart(QChartView* view, QChart* chart) {
  QChart* old = view->chart();
  view->setChart(chart);
  if (old && old != chart) delete old;
}

}  // namespace kiln::gui
