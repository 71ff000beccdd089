// MessageBar: coloured strip with an icon, a bold title, selectable detail text and a close button.
#include "widgets/message_bar.h"

#include <QApplication>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QStyle>
#include <QToolButton>
#include <QVBoxLayout>

namespace iwb::ui {

MessageBar::MessageBar(QWidget* parent)
    : QFrame(parent),
      m_iconLabel(new QLabel(this)),
      m_titleLabel(new QLabel(this)),
      m_detailLabel(new QLabel(this)),
      m_actionButton(new QPushButton(this)),
      m_closeButton(new QToolButton(this)) {
  setObjectName(QStringLiteral("messageBar"));
  setFrameShape(QFrame::StyledPanel);
  setAutoFillBackground(true);

  QFont bold = m_titleLabel->font();
  bold.setBold(true);
  m_titleLabel->setFont(bold);
  m_titleLabel->setTextFormat(Qt::PlainText);
  m_titleLabel->setWordWrap(true);
  // Error texts quote file names and byte offsets; people copy them into bug reports.
  m_detailLabel->setTextFormat(Qt::PlainText);
  m_detailLabel->setWordWrap(true);
  m_detailLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);

  m_closeButton->setAutoRaise(true);
  m_closeButton->setIcon(style()->standardIcon(QStyle::SP_TitleBarCloseButton));
  m_closeButton->setToolTip(tr("Dismiss"));
  connect(m_closeButton, &QToolButton::clicked, this, &MessageBar::dismiss);
  m_actionButton->setObjectName(QStringLiteral("messageBarAction"));
  m_actionButton->hide();
  connect(m_actionButton, &QPushButton::clicked, this, &MessageBar::triggerAction);

  auto* texts = new QVBoxLayout;
  texts->setSpacing(2);
  texts->addWidget(m_titleLabel);
  texts->addWidget(m_detailLabel);

  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(10, 6, 6, 6);
  layout->addWidget(m_iconLabel, 0, Qt::AlignTop);
  layout->addLayout(texts, 1);
  layout->addWidget(m_actionButton, 0, Qt::AlignTop);
  layout->addWidget(m_closeButton, 0, Qt::AlignTop);

  hide();
}

void MessageBar::showMessage(Kind kind, const QString& title, const QString& detail) {
  m_kind = kind;
  m_titleLabel->setText(title);
  m_detailLabel->setText(detail);
  m_detailLabel->setVisible(!detail.isEmpty());
  m_actionButton->setText(QString());
  m_actionButton->hide();
  applyKindStyle();
  show();
}

void MessageBar::setAction(const QString& text) {
  m_actionButton->setText(text);
  m_actionButton->setVisible(!text.isEmpty());
}

QString MessageBar::actionText() const { return m_actionButton->isHidden() ? QString() : m_actionButton->text(); }

void MessageBar::triggerAction() {
  if (m_actionButton->isHidden()) return;
  dismiss();
  emit actionTriggered();
}

QString MessageBar::title() const { return m_titleLabel->text(); }
QString MessageBar::detail() const { return m_detailLabel->text(); }

void MessageBar::dismiss() {
  if (isHidden()) return;
  hide();
  emit dismissed();
}

void MessageBar::applyKindStyle() {
  const bool isError = m_kind == Kind::Error;
  const int iconSize = style()->pixelMetric(QStyle::PM_SmallIconSize);
  m_iconLabel->setPixmap(
      style()
          ->standardIcon(isError ? QStyle::SP_MessageBoxCritical : QStyle::SP_MessageBoxInformation)
          .pixmap(iconSize, iconSize));
  // Soft tints that read on light and dark palettes alike; text keeps the palette's colour.
  // Start from the application palette each time, or tints would compound.
  QPalette p = QApplication::palette(this);
  const QColor base = p.color(QPalette::Window);
  const QColor tint = isError ? QColor(220, 60, 50) : QColor(60, 130, 220);
  const auto mix = [&](int c0, int c1) { return (c0 * 4 + c1) / 5; };
  p.setColor(QPalette::Window, QColor(mix(base.red(), tint.red()), mix(base.green(), tint.green()),
                                      mix(base.blue(), tint.blue())));
  setPalette(p);
}

}  // namespace iwb::ui
