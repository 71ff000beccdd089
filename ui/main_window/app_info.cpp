// Application identity strings shared by main() and the About box.
#include "main_window/app_info.h"

#include <QCoreApplication>
#include <QtGlobal>

namespace iwb::ui {

QString applicationVersion() { return QStringLiteral(IWB_VERSION); }

QString aboutText() {
  return QCoreApplication::translate(
             "iwb::ui::AboutText",
             "<h3>Inference Workbench %1</h3>"
             "<p>A desktop workbench for running and understanding LLM inference: open GGUF "
             "models, chat with them, and watch what the engine does — kernels on a roofline, the "
             "paged KV cache, speculative decoding and quantization quality.</p>"
             "<p>Licence: GNU General Public License, version 3 or later "
             "(GPL-3.0-or-later). This program comes with ABSOLUTELY NO WARRANTY; it is free "
             "software, and you are welcome to redistribute it under the terms of that "
             "licence.</p>"
             "<p>Built with Qt %2; running on Qt %3.</p>")
      .arg(applicationVersion(), QStringLiteral(QT_VERSION_STR), QString::fromLatin1(qVersion()));
}

}  // namespace iwb::ui
