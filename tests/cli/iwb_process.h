// Runs the built `iwb` tool for CLI tests and captures its exit code and output.
#pragma once

#include <QProcess>
#include <QString>
#include <QStringList>
#include "test_paths.h"

namespace iwb::test {

struct IwbRun {
  int exit_code = -1;
  QString out;
  QString err;
};

inline QString iwb_path() { return QString::fromStdString(iwb_cli_path()); }

inline IwbRun run_iwb(const QStringList& args, int timeout_ms = 60000) {
  QProcess p;
  p.start(iwb_path(), args);
  IwbRun r;
  if (!p.waitForFinished(timeout_ms)) {
    p.kill();
    p.waitForFinished();
    r.err = "iwb did not finish in time";
    return r;
  }
  r.exit_code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
  r.out = QString::fromUtf8(p.readAllStandardOutput());
  r.err = QString::fromUtf8(p.readAllStandardError());
  return r;
}

inline QString shared_models_qdir() { return QString::fromStdString(shared_models_dir()); }

}  // namespace iwb::test
