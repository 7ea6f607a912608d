// Number and name formatting shared by the Workbench's models and views, so a time reads the same
// in the table, the chart tooltips and the status bar.
#pragma once

#include <QColor>
#include <QString>

#include <optional>
#include <string>
#include <vector>

#include "app/facade.h"
#include "profiler/time_evaluator.h"

namespace kiln::gui {

QString qs(const std::string& s);
/// "1.23 ms", "456 µs", "12.3 s": three significant digits, unit picked from the magnitude.
QString formatMs(double ms);
/// Several times in one unit, picked from the largest: "9.40 / 13.1 ms" (" – " for a range).
QString formatMsList(const std::vector<double>& ms, const QString& separator = QStringLiteral(" / "));
/// "9.40–13.1 ms": a spread (IQR, min–max) in one unit.
QString formatMsRange(double lo, double hi);
/// A max |diff| of outputs: "NaN" (a NaN in an output), "∞" (outputs differ in shape or count),
/// "—" when not checked (< 0), else three significant digits.
QString formatMaxDiff(double diff);
QString formatUs(double us);
QString formatBytes(double bytes);
/// "1.2 GFLOP", "345 MFLOP".
QString formatFlops(double flops);
QString formatPercent(double percent);
/// Colours of a measured row, shared by the compare and sweep tables.
inline constexpr unsigned kDisagreeBackground = 0xfff1c7;  // processes disagree
inline constexpr unsigned kDisagreeText = 0x8a4b00;
inline constexpr unsigned kFailedText = 0xb00020;       // failed, timed out, out of memory
inline constexpr unsigned kUnavailableText = 0x888888;  // unavailable or skipped
inline constexpr unsigned kDifferBackground = 0xffd6d6;  // outputs differ from the reference's

/// The status line of an export-only build: the module's size, and its outputs' agreement with
/// the host build where it ran here (wasm32 in Node), else why it did not, or the check's error.
QString crossTargetStatus(const std::optional<app::CrossCheck>& cross, const QString& error);
/// "⚠ processes disagree: 9.40 / 13.1 ms"; empty when they agree.
QString disagreementText(const profiler::Spread& spread);
/// Plain lines for a tooltip: median, IQR, min–max, std dev, repeats and the per-process medians.
QString spreadText(const profiler::Spread& spread);

/// "PyTorch eager" for "pytorch-eager"; unknown names are returned as they are.
QString backendLabel(const std::string& backend);
/// A measured row's label: "PyTorch eager (TorchScript)" when today's torch ran the TorchScript
/// file (the model has no Python module), else backendLabel(row.backend).
QString backendLabel(const app::BackendResult& row);
/// A stable, well-separated colour per backend (charts use the same one everywhere).
QColor backendColor(const std::string& backend);
/// "conv2d + add + relu"
QString joinOps(const std::vector<std::string>& ops, const QString& separator = QStringLiteral(" + "));
/// Distinct pastel colour for fused group `index` (golden-angle hue steps).
QColor groupColor(int index);
/// Heat colour for t in [0, 1]: pale yellow → orange → deep red.
QColor heatColor(double t);

}  // namespace kiln::gui
