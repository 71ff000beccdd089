// Markdown of a reply to the HTML subset QTextDocument shows, through cmark-gfm (tables,
// strikethrough, autolinks). Fenced code blocks become a boxed table with their language and a
// "Copy" link (href "iwb-copy:N"); raw HTML in a reply is shown as text, never interpreted.
#pragma once

#include <QColor>
#include <QString>
#include <QStringList>

namespace iwb::ui {

struct MarkdownColors {
  QColor codeBackground{0xf3, 0xf4, 0xf6};
  QColor codeBorder{0xc8, 0xcc, 0xd2};
  QColor codeHeader{0xe4, 0xe7, 0xeb};
  QColor dimText{0x5f, 0x63, 0x68};
};

struct RenderedMarkdown {
  QString html;
  QStringList codeBlocks;     // the text of each code block, in order (what Copy puts on the clipboard)
  QStringList codeLanguages;  // its info string's first word ("python"), empty when none
};

// The href of the Copy link of code block `n`, and the inverse (-1 for other hrefs).
QString copyHref(int n);
int copyIndexOfHref(const QString& href);

// Renders `markdown` (possibly a reply still streaming: an unclosed fence is a code block to
// the end). Pure function of its arguments, so a reply rendered at the end of streaming equals
// the same text rendered at once.
RenderedMarkdown renderMarkdown(const QString& markdown, const MarkdownColors& colors = {});

}  // namespace iwb::ui
