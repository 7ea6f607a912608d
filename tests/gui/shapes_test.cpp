// The Workbench with a module traced and saved by its user (no input shapes in the file): the
// real main window, offscreen, asks for the shapes in its dialog (answered here through the
// dialog's own widgets), opens the model with them, compiles and profiles it (in the measuring
// worker, which must get the shapes too), and remembers them: another window opening the same
// file does not ask again, and a changed file is asked about again.
#include <QDialogButtonBox>
#include <QFile>
#include <QLineEdit>
#include <QProcess>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include "app/gui/input_shapes_dialog.h"
#include "app/gui/main_window.h"

using namespace kiln;
using namespace kiln::gui;

namespace {
constexpr int kJobTimeoutMs = 300000;  // the machine is shared: generous, not a benchmark

constexpr const char* kTrace = R"py(
import torch, torch.nn as nn
class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.fc = nn.Linear(6, 5)
    def forward(self, image, mask):
        return self.fc(torch.relu(self.conv(image)).mean(dim=(2, 3))) * mask
torch.manual_seed(0)
torch.jit.trace(Gate().eval(), (torch.randn(2, 3, 10, 10), torch.rand(2, 5))).save("user.pt")
)py";
}  // namespace

class ShapesTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    // Settings of this test only (XDG_CONFIG_HOME is the build's test folder).
    QCoreApplication::setOrganizationName(QStringLiteral("kiln-test"));
    QCoreApplication::setApplicationName(QStringLiteral("shapes-test-%1").arg(QCoreApplication::applicationPid()));
    QSettings().clear();
    QFile script(m_dir.filePath(QStringLiteral("trace.py")));
    QVERIFY(script.open(QIODevice::WriteOnly));
    script.write(kTrace);
    script.close();
    QProcess python;
    python.setWorkingDirectory(m_dir.path());
    python.start(QStringLiteral("/usr/bin/python3"), {script.fileName()});
    QVERIFY(python.waitForFinished(120000));
    QVERIFY2(python.exitCode() == 0, python.readAllStandardError().constData());
    m_model = m_dir.filePath(QStringLiteral("user.pt"));
  }

  void cleanupTestCase() { QSettings().clear(); }

  void asksForTheShapesThenCompilesAndProfiles() {
    auto window = makeWindow();
    QSignalSpy done(window.get(), &MainWindow::jobDone);
    window->openModelFile(m_model);
    QTRY_VERIFY_WITH_TIMEOUT(window->shapesDialog() != nullptr, kJobTimeoutMs);
    InputShapesDialog* dialog = window->shapesDialog();
    QVERIFY(dialog->isVisible());
    QPushButton* ok = dialog->buttons()->button(QDialogButtonBox::Ok);
    // The rows are the model's forward arguments, in order; a bad dimension keeps OK disabled.
    dialog->dimsEdit(0)->setText(QStringLiteral("2,3,10,10"));
    dialog->dimsEdit(1)->setText(QStringLiteral("2,x"));
    QVERIFY(!ok->isEnabled());
    QVERIFY2(dialog->problem().contains(QStringLiteral("dimension 'x'")), qPrintable(dialog->problem()));
    dialog->dimsEdit(1)->setText(QStringLiteral("2,5"));
    QVERIFY2(ok->isEnabled(), qPrintable(dialog->problem()));
    ok->click();

    QTRY_VERIFY_WITH_TIMEOUT(window->inputShapes().size() == 2 && !window->isBusy(), kJobTimeoutMs);
    QCOMPARE(window->modelPath(), m_model);
    QCOMPARE(QString::fromStdString(app::inputShapesText(window->inputShapes())),
             QStringLiteral("image:[2,3,10,10],mask:[2,5]"));

    done.clear();
    window->compile();
    QTRY_VERIFY_WITH_TIMEOUT(hasJob(done, QStringLiteral("compile")), kJobTimeoutMs);
    QVERIFY2(jobOk(done, QStringLiteral("compile")), qPrintable(window->statusText()));
    // The profile runs in a `kiln measure-worker`: it opens the file with the same shapes.
    window->profile();
    QTRY_VERIFY_WITH_TIMEOUT(hasJob(done, QStringLiteral("profile")), kJobTimeoutMs);
    QVERIFY2(jobOk(done, QStringLiteral("profile")), qPrintable(window->statusText()));
    QVERIFY(window->lastProfile().has_value());
    QCOMPARE(window->lastProfile()->build.batch, 2);
    closeErrorBox(*window);
  }

  void reopeningTheSameFileDoesNotAskAgain() {
    auto window = makeWindow();
    window->openModelFile(m_model);
    QTRY_VERIFY_WITH_TIMEOUT(!window->isBusy(), kJobTimeoutMs);
    QVERIFY(window->shapesDialog() == nullptr);
    QCOMPARE(window->modelPath(), m_model);
    QCOMPARE(window->inputShapes().size(), size_t(2));

    // A changed file (another modification time) is another model: asked about again.
    QTest::qWait(1100);
    QFile f(m_model);
    QVERIFY(f.open(QIODevice::ReadWrite));
    QVERIFY(f.setFileTime(QDateTime::currentDateTime().addSecs(5), QFileDevice::FileModificationTime));
    f.close();
    auto second = makeWindow();
    second->openModelFile(m_model);
    QTRY_VERIFY_WITH_TIMEOUT(second->shapesDialog() != nullptr, kJobTimeoutMs);
    second->shapesDialog()->reject();
    QTRY_VERIFY_WITH_TIMEOUT(!second->isBusy(), kJobTimeoutMs);
    QVERIFY(second->modelPath().isEmpty());
  }

 private:
  std::unique_ptr<MainWindow> makeWindow() {
    WorkbenchOptions o;
    o.dbPath = m_dir.filePath(QStringLiteral("kiln.db"));
    o.modelsDir = QStringLiteral(KILN_MODELS_DIR);
    o.firstStartDialog = false;
    o.persistSettings = true;  // the shapes are remembered in QSettings, as for a user
    auto window = std::make_unique<MainWindow>(o);
    window->setThreads(1);
    window->show();
    return window;
  }
  static bool hasJob(const QSignalSpy& spy, const QString& kind) {
    for (const auto& args : spy)
      if (args.at(0).toString() == kind) return true;
    return false;
  }
  static bool jobOk(const QSignalSpy& spy, const QString& kind) {
    for (const auto& args : spy)
      if (args.at(0).toString() == kind) return args.at(1).toBool();
    return false;
  }
  static void closeErrorBox(MainWindow& w) {
    if (w.errorBox()) w.errorBox()->close();
  }

  QTemporaryDir m_dir;
  QString m_model;
};

QTEST_MAIN(ShapesTest)
#include "shapes_test.moc"
