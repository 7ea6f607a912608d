// Measures how long the GUI thread stops answering: a precise QTimer ticks every few
// milliseconds on the event loop and records the largest gap between two ticks. A gap over
// ~100 ms is a visible freeze; the Workbench prints the maximum with --measure-stall.
#pragma once

#include <QElapsedTimer>
#include <QObject>
#include <QTimer>

namespace kiln::gui {

class StallMonitor : public QObject {
  Q_OBJECT
 public:
  explicit StallMonitor(QObject* parent = nullptr, int intervalMs = 5);
  void start();
  void stop();
  void reset();
  /// Largest time between two ticks since start()/reset(), in milliseconds.
  double maxGapMs() const { return m_maxGapMs; }
  int ticks() const { return m_ticks; }

 private:
  void tick();
  QTimer m_timer;
  QElapsedTimer m_clock;
  qint64 m_lastNs = 0;
  double m_maxGapMs = 0;
  int m_ticks = 0;
};

}  // namespace kiln::gui
