// The Doctor tab: the import doctor's report (app/doctor.h) for the current model, or for the
// file that just failed to open: what Kiln compiles, what it cannot (with locations), the share
// of the FLOPs it covers, and hints.
#pragma once

#include <QWidget>

#include "app/doctor.h"

class QLabel;
class QTableWidget;

namespace kiln::gui {

class DoctorView : public QWidget {
  Q_OBJECT
 public:
  explicit DoctorView(QWidget* parent = nullptr);
  void setReport(const app::DoctorReport& report);
  void clear(const QString& message);
  /// Rows of the per-kind table, and the unsupported-operator and hint text (tests).
  int kindRows() const;
  QString detailsText() const;

 private:
  QLabel* m_summary;
  QTableWidget* m_kinds;
  QLabel* m_details;
};

}  // namespace kiln::gui
