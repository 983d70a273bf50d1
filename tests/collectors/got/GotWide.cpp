// Built twice, one with only a DT_GNU_HASH table and one with only DT_HASH
// (GotPatcher finds hooked names through either): it calls the provider's
// function through a JUMP_SLOT and takes its address through a GLOB_DAT.
#include "tests/collectors/got/GotProvider.h"

extern "C" __attribute__((visibility("default"))) int got_wide_call(void) {
    return got_provider_value();
}

extern "C" __attribute__((visibility("default"))) int (*got_wide_pointer(void))(void) {
    return &got_provider_value;
}
