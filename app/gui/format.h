// Number and name formatting shared by the Workbench's models and views, so a time reads the same
// in the table, the chart tooltips and the status bar.
#pragma once

#include <QColor>
#include <QString>

#include <string>
#include <vector>

namespace kiln::gui {

QString qs(const std::string& s);
/// "1.23 ms", "456 µs", "12.3 s": three significant digits, unit picked from the magnitude.
QString formatMs(double ms);
QString formatUs(double us);
QString formatBytes(double bytes);
/// "1.2 GFLOP", "345 MFLOP".
QString formatFlops(double flops);
QString formatPercent(double percent);
/// "PyTorch eager" for "pytorch-eager"; unknown names are returned as they are.
QString backendLabel(const std::string& backend);
/// A stable, well-separated colour per backend (charts use the same one everywhere).
QColor backendColor(const std::string& backend);
/// "conv2d + add + relu"
QString joinOps(const std::vector<std::string>& ops, const QString& separator = QStringLiteral(" + "));
/// Distinct pastel colour for fused group `index` (golden-angle hue steps).
QColor groupColor(int index);
/// Heat colour for t in [0, 1]: pale yellow → orange → deep red.
QColor heatColor(double t);

}  // namespace kiln::gui
