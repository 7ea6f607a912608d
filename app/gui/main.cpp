// kiln-workbench: Kiln's desktop front end. Parses the command line, creates the main window and,
// for evidence and measurements, drives it through a script (--screenshots, --measure-stall).
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QFileInfo>
#include <QTimer>

#include <cstdio>
#include <optional>
#include <utility>

#include "app/facade.h"
#include "app/gui/job_runner.h"
#include "app/gui/main_window.h"
#include "app/gui/script.h"
#include "app/gui/stall_monitor.h"

using namespace kiln::gui;

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("Kiln"));
  QApplication::setApplicationName(QStringLiteral("Kiln Workbench"));
  QApplication::setApplicationVersion(QString::fromStdString(kiln::app::version()));
  QApplication::setWindowIcon(workbenchIcon());

  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("Kiln Workbench: compile, inspect, profile and compare models."));
  parser.addHelpOption();
  parser.addVersionOption();
  parser.addPositionalArgument(QStringLiteral("model"), QStringLiteral("TorchScript model to open"), QStringLiteral("[model]"));
  QCommandLineOption db(QStringLiteral("db"), QStringLiteral("Session store (SQLite) to use."), QStringLiteral("file"));
  QCommandLineOption models(QStringLiteral("models-dir"), QStringLiteral("Folder of the sample models (manifest.json)."),
                            QStringLiteral("dir"), QStringLiteral(KILN_DEFAULT_MODELS_DIR));
  QCommandLineOption screenshots(QStringLiteral("screenshots"),
                                 QStringLiteral("Open the model (default: MobileNetV2), run every view, save PNGs into DIR, quit."),
                                 QStringLiteral("dir"));
  QCommandLineOption stall(QStringLiteral("measure-stall"),
                           QStringLiteral("Open, compile, profile and tune the model, print the largest UI-thread stall, quit."));
  QCommandLineOption noWelcome(QStringLiteral("no-welcome"), QStringLiteral("Do not offer the sample models on first start."));
  QCommandLineOption diff(QStringLiteral("diff"),
                          QStringLiteral("Open at the Sessions diff of two stored builds (ids from `kiln sessions show`), "
                                         "e.g. --diff 3,4; with --screenshots, save the diff and its roofline and quit."),
                          QStringLiteral("a,b"));
  parser.addOptions({db, models, screenshots, stall, noWelcome, diff});
  parser.process(app);

  std::optional<std::pair<int64_t, int64_t>> diffBuilds;
  if (parser.isSet(diff)) {
    QStringList ids = parser.value(diff).split(QLatin1Char(','));
    bool okA = false, okB = false;
    if (ids.size() == 2) diffBuilds = std::pair{ids[0].toLongLong(&okA), ids[1].toLongLong(&okB)};
    if (!okA || !okB) {
      std::fprintf(stderr, "error: --diff %s: give two build ids, e.g. --diff 3,4\n", qPrintable(parser.value(diff)));
      return 2;
    }
    if (parser.value(db).isEmpty()) {
      std::fprintf(stderr, "error: --diff needs the store that holds the builds: add --db FILE\n");
      return 2;
    }
  }

  WorkbenchOptions options;
  options.dbPath = parser.value(db);
  options.modelsDir = parser.value(models);
  bool scripted = parser.isSet(screenshots) || parser.isSet(stall);
  options.firstStartDialog = !scripted && !parser.isSet(noWelcome) && parser.positionalArguments().isEmpty();
  options.persistSettings = !scripted;
  QString model = parser.positionalArguments().value(0);
  if (scripted && model.isEmpty() && !diffBuilds) model = QDir(options.modelsDir).filePath(QStringLiteral("mobilenet_v2.pt"));
  if (scripted && options.dbPath.isEmpty()) {
    // Scripted runs never touch the user's store.
    QString dir = parser.isSet(screenshots) ? parser.value(screenshots) : QDir::tempPath();
    QDir().mkpath(dir);
    options.dbPath = QDir(dir).filePath(QStringLiteral("workbench-script.db"));
    QFile::remove(options.dbPath);
  }

  MainWindow window(options);
  window.resize(1280, 800);
  window.show();

  int code = 0;
  if (scripted) {
    auto* script = new WorkbenchScript(&window, &window);
    StallMonitor monitor;
    if (parser.isSet(stall)) {
      monitor.start();
      script->addStallMeasurement(model, &monitor);
    } else if (diffBuilds) {
      script->addDiffShots(diffBuilds->first, diffBuilds->second, parser.value(screenshots));
    } else {
      QString bad = QDir(options.modelsDir).filePath(QStringLiteral("bad/truncated.pt"));
      script->addScreenshotTour(model, bad, parser.value(screenshots));
    }
    QObject::connect(script, &WorkbenchScript::finished, &app, [&code](int c) {
      code = c;
      QApplication::quit();
    });
    script->start();
    app.exec();
    window.cancelJobs();
    waitForAllJobs();
    return code;
  }
  if (!model.isEmpty()) QTimer::singleShot(0, &window, [&window, model] { window.openModelFile(model); });
  if (diffBuilds) QTimer::singleShot(0, &window, [&window, d = *diffBuilds] { window.diffBuilds(d.first, d.second); });
  code = app.exec();
  window.cancelJobs();
  waitForAllJobs();
  return code;
}
