#include "app/gui/format.h"

#include <QObject>

#include <algorithm>
#include <cmath>

namespace kiln::gui {

QString qs(const std::string& s) { return QString::fromStdString(s); }

namespace {
QString threeDigits(double v) {
  double a = std::abs(v);
  int decimals = a >= 100 ? 0 : a >= 10 ? 1 : 2;
  return QString::number(v, 'f', decimals);
}
}  // namespace

QString formatMs(double ms) {
  if (ms >= 1000) return threeDigits(ms / 1000) + QStringLiteral(" s");
  if (ms >= 1) return threeDigits(ms) + QStringLiteral(" ms");
  return formatUs(ms * 1000);
}

QString formatMsList(const std::vector<double>& ms, const QString& separator) {
  if (ms.empty()) return {};
  double top = *std::max_element(ms.begin(), ms.end());
  double scale = top >= 1000 ? 1e-3 : top >= 1 ? 1 : 1e3;
  QString unit = top >= 1000 ? QStringLiteral(" s") : top >= 1 ? QStringLiteral(" ms") : QStringLiteral(" µs");
  QStringList parts;
  for (double v : ms) parts << threeDigits(v * scale);
  return parts.join(separator) + unit;
}

QString formatMsRange(double lo, double hi) { return formatMsList({lo, hi}, QStringLiteral("–")); }

QString formatMaxDiff(double diff) {
  if (std::isnan(diff)) return QStringLiteral("NaN");
  if (std::isinf(diff)) return QStringLiteral("∞");
  if (diff < 0) return QStringLiteral("—");
  return QString::number(diff, 'g', 3);
}

QString disagreementText(const profiler::Spread& s) {
  if (!s.processesDisagree) return {};
  if (s.processMedianMs.empty()) return QStringLiteral("⚠ processes disagree");
  return QStringLiteral("⚠ processes disagree: %1").arg(formatMsList(s.processMedianMs));
}

QString spreadText(const profiler::Spread& s) {
  QStringList lines;
  lines << QStringLiteral("median %1 (mean %2, std dev %3)").arg(formatMs(s.medianMs), formatMs(s.meanMs), formatMs(s.stddevMs));
  lines << QStringLiteral("IQR %1 · min–max %2").arg(formatMsRange(s.q1Ms, s.q3Ms), formatMsRange(s.minMs, s.maxMs));
  QString repeats = QStringLiteral("%1 repeats").arg(s.samples);
  if (s.number > 1) repeats += QStringLiteral(" of %1 calls").arg(s.number);
  if (s.processMedianMs.size() > 1)
    repeats += QStringLiteral(" in %1 processes, their medians %2")
                   .arg(s.processMedianMs.size())
                   .arg(formatMsList(s.processMedianMs));
  lines << repeats;
  if (s.processesDisagree && !s.processMedianMs.empty()) {
    auto [lo, hi] = std::minmax_element(s.processMedianMs.begin(), s.processMedianMs.end());
    lines << QStringLiteral("⚠ the processes disagree by %1 %: the time depends on the process, not only on the code")
                 .arg(*lo > 0 ? QString::number(100 * (*hi / *lo - 1), 'f', 0) : QStringLiteral("?"));
  }
  return lines.join(QLatin1Char('\n'));
}

QString formatUs(double us) {
  if (us >= 1000) return formatMs(us / 1000);
  return threeDigits(us) + QStringLiteral(" µs");
}

QString formatBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (bytes >= 1024 && u < 3) bytes /= 1024, ++u;
  return (u == 0 ? QString::number(bytes, 'f', 0) : threeDigits(bytes)) + QLatin1Char(' ') + QLatin1String(units[u]);
}

QString formatFlops(double flops) {
  if (flops <= 0) return QStringLiteral("—");
  if (flops >= 1e9) return threeDigits(flops / 1e9) + QStringLiteral(" GFLOP");
  if (flops >= 1e6) return threeDigits(flops / 1e6) + QStringLiteral(" MFLOP");
  if (flops >= 1e3) return threeDigits(flops / 1e3) + QStringLiteral(" kFLOP");
  return QString::number(flops, 'f', 0) + QStringLiteral(" FLOP");
}

QString formatPercent(double percent) { return QString::number(percent, 'f', percent < 10 ? 2 : 1) + '%'; }

QString backendLabel(const std::string& backend) {
  if (backend == "pytorch-eager") return QStringLiteral("PyTorch eager");
  if (backend == "torch-compile") return QStringLiteral("torch.compile");
  if (backend == "torch-compile-max-autotune") return QStringLiteral("torch.compile max-autotune");
  if (backend == "torchscript-optimized") return QStringLiteral("TorchScript optimized");
  if (backend == "onnxruntime") return QStringLiteral("ONNX Runtime");
  if (backend == "openvino") return QStringLiteral("OpenVINO");
  if (backend == "pytorch-compiled") return QStringLiteral("PyTorch compiled");  // sessions of older Kiln
  if (backend == "kiln") return QStringLiteral("Kiln");
  if (backend == "kiln-untuned") return QStringLiteral("Kiln untuned");
  if (backend == "kiln-wasm") return QStringLiteral("Kiln wasm (Node)");
  if (backend == "onnxruntime-web") return QStringLiteral("ONNX Runtime Web (Node)");
  return qs(backend);
}

QString backendLabel(const app::BackendResult& row) {
  QString label = backendLabel(row.backend);
  if (row.backend == "pytorch-eager" && app::backendDisplayName(row.backend, row.facts) != row.backend)
    label += QStringLiteral(" (TorchScript)");
  return label;
}

QColor backendColor(const std::string& backend) {
  if (backend == "pytorch-eager") return QColor(0x9e, 0x9e, 0x9e);
  if (backend == "torch-compile") return QColor(0x8e, 0x6c, 0xb8);
  if (backend == "torch-compile-max-autotune") return QColor(0x5e, 0x3c, 0x8a);
  // The row older Kiln called "pytorch-compiled" is the same TorchScript-optimized path.
  if (backend == "torchscript-optimized" || backend == "pytorch-compiled") return QColor(0x5c, 0x6b, 0xc0);
  if (backend == "onnxruntime") return QColor(0x2e, 0x8b, 0x57);
  if (backend == "openvino") return QColor(0x1f, 0x8f, 0xbf);
  if (backend == "onnxruntime-web") return QColor(0x7f, 0xbf, 0x9b);  // ONNX Runtime's green, paler
  if (backend == "kiln-wasm") return QColor(0xb8, 0x4a, 0x10);        // Kiln's orange, darker
  if (backend == "kiln-untuned") return QColor(0xf2, 0xa8, 0x75);  // Kiln's orange, paler
  return QColor(0xe6, 0x6a, 0x1f);  // Kiln's orange, for every Kiln build
}

QString joinOps(const std::vector<std::string>& ops, const QString& separator) {
  QStringList parts;
  for (const auto& op : ops) parts << qs(op);
  return parts.join(separator);
}

QColor groupColor(int index) {
  if (index < 0) return QColor(0xee, 0xee, 0xee);
  double hue = std::fmod(index * 137.508, 360.0);
  return QColor::fromHsv(static_cast<int>(hue), 70, 245);
}

QColor heatColor(double t) {
  t = std::clamp(t, 0.0, 1.0);
  // Hue 55° (pale yellow) down to 0° (red), getting more saturated and a little darker.
  int hue = static_cast<int>(55 * (1 - t));
  int sat = static_cast<int>(40 + 200 * t);
  int val = static_cast<int>(255 - 50 * t);
  return QColor::fromHsv(hue, sat, val);
}

QString crossTargetStatus(const std::optional<app::CrossCheck>& cross, const QString& error) {
  // Short enough for the status bar: the target is in the toolbar and the graph's header already.
  QString head = QObject::tr("Export-only target, not run on this CPU.");
  if (!cross)
    return head + (error.isEmpty() ? QString() : QObject::tr(" Its module could not be checked: %1").arg(error));
  QString size = QObject::tr(" Module %1 (%2 %3).")
                     .arg(formatBytes(static_cast<double>(cross->moduleBytes)), qs(cross->kernelsFile),
                          formatBytes(static_cast<double>(cross->kernelsBytes)));
  if (cross->runner.empty()) return head + size + QObject::tr(" Not run: %1.").arg(qs(cross->note));
  return head + size +
         QObject::tr(" In %1 its outputs lie within %2 of this machine's build (output scale %3).")
             .arg(qs(cross->runner), formatMaxDiff(cross->maxAbsDiff), QString::number(cross->outputScale, 'g', 3));
}

}  // namespace kiln::gui
