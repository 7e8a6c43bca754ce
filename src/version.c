/* version.c — the library's version, as it was built. */
#include "internal.h"

RA_API const char *ra_version(void) { return RA_VERSION_STRING; }
