// libweft.so's own translation unit: identity of the shared library. All
// other code comes from the layer archives (core whole, the rest as needed).
#include <cstdio>

#include "core/api.h"
#include "weft.h"

WEFT_EXPORT int weftGetVersion(void) { return WEFT_VERSION_CODE; }

WEFT_EXPORT const char* weftGetVersionString(void) {
  static char text[64];
  std::snprintf(text, sizeof(text), "weft %d.%d.%d (NCCL API %d.%d.%d)", WEFT_VERSION_MAJOR, WEFT_VERSION_MINOR,
                WEFT_VERSION_PATCH, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
  return text;
}
