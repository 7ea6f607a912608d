#include "app/gui/format.h"

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
  if (backend == "pytorch-compiled") return QStringLiteral("PyTorch compiled");
  if (backend == "torch-compile") return QStringLiteral("torch.compile");
  if (backend == "kiln") return QStringLiteral("Kiln");
  return qs(backend);
}

QColor backendColor(const std::string& backend) {
  if (backend == "pytorch-eager") return QColor(0x9e, 0x9e, 0x9e);
  if (backend == "pytorch-compiled") return QColor(0x5c, 0x6b, 0xc0);
  if (backend == "torch-compile") return QColor(0x8e, 0x6c, 0xb8);
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

}  // namespace kiln::gui
