// Long work off the UI thread, after KDAB Hotspot's jobtracker: a JobTracker runs one kind of job
// (compile, profile, sweep, ...) on a worker thread with a cancel predicate; its result, a value
// struct, comes back to the GUI thread through a queued call. Starting a newer job makes every
// older one stale: its result is dropped by id when it arrives, so a slow compile of the previous
// model can never overwrite the current one. A QPointer guards the tracker, so a result arriving
// after its window closed is dropped too. Qt Core only (no widgets).
#pragma once

#include <QCoreApplication>
#include <QObject>
#include <QPointer>
#include <QString>
#include <QThreadPool>

#include <atomic>
#include <functional>
#include <memory>
#include <string>

namespace kiln::gui {

namespace detail {
struct JobState {
  explicit JobState(quint64 id) : id(id) {}
  const quint64 id;
  std::atomic<bool> cancelled{false};
};
}  // namespace detail

class JobTracker;

/// What a running job sees of its tracker: whether to stop, and a way to report progress. Cheap
/// to copy; safe to use from the worker thread.
class JobControl {
 public:
  bool cancelled() const { return m_state->cancelled.load(); }
  quint64 id() const { return m_state->id; }
  /// Posts a status line (and a fraction in [0, 1], < 0 for "unknown") to the tracker.
  void report(const QString& text, double fraction = -1) const;
  /// A façade ProgressFn (app/measure.h): reports each message and returns false once cancelled.
  std::function<bool(const std::string&)> progressFn() const;
  /// The cancel predicate as a function (app::IsolationOptions::cancelled): a measuring worker
  /// is killed as soon as the job is cancelled or abandoned.
  std::function<bool()> cancelledFn() const;

 private:
  friend class JobTracker;
  JobControl(std::shared_ptr<detail::JobState> state, QPointer<JobTracker> tracker)
      : m_state(std::move(state)), m_tracker(std::move(tracker)) {}
  std::shared_ptr<detail::JobState> m_state;
  QPointer<JobTracker> m_tracker;  // read on the GUI thread only (inside the queued call)
};

class JobTracker : public QObject {
  Q_OBJECT
 public:
  explicit JobTracker(const QString& name, QObject* parent = nullptr) : QObject(parent), m_name(name) {}
  ~JobTracker() override { cancel(); }

  const QString& name() const { return m_name; }
  bool isRunning() const { return m_current != nullptr; }
  quint64 currentJobId() const { return m_current ? m_current->id : 0; }
  quint64 lastJobId() const { return m_lastId; }

  /// Runs `job(JobControl)` on a worker thread and, if it is still the current job when it
  /// finishes, `then(result)` on the GUI thread. Any job still running becomes stale (and is asked
  /// to cancel). Returns the new job's id.
  template <typename Job, typename Then>
  quint64 start(Job job, Then then) {
    cancel();
    auto state = std::make_shared<detail::JobState>(++m_lastId);
    m_current = state;
    QPointer<JobTracker> self(this);
    JobControl control(state, self);
    emit started(state->id);
    QThreadPool::globalInstance()->start([state, control, self, job, then]() mutable {
      auto result = job(control);
      // The queued call runs on the GUI thread (qApp's), where the QPointer check is race-free.
      QMetaObject::invokeMethod(
          QCoreApplication::instance(),
          [state, self, then, result]() mutable {
            if (!self) return;
            if (!self->finish(state->id)) return;
            then(std::move(result));
            if (self) emit self->finished(state->id);
          },
          Qt::QueuedConnection);
    });
    return state->id;
  }

  /// Asks the current job to stop at its next cancellation point and keeps waiting for its
  /// (partial) result: tuning keeps what it measured.
  void requestCancel() {
    if (m_current) m_current->cancelled = true;
  }
  /// Asks the current job to stop and drops its result whenever it arrives: the UI is free at once.
  void cancel();

 signals:
  void started(quint64 id);
  void progressed(quint64 id, const QString& text, double fraction);
  void finished(quint64 id);            // the current job's result was handled
  void cancelled(quint64 id);           // the current job was abandoned
  void staleResultDropped(quint64 id);  // a result arrived after a newer job started

 private:
  friend class JobControl;
  /// GUI thread: true when `id` is the current job (which is then no longer running).
  bool finish(quint64 id);
  void deliverProgress(quint64 id, const QString& text, double fraction);

  QString m_name;
  quint64 m_lastId = 0;
  std::shared_ptr<detail::JobState> m_current;
};

/// Blocks until every worker of the shared pool is idle (application shutdown, tests).
void waitForAllJobs(int timeoutMs = -1);

}  // namespace kiln::gui
