#include "internal.h"

unsigned tstor_version(void) { return TSTOR_VERSION_HEX; }

const char *tstor_version_string(void) {
#define TSTOR__STR2(x) #x
#define TSTOR__STR(x) TSTOR__STR2(x)
  return TSTOR__STR(TSTOR_VERSION_MAJOR) "." TSTOR__STR(TSTOR_VERSION_MINOR) "." TSTOR__STR(
      TSTOR_VERSION_PATCH);
}
