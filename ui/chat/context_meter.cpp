// ContextMeter: a thin bar and a line of text, coloured by how close the context is to full.
#include "chat/context_meter.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QProgressBar>

namespace iwb::ui {

ContextMeter::ContextMeter(QWidget* parent) : QWidget(parent), m_bar(new QProgressBar), m_label(new QLabel) {
  setObjectName(QStringLiteral("contextMeter"));
  m_bar->setTextVisible(false);
  m_bar->setFixedHeight(6);
  m_bar->setMaximumWidth(160);
  m_label->setForegroundRole(QPalette::PlaceholderText);
  QFont small = font();
  small.setPointSizeF(small.pointSizeF() > 0 ? small.pointSizeF() * 0.9 : 8.5);
  m_label->setFont(small);
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(m_bar);
  layout->addWidget(m_label, 1);
  clear();
}

int fitReserveTokens(int maxReplyTokens, int contextLength) {
  // Room for a useful reply, but never more than a quarter of the context.
  return qMax(ContextMeter::kMinReplyTokens, qMin(maxReplyTokens, contextLength / 4));
}

ContextMeter::State ContextMeter::stateFor(int numTokens, int contextLength, int numReplyTokens) {
  if (numTokens < 0 || contextLength <= 0) return State::Unknown;
  if (numTokens + kMinReplyTokens > contextLength) return State::Overflows;
  if (numTokens + numReplyTokens > contextLength) return State::Tight;
  return State::Fits;
}

void ContextMeter::setUsage(int numTokens, int contextLength, int numReplyTokens, int numTurnsLeftOut) {
  m_state = stateFor(numTokens, contextLength, numReplyTokens);
  if (m_state == State::Unknown) {
    clear();
    return;
  }
  m_numTokens = numTokens;
  m_contextLength = contextLength;
  const QLocale locale;
  QString text = tr("%1 / %2 tokens").arg(locale.toString(numTokens), locale.toString(contextLength));
  if (numTurnsLeftOut > 0) text += tr(" · the %n oldest message(s) left out to fit", nullptr, numTurnsLeftOut);
  QColor colour;
  switch (m_state) {
    case State::Overflows:
      text += tr(" · too long for the context: sending will ask what to leave out");
      colour = QColor(0xc0, 0x39, 0x2b);
      break;
    case State::Tight:
      text += tr(" · a reply may be cut off after %1 tokens").arg(locale.toString(contextLength - numTokens));
      colour = QColor(0xc2, 0x7c, 0x0e);
      break;
    default: break;
  }
  m_label->setText(text);
  m_label->setToolTip(
      tr("The conversation, rendered with the model's chat template and counted by its tokenizer, "
         "including the message being typed."));
  QPalette palette = this->palette();
  if (colour.isValid()) {
    palette.setColor(QPalette::PlaceholderText, colour);
    palette.setColor(QPalette::WindowText, colour);
    palette.setColor(QPalette::Highlight, colour);
  }
  m_label->setPalette(palette);
  m_bar->setPalette(palette);
  m_bar->setRange(0, contextLength);
  m_bar->setValue(qMin(numTokens, contextLength));
  m_bar->show();
}

void ContextMeter::clear() {
  m_state = State::Unknown;
  m_numTokens = -1;
  m_contextLength = 0;
  m_label->setText(QString());
  m_label->setPalette(palette());
  m_bar->hide();
}

QString ContextMeter::text() const { return m_label->text(); }

}  // namespace iwb::ui
