#include "tests/collectors/got/GotProvider.h"

extern "C" __attribute__((visibility("default"))) int got_provider_value(void) { return 1; }
