// A read-only code pane with a find bar, shared by the IR view and the graph's kernel details:
// monospace text, match count, next/previous (Enter / Shift+Enter), every match highlighted.
#pragma once

#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QWidget>

namespace kiln::gui {

class CodeView : public QWidget {
  Q_OBJECT
 public:
  explicit CodeView(QWidget* parent = nullptr);
  void setText(const QString& text);
  /// Shows a grey one-line note instead of code ("Compile to see the loop IR").
  void setPlaceholder(const QString& text);
  QString text() const { return m_edit->toPlainText(); }
  QPlainTextEdit* editor() const { return m_edit; }
  QLineEdit* findField() const { return m_find; }
  /// Selects the next match of `pattern` after the cursor (wrapping); false when there is none.
  bool findNext(const QString& pattern, bool backward = false);
  int matchCount() const { return m_matches; }

 private:
  void updateHighlights();
  QPlainTextEdit* m_edit;
  QLineEdit* m_find;
  QLabel* m_count;
  int m_matches = 0;
};

}  // namespace kiln::gui
