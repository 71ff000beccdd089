// ChatPanel's "Runs on" choice: the local engine or a model of a connected server
// (RemoteEndpoints), remembered across sessions; replies to a remote choice go through
// RemoteChat and are handled like the engine's (chat_panel_reply.cpp).
#include "chat/chat_panel.h"

#include "remote/remote_endpoints.h"
#include "worker/engine_controller.h"

#include <QComboBox>
#include <QLabel>
#include <QSettings>

namespace iwb::ui {
namespace {

const char* const kRunsOnKey = "chat/runsOn";  // "<base URL>\t<model>"; absent: the local engine
constexpr int kBaseUrlRole = Qt::UserRole;
constexpr int kModelRole = Qt::UserRole + 1;

}  // namespace

void ChatPanel::setRemoteEndpoints(RemoteEndpoints* endpoints) {
  if (m_remoteEndpoints) disconnect(m_remoteEndpoints, nullptr, this, nullptr);
  m_remoteEndpoints = endpoints;
  if (m_remoteEndpoints)
    connect(m_remoteEndpoints, &RemoteEndpoints::endpointsChanged, this, &ChatPanel::rebuildRunsOn);
  connect(m_runsOn, &QComboBox::currentIndexChanged, this, &ChatPanel::runsOnChanged, Qt::UniqueConnection);
  rebuildRunsOn();
  // The choice of the last session, when its endpoint is still connected.
  const QStringList saved = QSettings().value(QLatin1String(kRunsOnKey)).toString().split(QLatin1Char('\t'));
  if (saved.size() == 2) setRunsOn(saved.at(0), saved.at(1));
}

void ChatPanel::rebuildRunsOn() {
  const QString baseUrl = runsOnBaseUrl();
  const QString model = runsOnModel();
  {
    const QSignalBlocker blocker(m_runsOn);
    m_runsOn->clear();
    m_runsOn->addItem(tr("Local engine"));
    m_runsOn->setItemData(0, tr("This program's engine, with the model opened in File › Open Model…"), Qt::ToolTipRole);
    if (m_remoteEndpoints) {
      for (const RemoteEndpointInfo& info : m_remoteEndpoints->endpoints()) {
        // The model picked in the Connect dialog first.
        QStringList models = info.models;
        if (models.removeOne(info.defaultModel)) models.prepend(info.defaultModel);
        for (const QString& m : std::as_const(models)) {
          m_runsOn->addItem(RemoteEndpoints::ranOnLabel(info.baseUrl, m));
          const int row = m_runsOn->count() - 1;
          m_runsOn->setItemData(row, info.baseUrl, kBaseUrlRole);
          m_runsOn->setItemData(row, m, kModelRole);
          m_runsOn->setItemData(row, tr("%1 — %2").arg(info.displayName, info.baseUrl), Qt::ToolTipRole);
        }
      }
    }
    m_runsOn->setCurrentIndex(0);
    for (int row = 1; row < m_runsOn->count(); ++row) {
      if (m_runsOn->itemData(row, kBaseUrlRole).toString() == baseUrl &&
          m_runsOn->itemData(row, kModelRole).toString() == model)
        m_runsOn->setCurrentIndex(row);
    }
  }
  const bool hasRemote = m_runsOn->count() > 1;
  m_runsOn->setVisible(hasRemote);
  m_runsOnLabel->setVisible(hasRemote);
  // The endpoint chosen may have gone: the panel falls back to the local engine.
  if (runsOnBaseUrl() != baseUrl || runsOnModel() != model) runsOnChanged();
}

bool ChatPanel::setRunsOn(const QString& baseUrl, const QString& model) {
  if (baseUrl.isEmpty()) {
    m_runsOn->setCurrentIndex(0);
    return true;
  }
  for (int row = 1; row < m_runsOn->count(); ++row) {
    if (m_runsOn->itemData(row, kBaseUrlRole).toString() != baseUrl) continue;
    if (!model.isEmpty() && m_runsOn->itemData(row, kModelRole).toString() != model) continue;
    m_runsOn->setCurrentIndex(row);
    return true;
  }
  return false;
}

void ChatPanel::runsOnChanged() {
  if (isRemoteChosen()) {
    QSettings().setValue(QLatin1String(kRunsOnKey), runsOnBaseUrl() + QLatin1Char('\t') + runsOnModel());
  } else if (m_runsOn->count() > 1) {
    QSettings().remove(QLatin1String(kRunsOnKey));  // the user chose the local engine
  }
  updateModelLabel();
  contextChanged();
  updateActions();
}

QString ChatPanel::runsOnBaseUrl() const { return m_runsOn->currentData(kBaseUrlRole).toString(); }

QString ChatPanel::runsOnModel() const { return m_runsOn->currentData(kModelRole).toString(); }

bool ChatPanel::isRemoteChosen() const { return !runsOnBaseUrl().isEmpty(); }

const RemoteEndpointInfo* ChatPanel::chosenEndpoint() const {
  if (!m_remoteEndpoints || !isRemoteChosen()) return nullptr;
  return m_remoteEndpoints->find(runsOnBaseUrl());
}

bool ChatPanel::isTargetReady() const {
  if (isRemoteChosen()) return chosenEndpoint() != nullptr;
  return m_engine->hasModel() && !m_engine->isLoading();
}

}  // namespace iwb::ui
