// The Doctor tab; see doctor_view.h.
#include "app/gui/doctor_view.h"

#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>

namespace kiln::gui {
namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

QColor statusColour(const std::string& status) {
  if (status == "unsupported") return QColor(0xf4, 0xc7, 0xc3);
  if (status == "folded") return QColor(0xe8, 0xea, 0xf6);
  return QColor(0xe6, 0xf4, 0xea);
}

}  // namespace

DoctorView::DoctorView(QWidget* parent) : QWidget(parent) {
  m_summary = new QLabel(this);
  m_summary->setWordWrap(true);
  m_summary->setTextFormat(Qt::RichText);
  m_kinds = new QTableWidget(0, 4, this);
  m_kinds->setHorizontalHeaderLabels({tr("Operator"), tr("Status"), tr("Count"), tr("MFLOP")});
  m_kinds->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
  m_kinds->verticalHeader()->hide();
  m_kinds->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_kinds->setSortingEnabled(true);
  m_details = new QLabel(this);
  m_details->setWordWrap(true);
  m_details->setTextFormat(Qt::RichText);
  m_details->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_details->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  auto* split = new QSplitter(Qt::Horizontal, this);
  split->addWidget(m_kinds);
  split->addWidget(m_details);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(m_summary);
  layout->addWidget(split, 1);
  clear(tr("No report yet: Run ▸ Diagnose import (Ctrl+D) lists every operator of the model and whether Kiln "
           "compiles it."));
}

void DoctorView::clear(const QString& message) {
  m_summary->setText(message);
  m_kinds->setRowCount(0);
  m_details->clear();
}

int DoctorView::kindRows() const { return m_kinds->rowCount(); }

QString DoctorView::detailsText() const { return m_details->text(); }

void DoctorView::setReport(const app::DoctorReport& r) {
  QString verdict = r.importable ? tr("<b style='color:#1e7b34'>importable</b>")
                                 : tr("<b style='color:#b3261e'>not importable</b>");
  m_summary->setText(tr("<b>%1</b> (%2) — %3: %4 supported, %5 folded at import, %6 unsupported operators; "
                        "Kiln compiles <b>%7%</b> of %8 MFLOP.%9")
                         .arg(qs(r.model), qs(r.format), verdict)
                         .arg(r.supported)
                         .arg(r.folded)
                         .arg(r.unsupported)
                         .arg(r.compiledShare * 100, 0, 'f', 1)
                         .arg(r.totalFlops / 1e6, 0, 'f', 1)
                         .arg(r.complete ? QString() : tr(" The walk stopped early: the list is partial.")));
  m_kinds->setSortingEnabled(false);
  m_kinds->setRowCount(static_cast<int>(r.kinds.size()));
  for (int row = 0; row < static_cast<int>(r.kinds.size()); ++row) {
    const app::DoctorKindCount& k = r.kinds[static_cast<size_t>(row)];
    auto* kind = new QTableWidgetItem(qs(k.kind));
    auto* status = new QTableWidgetItem(qs(k.status));
    auto* count = new QTableWidgetItem;
    count->setData(Qt::DisplayRole, k.count);
    auto* flops = new QTableWidgetItem;
    flops->setData(Qt::DisplayRole, k.flops / 1e6);
    for (QTableWidgetItem* item : {kind, status, count, flops}) item->setBackground(statusColour(k.status));
    m_kinds->setItem(row, 0, kind);
    m_kinds->setItem(row, 1, status);
    m_kinds->setItem(row, 2, count);
    m_kinds->setItem(row, 3, flops);
  }
  m_kinds->setSortingEnabled(true);

  QString details;
  if (r.unsupported > 0) {
    details += tr("<h4>Unsupported</h4><ul>");
    for (const app::DoctorOp& op : r.ops)
      if (op.status == "unsupported")
        details += QStringLiteral("<li><b>%1</b> %2<br/><small>%3</small></li>")
                       .arg(qs(op.kind).toHtmlEscaped(), qs(op.location).toHtmlEscaped(), qs(op.message).toHtmlEscaped());
    details += QStringLiteral("</ul>");
  }
  if (!r.hints.empty()) {
    details += tr("<h4>Hints</h4><ul>");
    for (const std::string& h : r.hints) details += QStringLiteral("<li>%1</li>").arg(qs(h).toHtmlEscaped());
    details += QStringLiteral("</ul>");
  }
  if (details.isEmpty()) details = tr("Every operator is supported: nothing to fix.");
  m_details->setText(details);
}

}  // namespace kiln::gui
