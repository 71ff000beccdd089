// The pictures of docs/remote-gui.md, from the real program against a real server: starts
// `iwb serve` on the aidreams model, opens File › Connect to Server… in the main window,
// connects (with an API key), captures the dialog, adds the server, chooses it in the chat's
// "Runs on" and captures the window after a streamed reply. A plain program, not a test;
// scripts/screenshot-remote.sh runs it under a virtual X display.
//
//   remote_screenshots OUT_DIR      (writes connect-dialog.png and chat-remote.png)
#include "aidreams_fixture.h"
#include "chat/chat_input.h"
#include "chat/chat_panel.h"
#include "chat/chat_settings_panel.h"
#include "main_window/main_window.h"
#include "remote/connect_dialog.h"
#include "remote/remote_endpoints.h"
#include "remote_fixtures.h"

#include <QApplication>
#include <QDir>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>

#include <cstdio>

using namespace iwb::ui;

namespace {

constexpr int kTimeoutMs = 60000;

int fail(const QString& why) {
  std::fprintf(stderr, "remote_screenshots: %s\n", qPrintable(why));
  return 1;
}

bool save(QWidget* widget, const QString& path) {
  QApplication::processEvents();
  QTest::qWait(300);  // let the last paint land
  const bool isSaved = widget->grab().save(path);
  std::printf("%s %s\n", isSaved ? "wrote" : "could not write", qPrintable(path));
  return isSaved;
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationDisplayName(QStringLiteral("Inference Workbench"));
  if (argc != 2) return fail(QStringLiteral("usage: remote_screenshots OUT_DIR"));
  const QDir out(QString::fromLocal8Bit(argv[1]));
  QTemporaryDir work;
  QString why;
  const QString gguf = iwb::test::convertAidreamsModel(work.path(), &why);
  if (gguf.isEmpty()) return fail(why);
  const QString key = QStringLiteral("sk-demo-3f9a");
  iwb::test::IwbServe serve;
  if (!serve.start(gguf, {QStringLiteral("--api-key"), key, QStringLiteral("--alias"), QStringLiteral("aidreams-260k")},
                   &why))
    return fail(why);

  MainWindow window(nullptr, work.filePath(QStringLiteral("conversations.sqlite")),
                    work.filePath(QStringLiteral("results.sqlite")));
  window.resize(1280, 800);
  window.show();
  ConnectDialog* dialog = window.showConnectDialog();
  QSignalSpy probed(dialog, &ConnectDialog::probeFinished);
  QTest::keyClicks(dialog->urlEdit(), QStringLiteral("127.0.0.1:%1").arg(serve.port()));
  QTest::keyClicks(dialog->apiKeyEdit(), key);
  QTest::mouseClick(dialog->connectButton(), Qt::LeftButton);
  if (!probed.wait(kTimeoutMs)) return fail(QStringLiteral("the probe did not finish"));
  if (!dialog->probeResult())
    return fail(dialog->statusLabel()->text() + QLatin1Char('\n') + dialog->detailLabel()->text());
  (void)QTest::qWaitFor([&] { return dialog->keyNoteLabel()->isVisible(); }, kTimeoutMs);
  if (!save(dialog, out.filePath(QStringLiteral("connect-dialog.png")))) return 1;
  QTest::mouseClick(dialog->addButton(), Qt::LeftButton);

  ChatPanel* chat = window.chatPanel();
  window.tabs()->setCurrentWidget(chat);
  if (!chat->setRunsOn(serve.baseUrl())) return fail(QStringLiteral("the server is not offered in Runs on"));
  chat->settingsPanel()->maxTokensBox()->setValue(48);
  chat->settingsPanel()->seedBox()->setValue(7);  // the same picture every time
  QSignalSpy finished(chat, &ChatPanel::replyFinished);
  chat->input()->setPlainText(QStringLiteral("Tell me a story about a dream"));
  QTest::mouseClick(chat->sendButton(), Qt::LeftButton);
  if (!finished.wait(kTimeoutMs)) return fail(QStringLiteral("no reply from the server"));
  chat->input()->clear();
  return save(&window, out.filePath(QStringLiteral("chat-remote.png"))) ? 0 : 1;
}
