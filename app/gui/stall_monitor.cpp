#include "app/gui/stall_monitor.h"

#include <algorithm>

namespace kiln::gui {

StallMonitor::StallMonitor(QObject* parent, int intervalMs) : QObject(parent) {
  m_timer.setTimerType(Qt::PreciseTimer);
  m_timer.setInterval(intervalMs);
  connect(&m_timer, &QTimer::timeout, this, &StallMonitor::tick);
}

void StallMonitor::start() {
  reset();
  m_timer.start();
}

void StallMonitor::stop() { m_timer.stop(); }

void StallMonitor::reset() {
  m_clock.start();
  m_lastNs = 0;
  m_maxGapMs = 0;
  m_ticks = 0;
}

void StallMonitor::tick() {
  qint64 now = m_clock.nsecsElapsed();
  m_maxGapMs = std::max(m_maxGapMs, (now - m_lastNs) / 1e6);
  m_lastNs = now;
  ++m_ticks;
}

}  // namespace kiln::gui
