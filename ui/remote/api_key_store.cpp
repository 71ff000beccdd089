// ApiKeyStore over QtKeychain's asynchronous jobs, with the session's keys in memory beside
// them. insecureFallback stays off: QtKeychain would otherwise write the key in plain text to
// a QSettings file when no keyring answers, which is what this class exists to avoid.
#include "remote/api_key_store.h"

#include <qt6keychain/keychain.h>

namespace iwb::ui {
namespace {

// Errors that say the keyring itself is missing or refuses us (rather than "no such entry").
bool isBackendFailure(QKeychain::Error error) {
  switch (error) {
    case QKeychain::NoBackendAvailable:
    case QKeychain::NotImplemented:
    case QKeychain::AccessDenied:
    case QKeychain::AccessDeniedByUser:
    case QKeychain::OtherError: return true;
    default: return false;
  }
}

// QtKeychain often says only "Unknown error" when no keyring service answers on D-Bus.
QString problemText(const QKeychain::Job* job) {
  const QString said = job->errorString().trimmed();
  if (job->error() == QKeychain::NoBackendAvailable || said.isEmpty() ||
      said.compare(QLatin1String("Unknown error"), Qt::CaseInsensitive) == 0) {
    return ApiKeyStore::tr("no Secret Service or KWallet answered");
  }
  return said;
}

}  // namespace

ApiKeyStore::ApiKeyStore(Mode mode, QObject* parent)
    : QObject(parent), m_mode(mode), m_isKeyringUsable(mode == Mode::Keyring) {
  if (mode == Mode::SessionOnly) m_keyringProblem = tr("Keys are kept for this session only.");
}

QString ApiKeyStore::serviceName() { return QStringLiteral("Inference Workbench remote endpoints"); }

void ApiKeyStore::markKeyringUnusable(const QString& why) {
  m_isKeyringUsable = false;
  m_keyringProblem = tr("No desktop keyring is available (%1).").arg(why);
}

void ApiKeyStore::store(const QString& baseUrl, const QString& key) {
  if (key.isEmpty()) {
    remove(baseUrl);
    emit stored(baseUrl, false, tr("No API key."));
    return;
  }
  m_sessionKeys.insert(baseUrl, key);
  const QString sessionNote = tr("The API key is kept for this session only and will be asked for again next time.");
  if (!m_isKeyringUsable) {
    emit stored(baseUrl, false, m_keyringProblem + QLatin1Char(' ') + sessionNote);
    return;
  }
  auto* job = new QKeychain::WritePasswordJob(serviceName(), this);
  job->setAutoDelete(true);
  job->setInsecureFallback(false);
  job->setKey(baseUrl);
  job->setTextData(key);
  connect(job, &QKeychain::Job::finished, this, [this, baseUrl, sessionNote](QKeychain::Job* done) {
    if (done->error() == QKeychain::NoError) {
      emit stored(baseUrl, true, tr("The API key is saved in the desktop keyring."));
      return;
    }
    markKeyringUnusable(problemText(done));
    emit stored(baseUrl, false, m_keyringProblem + QLatin1Char(' ') + sessionNote);
  });
  job->start();
}

void ApiKeyStore::load(const QString& baseUrl) {
  if (m_sessionKeys.contains(baseUrl) || !m_isKeyringUsable) {
    // Queued like the keyring's answer, so callers see one order of events either way.
    QMetaObject::invokeMethod(
        this, [this, baseUrl] { emit loaded(baseUrl, m_sessionKeys.value(baseUrl)); }, Qt::QueuedConnection);
    return;
  }
  auto* job = new QKeychain::ReadPasswordJob(serviceName(), this);
  job->setAutoDelete(true);
  job->setInsecureFallback(false);
  job->setKey(baseUrl);
  connect(job, &QKeychain::Job::finished, this, [this, baseUrl, job](QKeychain::Job* done) {
    if (done->error() == QKeychain::NoError) {
      const QString key = job->textData();
      if (!key.isEmpty()) m_sessionKeys.insert(baseUrl, key);
      emit loaded(baseUrl, key);
      return;
    }
    if (isBackendFailure(done->error())) markKeyringUnusable(problemText(done));
    emit loaded(baseUrl, m_sessionKeys.value(baseUrl));
  });
  job->start();
}

void ApiKeyStore::remove(const QString& baseUrl) {
  m_sessionKeys.remove(baseUrl);
  if (!m_isKeyringUsable) return;
  auto* job = new QKeychain::DeletePasswordJob(serviceName(), this);
  job->setAutoDelete(true);
  job->setInsecureFallback(false);
  job->setKey(baseUrl);
  connect(job, &QKeychain::Job::finished, this, [this](QKeychain::Job* done) {
    if (isBackendFailure(done->error())) markKeyringUnusable(problemText(done));
  });
  job->start();
}

}  // namespace iwb::ui
