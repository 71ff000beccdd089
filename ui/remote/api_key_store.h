// API keys of remote endpoints, kept in the desktop keyring (QtKeychain: Secret Service, KWallet,
// macOS Keychain, Windows Credential Store) and never in the settings file. Where no keyring
// answers (no D-Bus secret service, offscreen tests) a key is kept in memory for this session.
#pragma once

#include <QHash>
#include <QObject>
#include <QString>

namespace iwb::ui {

class ApiKeyStore : public QObject {
  Q_OBJECT

 public:
  enum class Mode {
    Keyring,      // try the desktop keyring; fall back to memory when it does not answer
    SessionOnly,  // memory only (tests; a user who chose not to keep keys)
  };

  explicit ApiKeyStore(Mode mode = Mode::Keyring, QObject* parent = nullptr);

  Mode mode() const { return m_mode; }
  // False once the keyring failed (or in SessionOnly mode): keys then live for this session only.
  bool isKeyringUsable() const { return m_isKeyringUsable; }
  // Why the keyring is not used ("No keyring service is available: ..."); empty while it is.
  QString keyringProblem() const { return m_keyringProblem; }

  // Asynchronous: stored, then `stored` tells where. An empty key removes the entry.
  void store(const QString& baseUrl, const QString& key);
  // Asynchronous: `loaded` follows with the key (empty when there is none).
  void load(const QString& baseUrl);
  void remove(const QString& baseUrl);

  // The key kept in memory for this session (whether or not the keyring also has it).
  QString sessionKey(const QString& baseUrl) const { return m_sessionKeys.value(baseUrl); }

  // The keyring's service name (entries are "<service>/<base URL>").
  static QString serviceName();

 signals:
  // `isInKeyring` false: kept for this session only; `note` says why in words for the dialog.
  void stored(const QString& baseUrl, bool isInKeyring, const QString& note);
  void loaded(const QString& baseUrl, const QString& key);

 private:
  void markKeyringUnusable(const QString& why);

  Mode m_mode;
  bool m_isKeyringUsable;
  QString m_keyringProblem;
  QHash<QString, QString> m_sessionKeys;
};

}  // namespace iwb::ui
