// Compiled by CTest, not linked: a GOT hook whose signature differs from the
// function it replaces must not compile (got_hook_type_is_checked), and one whose
// signature matches must (got_hook_type_accepts_a_match), so that the first
// fails for the mismatch alone.
#include "collectors/preload/GotPatcher.h"
#include "tests/collectors/got/GotProvider.h"

int sameSignature() { return 0; }
long otherSignature() { return 0; }

#ifdef MEMTOOL_HOOK_MATCHES
const memtool::collectors::GotHook hook = MEMTOOL_GOT_HOOK(got_provider_value, &sameSignature);
#else
const memtool::collectors::GotHook hook = MEMTOOL_GOT_HOOK(got_provider_value, &otherSignature);
#endif
