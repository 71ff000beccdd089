// WelcomePage: the empty state of the main window's central area.
#include "widgets/welcome_page.h"

#include <QApplication>
#include <QDir>
#include <QFileInfo>
#include <QFrame>
#include <QIcon>
#include <QLabel>
#include <QPushButton>
#include <QStyle>
#include <QVBoxLayout>

namespace iwb::ui {

WelcomePage::WelcomePage(QWidget* parent)
    : QWidget(parent),
      m_openButton(new QPushButton(tr("Open Model…"), this)),
      m_recentTitle(new QLabel(tr("Recent models"), this)),
      m_recentLinks(new QLabel(this)) {
  setObjectName(QStringLiteral("welcomePage"));

  // The whole card is the visual drop target: a dashed outline says "drop here".
  auto* card = new QFrame(this);
  card->setObjectName(QStringLiteral("dropZone"));
  card->setStyleSheet(QStringLiteral(
      "QFrame#dropZone { border: 2px dashed palette(mid); border-radius: 14px; }"));
  // A fixed width keeps the wrapped blurb's height known when the card is laid out.
  card->setFixedWidth(540);

  auto* icon = new QLabel(card);
  icon->setAlignment(Qt::AlignCenter);
  icon->setMinimumHeight(72);
  const QIcon appIcon = QApplication::windowIcon();
  if (!appIcon.isNull()) icon->setPixmap(appIcon.pixmap(72, 72));

  auto* title = new QLabel(QApplication::applicationDisplayName(), card);
  QFont titleFont = title->font();
  titleFont.setPointSizeF(titleFont.pointSizeF() * 1.8);
  titleFont.setBold(true);
  title->setFont(titleFont);
  title->setAlignment(Qt::AlignCenter);

  auto* blurb = new QLabel(
      tr("Open a GGUF model to see its architecture, parameter count, tokenizer, "
         "tensors and metadata."),
      card);
  blurb->setWordWrap(true);
  blurb->setAlignment(Qt::AlignCenter);

  m_openButton->setObjectName(QStringLiteral("openModelButton"));
  m_openButton->setDefault(true);
  m_openButton->setIcon(style()->standardIcon(QStyle::SP_DialogOpenButton));
  m_openButton->setMinimumWidth(180);
  connect(m_openButton, &QPushButton::clicked, this, &WelcomePage::openRequested);

  auto* dropHint = new QLabel(tr("or drop a .gguf file here"), card);
  dropHint->setAlignment(Qt::AlignCenter);
  dropHint->setForegroundRole(QPalette::PlaceholderText);

  QFont sectionFont = m_recentTitle->font();
  sectionFont.setBold(true);
  m_recentTitle->setFont(sectionFont);
  m_recentTitle->setAlignment(Qt::AlignCenter);
  m_recentLinks->setAlignment(Qt::AlignCenter);
  m_recentLinks->setTextFormat(Qt::RichText);
  m_recentLinks->setObjectName(QStringLiteral("recentLinks"));
  connect(m_recentLinks, &QLabel::linkActivated, this, [this](const QString& link) {
    bool ok = false;
    const int index = link.toInt(&ok);
    if (ok && index >= 0 && index < m_recentFiles.size()) {
      emit recentFileActivated(m_recentFiles.at(index));
    }
  });

  auto* cardLayout = new QVBoxLayout(card);
  cardLayout->setContentsMargins(36, 28, 36, 28);
  cardLayout->setSpacing(10);
  cardLayout->addWidget(icon);
  cardLayout->addWidget(title);
  cardLayout->addWidget(blurb);
  cardLayout->addSpacing(8);
  cardLayout->addWidget(m_openButton, 0, Qt::AlignHCenter);
  cardLayout->addWidget(dropHint);
  cardLayout->addSpacing(12);
  cardLayout->addWidget(m_recentTitle);
  cardLayout->addWidget(m_recentLinks);

  auto* layout = new QVBoxLayout(this);
  layout->addStretch(1);
  layout->addWidget(card, 0, Qt::AlignHCenter);
  layout->addStretch(2);

  setRecentFiles({});
}

void WelcomePage::setRecentFiles(const QStringList& paths) {
  m_recentFiles = paths;
  QStringList lines;
  for (qsizetype i = 0; i < paths.size(); ++i) {
    const QFileInfo info(paths[i]);
    lines << QStringLiteral("<a href=\"%1\">%2</a> <span style=\"color:gray\">— %3</span>")
                 .arg(i)
                 .arg(info.fileName().toHtmlEscaped(),
                      QDir::toNativeSeparators(info.path()).toHtmlEscaped());
  }
  m_recentLinks->setText(lines.join(QStringLiteral("<br>")));
  m_recentTitle->setVisible(!paths.isEmpty());
  m_recentLinks->setVisible(!paths.isEmpty());
}

}  // namespace iwb::ui
