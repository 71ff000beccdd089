// File › Connect to Server…: the server's address and API key, a Connect that probes it on a
// worker thread (models, kind of server from its /metrics), problems shown in the dialog, which
// stays usable, and Add that puts the endpoint into RemoteEndpoints and its key in the keyring.
#pragma once

#include "remote/endpoint_probe.h"

#include <QDialog>

#include <optional>

class QComboBox;
class QDialogButtonBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QPushButton;

namespace iwb::ui {

class RemoteEndpoints;

class ConnectDialog : public QDialog {
  Q_OBJECT

 public:
  explicit ConnectDialog(RemoteEndpoints* endpoints, QWidget* parent = nullptr);

  // Seconds the probe waits for a connection and for each answer (tests shorten it).
  void setProbeTimeout(double seconds) { m_probeTimeoutSeconds = seconds; }
  // The last probe's answer, when one arrived for what is typed now.
  const std::optional<ProbeResult>& probeResult() const { return m_result; }
  bool isProbing() const { return m_pendingTag != 0; }

  QLineEdit* urlEdit() const { return m_url; }
  QLineEdit* apiKeyEdit() const { return m_apiKey; }
  QPushButton* connectButton() const { return m_connect; }
  QPushButton* addButton() const { return m_add; }
  QLabel* statusLabel() const { return m_status; }
  QLabel* detailLabel() const { return m_detail; }
  QLabel* kindLabel() const { return m_kind; }
  QLabel* keyNoteLabel() const { return m_keyNote; }
  QListWidget* modelList() const { return m_models; }
  // The servers already connected: choosing one fills in its address (and this session's key);
  // Forget removes it (and its key). Hidden when there are none.
  QComboBox* knownServersBox() const { return m_known; }
  QPushButton* forgetButton() const { return m_forget; }

 public slots:
  void startProbe();

 signals:
  // The probe's answer is shown (for tests and screenshots).
  void probeFinished(const iwb::ui::ProbeResult& result);

 protected:
  void done(int result) override;

 private:
  enum class Tone { Plain, Error, Success };
  // The line under the form: a hint, what failed (red, bold) or the connection (green, bold).
  void setStatus(const QString& text, Tone tone);
  void showResult(quint64 tag, const ProbeResult& result);
  void inputsEdited();
  void addEndpoint();
  void rebuildKnownServers();
  void knownServerChosen(int index);
  void forgetKnownServer();

  RemoteEndpoints* m_endpoints;
  QComboBox* m_known;
  QPushButton* m_forget;
  QWidget* m_knownRow;
  QLineEdit* m_url;
  QLineEdit* m_apiKey;
  QPushButton* m_connect;
  QLabel* m_status;
  QLabel* m_detail;
  QLabel* m_kind;
  QLabel* m_metrics;
  QListWidget* m_models;
  QLabel* m_keyNote;
  QDialogButtonBox* m_buttons;
  QPushButton* m_add;
  double m_probeTimeoutSeconds = 10;
  quint64 m_pendingTag = 0;
  QString m_pendingUrl;
  QString m_pendingKey;
  std::optional<ProbeResult> m_result;
  QString m_probedKey;  // the key the successful probe used
  bool m_isAdded = false;
  bool m_hasStoredKey = false;  // a key went to the store for a probe that was not added (yet)
};

}  // namespace iwb::ui
