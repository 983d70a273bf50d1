#include "tests/collectors/got/GotProvider.h"

extern "C" __attribute__((visibility("default"))) int got_target_call(void) {
    return got_provider_value();
}
