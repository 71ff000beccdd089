// renderMarkdown: cmark-gfm's tree, code blocks and raw HTML replaced, then its HTML renderer.
#include "chat/markdown_render.h"

#include <cmark-gfm-core-extensions.h>
#include <cmark-gfm.h>

#include <cstdlib>
#include <mutex>
#include <vector>

namespace iwb::ui {
namespace {

constexpr char kCopyScheme[] = "iwb-copy:";

void ensureExtensionsRegistered() {
  static std::once_flag once;
  std::call_once(once, [] { cmark_gfm_core_extensions_ensure_registered(); });
}

QString codeBlockHtml(int n, const QString& language, const QString& code, const MarkdownColors& c) {
  const QString header = language.isEmpty() ? QStringLiteral("code") : language.toHtmlEscaped();
  return QStringLiteral(
             // No borders: Qt's collapsed table borders paint over the underscores of the lines
             // above them (Qt 6.4); the box is its two backgrounds.
             "<table width=\"100%\" border=\"0\" cellspacing=\"0\" cellpadding=\"6\" "
             "style=\"margin-top: 4px; margin-bottom: 4px;\">"
             "<tr><td style=\"background-color: %1; color: %2;\">"
             "<span style=\"font-size: small;\">%3</span></td>"
             "<td align=\"right\" style=\"background-color: %1;\">"
             "<a href=\"%4\" style=\"font-size: small;\">Copy</a></td></tr>"
             "<tr><td colspan=\"2\" style=\"background-color: %5;\">"
             "<pre style=\"margin: 0;\">%6</pre></td></tr></table>\n")
      .arg(c.codeHeader.name(), c.dimText.name(), header, copyHref(n), c.codeBackground.name(), code.toHtmlEscaped());
}

struct Parser {
  cmark_parser* parser = nullptr;
  cmark_node* document = nullptr;
  ~Parser() {
    if (document) cmark_node_free(document);
    if (parser) cmark_parser_free(parser);
  }
};

}  // namespace

QString copyHref(int n) { return QLatin1String(kCopyScheme) + QString::number(n); }

int copyIndexOfHref(const QString& href) {
  if (!href.startsWith(QLatin1String(kCopyScheme))) return -1;
  bool ok = false;
  const int n = href.mid(int(sizeof(kCopyScheme)) - 1).toInt(&ok);
  return ok ? n : -1;
}

RenderedMarkdown renderMarkdown(const QString& markdown, const MarkdownColors& colors) {
  ensureExtensionsRegistered();
  Parser p;
  p.parser = cmark_parser_new(CMARK_OPT_DEFAULT);
  for (const char* name : {"table", "strikethrough", "autolink"}) {
    if (cmark_syntax_extension* ext = cmark_find_syntax_extension(name))
      cmark_parser_attach_syntax_extension(p.parser, ext);
  }
  const QByteArray utf8 = markdown.toUtf8();
  cmark_parser_feed(p.parser, utf8.constData(), size_t(utf8.size()));
  p.document = cmark_parser_finish(p.parser);

  // Collect first: the tree must not change under the iterator.
  std::vector<cmark_node*> codeBlocks, rawHtml;
  cmark_iter* iter = cmark_iter_new(p.document);
  for (cmark_event_type ev = cmark_iter_next(iter); ev != CMARK_EVENT_DONE; ev = cmark_iter_next(iter)) {
    if (ev != CMARK_EVENT_ENTER) continue;
    cmark_node* node = cmark_iter_get_node(iter);
    const cmark_node_type type = cmark_node_get_type(node);
    if (type == CMARK_NODE_CODE_BLOCK) codeBlocks.push_back(node);
    if (type == CMARK_NODE_HTML_BLOCK || type == CMARK_NODE_HTML_INLINE) rawHtml.push_back(node);
  }
  cmark_iter_free(iter);

  // A reply's own HTML is text to show (the renderer runs unsafe for our code boxes).
  for (cmark_node* node : rawHtml) {
    const char* literal = cmark_node_get_literal(node);
    cmark_node* text = cmark_node_new(CMARK_NODE_TEXT);
    cmark_node_set_literal(text, literal ? literal : "");
    if (cmark_node_get_type(node) == CMARK_NODE_HTML_BLOCK) {
      cmark_node* paragraph = cmark_node_new(CMARK_NODE_PARAGRAPH);
      cmark_node_append_child(paragraph, text);
      cmark_node_replace(node, paragraph);
    } else {
      cmark_node_replace(node, text);
    }
    cmark_node_free(node);
  }

  RenderedMarkdown out;
  for (cmark_node* node : codeBlocks) {
    const char* info = cmark_node_get_fence_info(node);
    QString language = QString::fromUtf8(info ? info : "").trimmed();
    language = language.section(QLatin1Char(' '), 0, 0);
    const char* literal = cmark_node_get_literal(node);
    QString code = QString::fromUtf8(literal ? literal : "");
    if (code.endsWith(QLatin1Char('\n'))) code.chop(1);
    const int n = int(out.codeBlocks.size());
    out.codeBlocks.push_back(code);
    out.codeLanguages.push_back(language);
    cmark_node* box = cmark_node_new(CMARK_NODE_HTML_BLOCK);
    cmark_node_set_literal(box, codeBlockHtml(n, language, code, colors).toUtf8().constData());
    cmark_node_replace(node, box);
    cmark_node_free(node);
  }

  char* html = cmark_render_html(p.document, CMARK_OPT_UNSAFE, cmark_parser_get_syntax_extensions(p.parser));
  out.html = QString::fromUtf8(html);
  std::free(html);
  // GFM tables as a grid (QTextDocument draws no cell borders without the attribute).
  out.html.replace(QLatin1String("<table>"), QStringLiteral("<table border=\"1\" cellspacing=\"0\" cellpadding=\"4\" "
                                                            "style=\"border-color: %1; border-style: solid;\">")
                                                 .arg(colors.codeBorder.name()));
  return out;
}

}  // namespace iwb::ui
