// Who the application is: version and the About text (name, version, licence, Qt versions).
#pragma once

#include <QString>

namespace iwb::ui {

// The project version from CMake ("0.1.0").
QString applicationVersion();
// Rich text for the About box.
QString aboutText();

}  // namespace iwb::ui
