#include "main_window/window_capture.h"

#include "main_window/main_window.h"
#include "worker/engine_controller.h"

#include <QCoreApplication>
#include <QDir>
#include <QPixmap>
#include <QTabWidget>
#include <QTimer>

namespace iwb::ui {

WindowCapture::WindowCapture(MainWindow* window, Options options, QObject* parent)
    : QObject(parent), m_window(window), m_options(std::move(options)) {}

void WindowCapture::start() {
  EngineController* engine = m_window->engine();
  connect(engine, &EngineController::modelLoaded, this, [this] {
    if (m_options.afterReply) return;
    m_isReady = true;
    captureWhenReady();
  });
  connect(engine, &EngineController::generationFinished, this, [this] {
    m_isReady = true;  // a reply ended, so the model is loaded too
    captureWhenReady();
  });
  connect(engine, &EngineController::modelLoadFailed, this, [this](const QString& path, const QString& message) {
    finish(false, tr("%1 did not load: %2").arg(path, message));
  });
  connect(engine, &EngineController::generationFailed, this,
          [this](quint64, const QString& message) { finish(false, tr("the reply failed: %1").arg(message)); });
  connect(m_window, &MainWindow::modelOpenFailed, this, [this](const QString& path, const QString& message) {
    finish(false, tr("%1 did not open: %2").arg(path, message));
  });
}

void WindowCapture::captureWhenReady() {
  if (m_isReady && m_pendingRuns == 0) captureSoon();
}

void WindowCapture::captureSoon() {
  if (m_isDone || m_isScheduled) return;
  m_isScheduled = true;
  m_window->engine()->sampleMemory();  // the Memory tab shows the state after the reply
  QTimer::singleShot(m_options.delayMs, this, &WindowCapture::captureAll);
}

void WindowCapture::captureAll() {
  if (m_isDone) return;
  if (!QDir().mkpath(m_options.directory)) {
    finish(false, tr("cannot create %1").arg(m_options.directory));
    return;
  }
  const QDir dir(m_options.directory);
  QStringList problems;
  for (const QString& tab : m_options.tabs) {
    if (!m_window->showTab(tab)) {
      problems << tr("no tab named \"%1\" (the tabs: %2)").arg(tab, m_window->tabNames().join(QStringLiteral(", ")));
      continue;
    }
    // Lay out and paint the newly shown tab (offscreen, nothing else makes it happen).
    QCoreApplication::processEvents();
    const QString name = QString(tab).replace(QLatin1Char(' '), QLatin1Char('-')).toLower() + QStringLiteral(".png");
    const QString path = dir.filePath(name);
    if (m_window->grab().save(path, "PNG"))
      m_saved << path;
    else
      problems << tr("cannot write %1").arg(path);
  }
  if (problems.isEmpty())
    finish(true, tr("saved %1").arg(m_saved.join(QStringLiteral(", "))));
  else
    finish(false, problems.join(QStringLiteral("; ")));
}

void WindowCapture::finish(bool isOk, const QString& message) {
  if (m_isDone) return;
  m_isDone = true;
  emit finished(isOk, message);
}

}  // namespace iwb::ui
