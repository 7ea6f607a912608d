#include "app/gui/job_runner.h"

namespace kiln::gui {

void JobControl::report(const QString& text, double fraction) const {
  std::shared_ptr<detail::JobState> state = m_state;
  QPointer<JobTracker> tracker = m_tracker;
  QMetaObject::invokeMethod(
      QCoreApplication::instance(),
      [state, tracker, text, fraction] {
        if (tracker) tracker->deliverProgress(state->id, text, fraction);
      },
      Qt::QueuedConnection);
}

std::function<bool(const std::string&)> JobControl::progressFn() const {
  JobControl self = *this;
  return [self](const std::string& message) {
    self.report(QString::fromStdString(message));
    return !self.cancelled();
  };
}

std::function<bool()> JobControl::cancelledFn() const {
  std::shared_ptr<detail::JobState> state = m_state;  // the tracker is not needed, nor touched
  return [state] { return state->cancelled.load(); };
}

void JobTracker::cancel() {
  if (!m_current) return;
  m_current->cancelled = true;
  quint64 id = m_current->id;
  m_current.reset();
  emit cancelled(id);
}

bool JobTracker::finish(quint64 id) {
  if (!m_current || m_current->id != id) {
    emit staleResultDropped(id);
    return false;
  }
  m_current.reset();
  return true;
}

void JobTracker::deliverProgress(quint64 id, const QString& text, double fraction) {
  // Progress of a stale job would make the status bar lie about the current one.
  if (m_current && m_current->id == id) emit progressed(id, text, fraction);
}

void waitForAllJobs(int timeoutMs) { QThreadPool::globalInstance()->waitForDone(timeoutMs); }

}  // namespace kiln::gui
