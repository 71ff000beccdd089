// MessageDelegate: bubble geometry, text layouts cached per message revision (a reply rendered
// from Markdown into a QTextDocument, or raw text in a QTextLayout with code, draft and
// confidence formats), painting, and hit tests (links, Copy buttons, tokens).
#include "chat/message_view.h"

#include "chat/markdown_render.h"
#include "chat/message_list_model.h"

#include <QAbstractTextDocumentLayout>
#include <QFontDatabase>
#include <QLocale>
#include <QPainter>
#include <QPainterPath>
#include <QTextBlock>
#include <QTextDocument>
#include <QTextLayout>

#include <algorithm>
#include <cmath>

namespace iwb::ui {
namespace {

constexpr int kRowSpacing = 6;   // above and below each message
constexpr int kSideMargin = 14;  // between the bubbles and the view's edges
constexpr int kPadding = 10;     // inside a bubble
constexpr int kHeaderGap = 2;    // between the header and the bubble
constexpr int kStatsGap = 3;     // between the bubble and the stats line
constexpr double kMaxWidthFraction = 0.82;

QFont smallFont(const QFont& base) {
  QFont f = base;
  f.setPointSizeF(base.pointSizeF() > 0 ? base.pointSizeF() * 0.85 : 8.5);
  return f;
}

QColor mix(const QColor& a, const QColor& b, double t) {
  return QColor::fromRgbF(float(a.redF() * (1 - t) + b.redF() * t), float(a.greenF() * (1 - t) + b.greenF() * t),
                          float(a.blueF() * (1 - t) + b.blueF() * t));
}

bool isUser(const QModelIndex& index) {
  return index.data(MessageListModel::RoleRole).toString() == QLatin1String("user");
}

QString headerText(const QModelIndex& index) {
  return isUser(index) ? MessageDelegate::tr("You") : MessageDelegate::tr("Assistant");
}

// What the bubble shows: the text, or an ellipsis while the first token is awaited.
QString bubbleText(const QModelIndex& index) {
  QString text = index.data(Qt::DisplayRole).toString();
  if (text.isEmpty() && index.data(MessageListModel::IsStreamingRole).toBool()) text = QStringLiteral("…");
  // QTextLayout breaks lines only at U+2028; a reply's own newlines must become that.
  text.replace(QLatin1Char('\n'), QChar::LineSeparator);
  return text;
}

// Monospace ranges for code in a reply: lines inside ``` fences (the fence lines too, and an
// unclosed fence while streaming), and `inline` spans on other lines. Markdown is otherwise
// shown as written.
QList<QTextLayout::FormatRange> codeFormats(const QString& text, const QFont& base) {
  QFont mono = QFontDatabase::systemFont(QFontDatabase::FixedFont);
  mono.setPointSizeF(base.pointSizeF() > 0 ? base.pointSizeF() * 0.95 : mono.pointSizeF());
  QTextCharFormat format;
  format.setFont(mono);
  QList<QTextLayout::FormatRange> ranges;
  bool isInFence = false;
  qsizetype lineStart = 0;
  while (lineStart <= text.size()) {
    qsizetype lineEnd = text.indexOf(QLatin1Char('\n'), lineStart);
    if (lineEnd < 0) lineEnd = text.size();
    const QStringView line = QStringView(text).mid(lineStart, lineEnd - lineStart);
    const bool isFence = line.trimmed().startsWith(QLatin1String("```"));
    if (isFence || isInFence) {
      ranges.push_back({int(lineStart), int(lineEnd - lineStart), format});
      if (isFence) isInFence = !isInFence;
    } else {
      for (qsizetype open = line.indexOf(QLatin1Char('`')); open >= 0;) {
        const qsizetype close = line.indexOf(QLatin1Char('`'), open + 1);
        if (close < 0) break;
        ranges.push_back({int(lineStart + open), int(close - open + 1), format});
        open = line.indexOf(QLatin1Char('`'), close + 1);
      }
    }
    lineStart = lineEnd + 1;
  }
  return ranges;
}

MarkdownColors markdownColors(const QPalette& palette) {
  const QColor base = palette.color(QPalette::Base), text = palette.color(QPalette::Text);
  // The code box lighter than the reply's bubble (which is base mixed with 5% of the text).
  return {base, mix(base, text, 0.25), mix(base, text, 0.12), mix(text, base, 0.4)};
}

// Where the Copy links of a laid-out document are, in its coordinates.
QList<QRectF> copyLinkRects(const QTextDocument& doc) {
  QList<QRectF> rects;
  QAbstractTextDocumentLayout* layout = doc.documentLayout();
  for (QTextBlock block = doc.begin(); block.isValid(); block = block.next()) {
    for (auto it = block.begin(); !it.atEnd(); ++it) {
      const QTextFragment fragment = it.fragment();
      const int n = copyIndexOfHref(fragment.charFormat().anchorHref());
      if (n < 0) continue;
      const int start = fragment.position() - block.position();
      const QTextLine line = block.layout()->lineForTextPosition(start);
      if (!line.isValid()) continue;
      const qreal x1 = line.cursorToX(start), x2 = line.cursorToX(start + fragment.length());
      const QPointF origin = layout->blockBoundingRect(block).topLeft();
      while (rects.size() <= n) rects.push_back({});
      rects[n] = QRectF(origin + QPointF(x1, line.y()), QSizeF(x2 - x1, line.height()));
    }
  }
  return rects;
}

// The model's reasoning above its answer: a dim, labelled box, shown as written (it is a
// working draft, not Markdown meant for the reader).
QString reasoningHtml(const QString& reasoning, bool isReasoning, const MarkdownColors& colors) {
  if (reasoning.isEmpty()) return {};
  const QString label = isReasoning ? MessageDelegate::tr("Reasoning…") : MessageDelegate::tr("Reasoning");
  QString body = reasoning.toHtmlEscaped();
  body.replace(QLatin1Char('\n'), QStringLiteral("<br/>"));
  return QStringLiteral(
             "<table width=\"100%\" border=\"1\" cellpadding=\"6\" cellspacing=\"0\" style=\"border-color: %1; "
             "border-style: solid; margin-bottom: 6px;\"><tr><td style=\"color: %2;\"><b>%3</b><br/><i>%4</i>"
             "</td></tr></table>")
      .arg(colors.codeBorder.name(), colors.dimText.name(), label, body);
}

}  // namespace

MessageDelegate::MessageDelegate(QAbstractItemView* view) : QStyledItemDelegate(view), m_view(view) {}

MessageDelegate::~MessageDelegate() = default;

int MessageDelegate::maxBubbleWidth() const {
  const int available = m_view->viewport()->width() - 2 * kSideMargin;
  return qMax(160, int(available * kMaxWidthFraction));
}

const MessageDelegate::Layout& MessageDelegate::layoutFor(const QModelIndex& index) const {
  const qint64 id = index.data(MessageListModel::MessageIdRole).toLongLong();
  const int revision = index.data(MessageListModel::RevisionRole).toInt();
  const int textWidth = maxBubbleWidth() - 2 * kPadding;
  Layout& cached = m_cache[index.row()];
  if ((cached.text || cached.document) && cached.messageId == id && cached.revision == revision && cached.textWidth == textWidth) {
    return cached;
  }

  // The answer and the model's reasoning, each without markers (MessageListModel::AnswerRole).
  const QString content = index.data(MessageListModel::AnswerRole).toString();
  const QString reasoning = index.data(MessageListModel::ReasoningRole).toString();
  const auto* messages = qobject_cast<const MessageListModel*>(index.model());
  const bool hasProbabilities = m_showsTokenProbabilities && messages &&
                                !messages->item(index.row()).tokenSpans.isEmpty();
  if (!m_showsRawText && !hasProbabilities && !isUser(index) && (!content.isEmpty() || !reasoning.isEmpty())) {
    // A reply as Markdown: cmark-gfm's HTML in a document of its own, rebuilt only when the
    // revision changes (the view throttles a streaming row to one revision per 50 ms).
    const MarkdownColors colors = markdownColors(m_view->palette());
    RenderedMarkdown rendered = renderMarkdown(content, colors);
    auto doc = std::make_shared<QTextDocument>();
    doc->setDefaultFont(m_view->font());
    doc->setDocumentMargin(0);
    doc->setUndoRedoEnabled(false);
    const QString mono = QFontDatabase::systemFont(QFontDatabase::FixedFont).family();
    doc->setDefaultStyleSheet(QStringLiteral("p { margin-top: 0px; margin-bottom: 6px; }"
                                             "pre, code { font-family: '%1'; }"
                                             "code { background-color: %2; }"
                                             "h1, h2, h3, h4 { margin-top: 6px; margin-bottom: 4px; }"
                                             "ul, ol { margin-top: 0px; margin-bottom: 6px; }")
                                  .arg(mono, colors.codeHeader.name()));
    doc->setHtml(reasoningHtml(reasoning, index.data(MessageListModel::IsReasoningRole).toBool(), colors) +
                 rendered.html);
    doc->setTextWidth(textWidth);
    const qreal width = qMin<qreal>(textWidth, std::ceil(doc->idealWidth()));
    // The last block's bottom margin is the bubble's padding's job.
    const qreal height = doc->size().height();
    Layout fresh;
    fresh.messageId = id;
    fresh.revision = revision;
    fresh.textWidth = textWidth;
    fresh.isRaw = false;
    fresh.copyRects = copyLinkRects(*doc);
    fresh.document = std::move(doc);
    fresh.codeBlocks = std::move(rendered.codeBlocks);
    fresh.size = QSizeF(width, height);
    cached = std::move(fresh);
    return cached;
  }

  auto layout = std::make_shared<QTextLayout>(bubbleText(index), m_view->font());
  // Formats index the text before bubbleText's newline replacement, which keeps lengths.
  QList<QTextLayout::FormatRange> formats = codeFormats(index.data(Qt::DisplayRole).toString(), m_view->font());
  // Speculative decoding: accepted draft tokens on a light green ground.
  QTextCharFormat draft;
  draft.setBackground(QColor(0xc8, 0xec, 0xc8));
  for (const QPoint& r : index.data(MessageListModel::DraftRangesRole).value<QList<QPoint>>()) {
    formats.push_back({r.x(), r.y(), draft});
  }
  if (hasProbabilities) {
    // Confidence colours replace the draft ground (both are backgrounds).
    formats.erase(std::remove_if(formats.begin(), formats.end(),
                                 [](const QTextLayout::FormatRange& r) { return r.format.hasProperty(QTextFormat::BackgroundBrush); }),
                  formats.end());
    for (const MessageListModel::TokenSpan& span : messages->item(index.row()).tokenSpans) {
      QTextCharFormat confidence;
      confidence.setBackground(confidenceColor(span.probability.probability));
      formats.push_back({span.start, span.length, confidence});
    }
  }
  layout->setFormats(formats);
  QTextOption option;
  option.setWrapMode(QTextOption::WrapAtWordBoundaryOrAnywhere);
  layout->setTextOption(option);
  layout->setCacheEnabled(true);
  qreal height = 0;
  qreal widest = 0;
  layout->beginLayout();
  for (QTextLine line = layout->createLine(); line.isValid(); line = layout->createLine()) {
    line.setLineWidth(textWidth);
    line.setPosition(QPointF(0, height));
    height += line.height();
    widest = qMax(widest, line.naturalTextWidth());
  }
  layout->endLayout();
  cached = Layout{};
  cached.messageId = id;
  cached.revision = revision;
  cached.textWidth = textWidth;
  cached.text = std::move(layout);
  cached.size = QSizeF(widest, height);
  return cached;
}

MessageDelegate::Geometry MessageDelegate::geometryFor(const QRect& itemRect, const QModelIndex& index) const {
  const Layout& layout = layoutFor(index);
  const QFontMetrics small(smallFont(m_view->font()));
  const int bubbleWidth = qMin(maxBubbleWidth(), int(std::ceil(layout.size.width())) + 2 * kPadding);
  const int bubbleHeight = int(std::ceil(layout.size.height())) + 2 * kPadding;
  const bool user = isUser(index);
  const int left = user ? itemRect.right() - kSideMargin - bubbleWidth + 1 : itemRect.left() + kSideMargin;

  Geometry g;
  g.header = QRect(left, itemRect.top() + kRowSpacing, bubbleWidth, small.height());
  g.bubble = QRect(left, g.header.bottom() + 1 + kHeaderGap, bubbleWidth, bubbleHeight);
  g.textOrigin = QPointF(g.bubble.left() + kPadding, g.bubble.top() + kPadding);
  const QString stats = index.data(MessageListModel::StatsLineRole).toString();
  if (!stats.isEmpty()) {
    g.stats = QRect(itemRect.left() + kSideMargin, g.bubble.bottom() + 1 + kStatsGap,
                    itemRect.width() - 2 * kSideMargin, small.height());
  }
  return g;
}

QRect MessageDelegate::bubbleRect(const QRect& itemRect, const QModelIndex& index) const {
  return geometryFor(itemRect, index).bubble;
}

void MessageDelegate::setShowsRawText(bool isRaw) {
  if (m_showsRawText == isRaw) return;
  m_showsRawText = isRaw;
  m_cache.clear();
}

const QTextDocument* MessageDelegate::documentFor(const QModelIndex& index) const {
  return layoutFor(index).document.get();
}

QStringList MessageDelegate::codeBlocksFor(const QModelIndex& index) const { return layoutFor(index).codeBlocks; }

QList<QRect> MessageDelegate::copyButtonRects(const QRect& itemRect, const QModelIndex& index) const {
  const Geometry g = geometryFor(itemRect, index);
  QList<QRect> rects;
  for (const QRectF& r : layoutFor(index).copyRects) rects.push_back(r.translated(g.textOrigin).toAlignedRect());
  return rects;
}

void MessageDelegate::setShowsTokenProbabilities(bool isShown) {
  if (m_showsTokenProbabilities == isShown) return;
  m_showsTokenProbabilities = isShown;
  m_cache.clear();
}

QColor MessageDelegate::confidenceColor(double p) {
  // Red at 0, through amber, to green at 1, light enough to read the text on.
  return QColor::fromHsvF(float(std::clamp(p, 0.0, 1.0) / 3.0), 0.32f, 1.0f);
}

QString MessageDelegate::tokenToolTip(const QString& tokenText, const TokenProbability& probability) {
  const QLocale locale;
  const auto percent = [&locale](double p) { return locale.toString(100 * p, 'f', p < 0.001 ? 3 : 1) + QLatin1Char('%'); };
  const auto shown = [](const QString& text) {
    QString t = text;
    t.replace(QLatin1Char('\n'), QStringLiteral("\\n"));
    return QStringLiteral("“%1”").arg(t.toHtmlEscaped().replace(QLatin1Char(' '), QStringLiteral("&nbsp;")));
  };
  QString html = QStringLiteral("<b>%1</b> %2").arg(shown(tokenText), percent(probability.probability));
  if (!probability.alternatives.isEmpty()) {
    html += QStringLiteral("<br>") + tr("The model's most likely tokens here:");
    html += QStringLiteral("<table cellspacing=\"0\" cellpadding=\"1\">");
    for (const TokenAlternative& a : probability.alternatives) {
      html += QStringLiteral("<tr><td>%1</td><td align=\"right\">&nbsp;&nbsp;%2</td></tr>").arg(shown(a.text), percent(a.probability));
    }
    html += QStringLiteral("</table>");
  }
  return html;
}

int MessageDelegate::tokenAt(const QRect& itemRect, const QModelIndex& index, const QPoint& pos) const {
  const auto* messages = qobject_cast<const MessageListModel*>(index.model());
  const Layout& layout = layoutFor(index);
  if (!messages || !layout.text || !m_showsTokenProbabilities) return -1;
  const Geometry g = geometryFor(itemRect, index);
  const QPointF local = QPointF(pos) - g.textOrigin;
  for (int i = 0; i < layout.text->lineCount(); ++i) {
    const QTextLine line = layout.text->lineAt(i);
    if (local.y() < line.y() || local.y() >= line.y() + line.height()) continue;
    if (local.x() < 0 || local.x() > line.naturalTextWidth()) return -1;
    const int cursor = line.xToCursor(local.x(), QTextLine::CursorOnCharacter);
    const QList<MessageListModel::TokenSpan>& spans = messages->item(index.row()).tokenSpans;
    for (int s = 0; s < spans.size(); ++s) {
      if (cursor >= spans[s].start && cursor < spans[s].start + spans[s].length) return s;
    }
    return -1;
  }
  return -1;
}

QString MessageDelegate::anchorAt(const QRect& itemRect, const QModelIndex& index, const QPoint& pos) const {
  const Layout& layout = layoutFor(index);
  if (!layout.document) return {};
  const Geometry g = geometryFor(itemRect, index);
  const QPointF local = QPointF(pos) - g.textOrigin;
  // The drawn button is a little wider than the link's text.
  for (int n = 0; n < layout.copyRects.size(); ++n) {
    if (layout.copyRects[n].adjusted(-5, 0, 5, 0).contains(local)) return copyHref(n);
  }
  return layout.document->documentLayout()->anchorAt(local);
}

QSize MessageDelegate::sizeHint(const QStyleOptionViewItem&, const QModelIndex& index) const {
  const QRect item(0, 0, m_view->viewport()->width(), 0);
  const Geometry g = geometryFor(item, index);
  const int bottom = g.stats.isNull() ? g.bubble.bottom() : g.stats.bottom();
  return {item.width(), bottom + 1 + kRowSpacing};
}

void MessageDelegate::paint(QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const {
  const Geometry g = geometryFor(option.rect, index);
  const QPalette& palette = option.palette;
  const bool user = isUser(index);
  const bool isError =
      index.data(MessageListModel::IsErrorRole).toBool() || !index.data(MessageListModel::IsCompleteRole).toBool();
  const bool isStreaming = index.data(MessageListModel::IsStreamingRole).toBool();

  painter->save();
  painter->setRenderHint(QPainter::Antialiasing);
  const QColor base = palette.color(QPalette::Base);
  const QColor fill =
      user ? mix(base, palette.color(QPalette::Highlight), 0.16) : mix(base, palette.color(QPalette::WindowText), 0.05);
  QColor border =
      user ? mix(base, palette.color(QPalette::Highlight), 0.45) : mix(base, palette.color(QPalette::WindowText), 0.18);
  if (isError && !isStreaming) border = QColor(0xc0, 0x39, 0x2b);
  painter->setPen(QPen(border, 1));
  painter->setBrush(fill);
  painter->drawRoundedRect(QRectF(g.bubble).adjusted(0.5, 0.5, -0.5, -0.5), 8, 8);

  const QFont small = smallFont(option.font);
  const QColor dim = mix(palette.color(QPalette::Text), base, 0.45);
  painter->setFont(small);
  painter->setPen(dim);
  painter->drawText(g.header, (user ? Qt::AlignRight : Qt::AlignLeft) | Qt::AlignVCenter, headerText(index));

  painter->setPen(palette.color(QPalette::Text));
  const Layout& layout = layoutFor(index);
  if (layout.document) {
    painter->save();
    painter->translate(g.textOrigin);
    QAbstractTextDocumentLayout::PaintContext context;
    context.palette = palette;
    context.clip = QRectF(QPointF(0, 0), layout.size);
    layout.document->documentLayout()->draw(painter, context);
    // The Copy links drawn as small buttons.
    painter->setPen(QPen(mix(base, palette.color(QPalette::WindowText), 0.35), 1));
    painter->setBrush(Qt::NoBrush);
    for (const QRectF& r : layout.copyRects) {
      if (!r.isNull()) painter->drawRoundedRect(r.adjusted(-5, 0, 5, 0), 4, 4);
    }
    painter->restore();
  } else {
    layout.text->draw(painter, g.textOrigin);
  }

  if (!g.stats.isNull()) {
    painter->setFont(small);
    painter->setPen(isError && !isStreaming ? border : dim);
    const QString stats = QFontMetrics(small).elidedText(index.data(MessageListModel::StatsLineRole).toString(),
                                                         Qt::ElideRight, g.stats.width());
    painter->drawText(g.stats, Qt::AlignLeft | Qt::AlignVCenter, stats);
  }
  painter->restore();
}

}  // namespace iwb::ui
