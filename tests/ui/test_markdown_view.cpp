// Replies rendered as Markdown (issue 19): cmark-gfm's output for the chat view, a reply
// streamed through the model and the view rendered the same as the whole reply at once, code
// blocks with their language and a Copy button that puts the code on the clipboard, and
// View > Show raw text.
#include "chat/markdown_render.h"
#include "chat/message_list_model.h"
#include "chat/message_view.h"

#include <QApplication>
#include <QClipboard>
#include <QSignalSpy>
#include <QTest>
#include <QTextDocument>

using namespace iwb::ui;

namespace {

const QString kReply = QStringLiteral(
    "## Summing a list\n\n"
    "Use **`sum`**, or a *loop*; ~~never~~ `reduce` only when needed. See https://docs.python.org.\n\n"
    "1. first\n2. second\n\n"
    "| n | square |\n|---|---|\n| 2 | 4 |\n| 10 | 100 |\n\n"
    "```python\nnumbers = [1, 2, 3]\nprint(sum(numbers))  # 6 < 7 & \"ok\"\n```\n\n"
    "And in the shell:\n\n```\necho done\n```\n");

StoredMessage message(qint64 id, const QString& role, const QString& content) {
  StoredMessage m;
  m.id = id;
  m.role = role;
  m.content = content;
  return m;
}

// Shows `view` over `model` at the size every test here uses; false when it never appears.
bool showView(MessageView& view, MessageListModel& model) {
  view.resize(700, 900);
  view.setModel(&model);
  view.show();
  return QTest::qWaitForWindowExposed(&view);
}

}  // namespace

class TestMarkdownView : public QObject {
  Q_OBJECT

 private slots:
  void rendersBlocksAndInlines();
  void codeBlocksKeepLanguageAndText();
  void rawHtmlIsShownAsText();
  void streamedReplyRendersLikeWholeReply();
  void copyButtonPutsCodeOnClipboard();
  void rawTextModeShowsTheMarkdown();
  void reasoningIsShownApartFromTheAnswer();
  void streamBudgetSetsTheRepaintInterval();
};

void TestMarkdownView::rendersBlocksAndInlines() {
  const RenderedMarkdown r = renderMarkdown(kReply);
  QVERIFY(r.html.contains(QLatin1String("<h2>Summing a list</h2>")));
  QVERIFY(r.html.contains(QLatin1String("<strong><code>sum</code></strong>")));
  QVERIFY(r.html.contains(QLatin1String("<em>loop</em>")));
  QVERIFY(r.html.contains(QLatin1String("<del>never</del>")));                      // strikethrough
  QVERIFY(r.html.contains(QLatin1String("<a href=\"https://docs.python.org\">")));  // autolink
  QVERIFY(r.html.contains(QLatin1String("<ol>")));
  QVERIFY(r.html.contains(QLatin1String("<td>10</td>")));  // table
  QTextDocument doc;
  doc.setHtml(r.html);
  const QString text = doc.toPlainText();
  QVERIFY(!text.contains(QLatin1String("```")));
  QVERIFY(!text.contains(QLatin1String("**")));
  QVERIFY(text.contains(QLatin1String("print(sum(numbers))")));
}

void TestMarkdownView::codeBlocksKeepLanguageAndText() {
  const RenderedMarkdown r = renderMarkdown(kReply);
  QCOMPARE(r.codeBlocks.size(), 2);
  QCOMPARE(r.codeLanguages, QStringList({QStringLiteral("python"), QString()}));
  QCOMPARE(r.codeBlocks[0], QStringLiteral("numbers = [1, 2, 3]\nprint(sum(numbers))  # 6 < 7 & \"ok\""));
  QCOMPARE(r.codeBlocks[1], QStringLiteral("echo done"));
  QVERIFY(r.html.contains(copyHref(0)) && r.html.contains(copyHref(1)));
  // Qt 6.4 paints collapsed table borders over the underscores of the line above: none here.
  QVERIFY(!r.html.contains(QLatin1String("border-collapse")));
  QCOMPARE(copyIndexOfHref(copyHref(1)), 1);
  QCOMPARE(copyIndexOfHref(QStringLiteral("https://example.org")), -1);
  // An unclosed fence while streaming is a code block to the end.
  const RenderedMarkdown partial = renderMarkdown(QStringLiteral("Try:\n\n```cpp\nint x = 1;\n"));
  QCOMPARE(partial.codeLanguages, QStringList{QStringLiteral("cpp")});
  QCOMPARE(partial.codeBlocks, QStringList{QStringLiteral("int x = 1;")});
}

void TestMarkdownView::rawHtmlIsShownAsText() {
  const RenderedMarkdown r = renderMarkdown(QStringLiteral("a <b>bold</b> word\n\n<div>block</div>\n"));
  QVERIFY(!r.html.contains(QLatin1String("<b>")));
  QVERIFY(!r.html.contains(QLatin1String("<div>")));
  QVERIFY(r.html.contains(QLatin1String("&lt;b&gt;bold&lt;/b&gt;")));
  QVERIFY(r.html.contains(QLatin1String("&lt;div&gt;block&lt;/div&gt;")));
}

void TestMarkdownView::streamedReplyRendersLikeWholeReply() {
  // Streamed: the reply grows token by token through the model; the view lays the row out
  // again at most every 50 ms, in between partial Markdown (open fences, half tables).
  MessageListModel streamedModel;
  MessageView streamedView;
  QVERIFY(showView(streamedView, streamedModel));
  streamedModel.append(message(1, QStringLiteral("user"), QStringLiteral("How do I sum a list?")));
  streamedModel.append(message(2, QStringLiteral("assistant"), QString()), /*isStreaming=*/true);
  MessageDelegate* delegate = streamedView.messageDelegate();
  QSet<QString> seenPartials;
  for (qsizetype at = 0; at < kReply.size(); at += 7) {
    streamedModel.appendText(1, kReply.mid(at, 7));
    if ((at / 7) % 6 == 5) {
      QTest::qWait(streamedView.streamRepaintIntervalMs() + 10);
      const QTextDocument* doc = delegate->documentFor(streamedModel.index(1));
      QVERIFY(doc != nullptr);
      seenPartials.insert(doc->toHtml());
    }
  }
  QVERIFY2(seenPartials.size() > 5, "the reply was rendered while it streamed");
  GenerationStats stats;
  streamedModel.finish(1, kReply, stats, true);
  QTest::qWait(streamedView.streamRepaintIntervalMs() + 10);

  // Whole: the same reply shown at once in another view of the same size.
  MessageListModel wholeModel;
  MessageView wholeView;
  QVERIFY(showView(wholeView, wholeModel));
  wholeModel.setMessages({message(1, QStringLiteral("user"), QStringLiteral("How do I sum a list?")),
                          message(2, QStringLiteral("assistant"), kReply)});

  const QTextDocument* streamed = delegate->documentFor(streamedModel.index(1));
  const QTextDocument* whole = wholeView.messageDelegate()->documentFor(wholeModel.index(1));
  QVERIFY(streamed && whole);
  QCOMPARE(streamed->toHtml(), whole->toHtml());
  QCOMPARE(streamed->toPlainText(), whole->toPlainText());
  QCOMPARE(delegate->codeBlocksFor(streamedModel.index(1)),
           wholeView.messageDelegate()->codeBlocksFor(wholeModel.index(1)));
  QCOMPARE(streamedView.visualRect(streamedModel.index(1)).height(),
           wholeView.visualRect(wholeModel.index(1)).height());
  // The user's own message stays plain text.
  QCOMPARE(delegate->documentFor(streamedModel.index(0)), nullptr);
}

void TestMarkdownView::copyButtonPutsCodeOnClipboard() {
  MessageListModel model;
  MessageView view;
  QVERIFY(showView(view, model));
  model.setMessages({message(1, QStringLiteral("assistant"), kReply)});
  QTest::qWait(20);
  const QModelIndex index = model.index(0);
  const QList<QRect> buttons = view.messageDelegate()->copyButtonRects(view.visualRect(index), index);
  QCOMPARE(buttons.size(), 2);
  QVERIFY(!buttons[0].isEmpty() && !buttons[1].isEmpty());
  QVERIFY(buttons[0].bottom() < buttons[1].top());
  QCOMPARE(view.messageDelegate()->anchorAt(view.visualRect(index), index, buttons[1].center()), copyHref(1));

  QSignalSpy copied(&view, &MessageView::codeCopied);
  QTest::mouseClick(view.viewport(), Qt::LeftButton, {}, buttons[0].center());
  QCOMPARE(copied.size(), 1);
  QCOMPARE(copied.first().first().toString(), renderMarkdown(kReply).codeBlocks[0]);
  QCOMPARE(QApplication::clipboard()->text(), renderMarkdown(kReply).codeBlocks[0]);
}

void TestMarkdownView::rawTextModeShowsTheMarkdown() {
  MessageListModel model;
  MessageView view;
  QVERIFY(showView(view, model));
  model.setMessages({message(1, QStringLiteral("assistant"), kReply)});
  const QModelIndex index = model.index(0);
  QVERIFY(view.messageDelegate()->documentFor(index) != nullptr);
  const int renderedHeight = view.messageDelegate()->sizeHint({}, index).height();
  view.setShowsRawText(true);
  QVERIFY(view.messageDelegate()->showsRawText());
  QCOMPARE(view.messageDelegate()->documentFor(index), nullptr);
  QVERIFY(view.messageDelegate()->copyButtonRects(view.visualRect(index), index).isEmpty());
  QVERIFY(view.messageDelegate()->sizeHint({}, index).height() != renderedHeight);
  view.setShowsRawText(false);
  QVERIFY(view.messageDelegate()->documentFor(index) != nullptr);
}

void TestMarkdownView::reasoningIsShownApartFromTheAnswer() {
  // A gpt-oss reply as the engine streams it for a harmony chat (control tokens rendered): the
  // analysis channel is the reasoning, the final channel the answer; no marker is ever shown,
  // and the next prompt carries the answer alone.
  const QString reply = QStringLiteral(
      "<|channel|>analysis<|message|>The user wants a sum. Use sum().<|end|>"
      "<|start|>assistant<|channel|>final<|message|>Use **`sum(numbers)`**.<|return|>");
  MessageListModel model;
  MessageView view;
  QVERIFY(showView(view, model));
  model.append(message(1, QStringLiteral("user"), QStringLiteral("How do I sum a list?")));
  model.append(message(2, QStringLiteral("assistant"), QString()), /*isStreaming=*/true);
  const QModelIndex index = model.index(1);
  bool wasThinking = false;
  for (qsizetype at = 0; at < reply.size(); at += 5) {
    model.appendText(1, reply.mid(at, 5));
    wasThinking = wasThinking || index.data(MessageListModel::IsReasoningRole).toBool();
    QVERIFY(!index.data(MessageListModel::AnswerRole).toString().contains(QLatin1String("<|")));
    QVERIFY(!index.data(MessageListModel::ReasoningRole).toString().contains(QLatin1String("<|")));
  }
  QVERIFY(wasThinking);
  GenerationStats stats;
  model.finish(1, reply, stats, true);
  QCOMPARE(index.data(MessageListModel::ReasoningRole).toString(), QStringLiteral("The user wants a sum. Use sum()."));
  QCOMPARE(index.data(MessageListModel::AnswerRole).toString(), QStringLiteral("Use **`sum(numbers)`**."));
  QCOMPARE(index.data(Qt::DisplayRole).toString(), reply);  // stored as generated
  const QList<ChatTurn> turns = model.turns();
  QCOMPARE(turns.size(), 2);
  QCOMPARE(turns[1].content, QStringLiteral("Use **`sum(numbers)`**."));

  QTest::qWait(view.streamRepaintIntervalMs() + 10);
  const QTextDocument* doc = view.messageDelegate()->documentFor(index);
  QVERIFY(doc != nullptr);
  const QString shown = doc->toPlainText();
  QVERIFY2(shown.contains(QLatin1String("Reasoning")) && shown.contains(QLatin1String("Use sum().")),
           qPrintable(shown));
  QVERIFY(shown.indexOf(QLatin1String("Use sum().")) < shown.indexOf(QLatin1String("sum(numbers)")));
  QVERIFY2(!shown.contains(QLatin1String("<|")) && !shown.contains(QLatin1String("analysis")) &&
               !shown.contains(QLatin1String("**")),
           qPrintable(shown));
  if (const QByteArray dir = qgetenv("IWB_SCREENSHOT_DIR"); !dir.isEmpty()) {
    const QRect shownRows(0, 0, view.width(), view.visualRect(index).bottom() + 12);
    view.grab(shownRows).save(QString::fromLocal8Bit(dir) + QStringLiteral("/chat-reasoning.png"));
  }
  // The raw view shows the reply as generated, markers and all.
  view.setShowsRawText(true);
  QCOMPARE(view.messageDelegate()->documentFor(index), nullptr);
  view.setShowsRawText(false);
  // A reply without reasoning shows no reasoning box.
  model.setMessages({message(3, QStringLiteral("assistant"), QStringLiteral("Just an answer."))});
  QTest::qWait(20);
  QVERIFY(!view.messageDelegate()->documentFor(model.index(0))->toPlainText().contains(QLatin1String("Reasoning")));
}

void TestMarkdownView::streamBudgetSetsTheRepaintInterval() {
  // The view measures what laying out and painting a streaming reply costs, and shows it at
  // most as often as its budget allows: every 50 ms with time to spare, every 250 ms (the
  // longest) when the budget is tiny.
  MessageListModel model;
  MessageView view;
  QVERIFY(showView(view, model));
  model.append(message(1, QStringLiteral("user"), QStringLiteral("Count to twenty.")));
  model.append(message(2, QStringLiteral("assistant"), QString()), /*isStreaming=*/true);
  const QModelIndex reply = model.index(1);
  view.setStreamBudget(1.0);
  QCOMPARE(view.streamCostMs(), 0.0);
  model.appendText(1, QStringLiteral("One,"));
  QTRY_VERIFY(view.streamCostMs() > 0);
  QCOMPARE(view.streamRepaintIntervalMs(), MessageView::kStreamRepaintMs);
  const int heightOfOneLine = view.visualRect(reply).height();

  view.setStreamBudget(1e-4);
  QCOMPARE(view.streamRepaintIntervalMs(), MessageView::kMaxStreamRepaintMs);
  QSignalSpy shown(&view, &MessageView::streamingChangesShown);
  for (int n = 2; n <= 20; ++n) model.appendText(1, QStringLiteral("\n\n%1,").arg(n));
  QTest::qWait(MessageView::kMaxStreamRepaintMs / 2);
  QCOMPARE(shown.count(), 0);
  QTRY_COMPARE_WITH_TIMEOUT(shown.count(), 1, 2 * MessageView::kMaxStreamRepaintMs);
  QVERIFY(view.visualRect(reply).height() > heightOfOneLine);
}

QTEST_MAIN(TestMarkdownView)
#include "test_markdown_view.moc"
