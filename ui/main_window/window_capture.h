// PNG captures of the main window's tabs once a model is ready, for machines with no display
// (QT_QPA_PLATFORM=offscreen): the lent GPU machine has no X server, and this is how the
// Memory and Roofline tabs of a model running on cuda:0 are seen there.
#pragma once

#include <QObject>
#include <QString>
#include <QStringList>

namespace iwb::ui {

class MainWindow;

class WindowCapture : public QObject {
  Q_OBJECT

 public:
  struct Options {
    QString directory;        // where <tab>.png files go (created when missing)
    QStringList tabs;         // tab names as MainWindow::showTab takes them
    bool afterReply = false;  // wait for the first reply to end, not only for the model to load
    int delayMs = 1000;       // after that, so late samples (memory, profile snapshots) arrive
  };

  WindowCapture(MainWindow* window, Options options, QObject* parent = nullptr);

  // Starts waiting for the model (and reply); `finished` follows once, with the files saved
  // or why none could be.
  void start();
  // Captures only once `sender` has also emitted `signal` (once): a demonstration run that
  // starts with the model (--spec-run's comparison, --lab-run's queue) is then on its tab.
  template <typename Sender, typename Signal>
  void waitAlsoFor(Sender* sender, Signal signal) {
    ++m_pendingRuns;
    connect(
        sender, signal, this,
        [this] {
          --m_pendingRuns;
          captureWhenReady();
        },
        Qt::SingleShotConnection);
  }
  const QStringList& savedFiles() const { return m_saved; }

 signals:
  void finished(bool isOk, const QString& message);

 private:
  void captureWhenReady();
  void captureSoon();
  void captureAll();
  void finish(bool isOk, const QString& message);

  MainWindow* m_window;
  Options m_options;
  QStringList m_saved;
  bool m_isDone = false;
  bool m_isScheduled = false;
  bool m_isReady = false;  // the model loaded (and the reply ended, when asked)
  int m_pendingRuns = 0;   // waitAlsoFor signals not yet seen
};

}  // namespace iwb::ui
