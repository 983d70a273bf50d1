#pragma once
// Test libraries for GotPatcherTest: the provider exports a function, the target
// calls it through its GOT (linked with -z now and RELRO, so the slot is
// read-only after relocation, as in every hardened distribution library).
extern "C" {
int got_provider_value(void);
int got_target_call(void);
}
