#include "app/gui/text_view.h"

#include <QFontDatabase>
#include <QGuiApplication>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QShortcut>
#include <QTextBlock>
#include <QToolButton>
#include <QVBoxLayout>

namespace kiln::gui {

namespace {
// Highlighting every match of a common word in a 5 MB assembly listing would freeze the UI:
// past this many matches only the count is shown.
constexpr int kMaxHighlights = 2000;
}

CodeView::CodeView(QWidget* parent) : QWidget(parent) {
  m_edit = new QPlainTextEdit(this);
  m_edit->setReadOnly(true);
  m_edit->setLineWrapMode(QPlainTextEdit::NoWrap);
  m_edit->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  m_edit->setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::TextSelectableByKeyboard);

  m_find = new QLineEdit(this);
  m_find->setPlaceholderText(tr("Find (Enter: next, Shift+Enter: previous)"));
  m_find->setClearButtonEnabled(true);
  m_count = new QLabel(this);
  m_count->setMinimumWidth(90);
  auto* prev = new QToolButton(this);
  prev->setArrowType(Qt::UpArrow);
  prev->setToolTip(tr("Previous match"));
  auto* next = new QToolButton(this);
  next->setArrowType(Qt::DownArrow);
  next->setToolTip(tr("Next match"));

  auto* bar = new QHBoxLayout;
  bar->setContentsMargins(0, 0, 0, 0);
  bar->addWidget(m_find, 1);
  bar->addWidget(prev);
  bar->addWidget(next);
  bar->addWidget(m_count);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(4);
  layout->addLayout(bar);
  layout->addWidget(m_edit, 1);

  connect(m_find, &QLineEdit::textChanged, this, [this] {
    updateHighlights();
    if (!m_find->text().isEmpty()) {
      m_edit->moveCursor(QTextCursor::Start);
      findNext(m_find->text());
    }
  });
  connect(m_find, &QLineEdit::returnPressed, this, [this] {
    bool backward = QGuiApplication::keyboardModifiers() & Qt::ShiftModifier;
    findNext(m_find->text(), backward);
  });
  connect(next, &QToolButton::clicked, this, [this] { findNext(m_find->text()); });
  connect(prev, &QToolButton::clicked, this, [this] { findNext(m_find->text(), true); });
  auto* findShortcut = new QShortcut(QKeySequence::Find, this, [this] {
    m_find->setFocus();
    m_find->selectAll();
  });
  findShortcut->setContext(Qt::WidgetWithChildrenShortcut);
}

void CodeView::setText(const QString& text) {
  m_edit->setPlainText(text);
  m_edit->setEnabled(true);
  updateHighlights();
}

void CodeView::setPlaceholder(const QString& text) {
  m_edit->clear();
  m_edit->setPlaceholderText(text);
  m_count->clear();
}

bool CodeView::findNext(const QString& pattern, bool backward) {
  if (pattern.isEmpty()) return false;
  QTextDocument::FindFlags flags;
  if (backward) flags |= QTextDocument::FindBackward;
  if (m_edit->find(pattern, flags)) return true;
  // Wrap around once.
  QTextCursor c = m_edit->textCursor();
  c.movePosition(backward ? QTextCursor::End : QTextCursor::Start);
  m_edit->setTextCursor(c);
  return m_edit->find(pattern, flags);
}

void CodeView::updateHighlights() {
  QList<QTextEdit::ExtraSelection> selections;
  m_matches = 0;
  QString pattern = m_find->text();
  if (!pattern.isEmpty()) {
    QTextDocument* doc = m_edit->document();
    QTextCursor c(doc);
    while (true) {
      c = doc->find(pattern, c);
      if (c.isNull()) break;
      ++m_matches;
      if (selections.size() < kMaxHighlights) {
        QTextEdit::ExtraSelection s;
        s.cursor = c;
        s.format.setBackground(QColor(255, 236, 140));
        selections << s;
      }
    }
  }
  m_edit->setExtraSelections(selections);
  m_count->setText(pattern.isEmpty() ? QString() : tr("%n match(es)", nullptr, m_matches));
}

}  // namespace kiln::gui
