// now_as_text (clock_text.h).
#include "iwb/engine/clock_text.h"

#include <ctime>

namespace iwb {

std::string now_as_text(const char* strftime_format, ClockZone zone) {
  const std::time_t now = std::time(nullptr);
  std::tm parts{};
  if (zone == ClockZone::Utc) {
    gmtime_r(&now, &parts);
  } else {
    localtime_r(&now, &parts);
  }
  char text[64];
  const size_t size = std::strftime(text, sizeof text, strftime_format, &parts);
  return std::string(text, size);
}

}  // namespace iwb
