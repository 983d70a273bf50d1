#pragma once
#include "collectors/engine/ThreadState.h"
#include "collectors/stacks/CfiUnwinder.h"

// The seam to libunwind. The shared libunwind is loaded RTLD_LOCAL at start-up
// instead of being linked: linked into a preloaded library it would join the
// global symbol scope and take over _Unwind_* (C++ exceptions) and backtrace()
// for the whole target. Debian's static libunwind is not PIC, so it cannot be
// linked in either.

namespace memtool::collectors {

class NativeUnwinder {
public:
    // Loads libunwind; false (with the reason in *why) when it is not installed.
    bool load(const char** why);
    bool loaded() const { return backtrace_ != nullptr; }
    // Return addresses of the calling thread, innermost first: from the frame
    // rules CfiUnwinder caches where every frame has a common one, else from
    // unw_backtrace. Inline, so that both start at the same call site. `ts`: the
    // calling thread's state, where CfiUnwinder keeps its rules.
    // *cfi: whether CfiUnwinder's walk gave them.
    [[gnu::always_inline]] int backtrace(void** out, int max, ThreadState& ts, bool* cfi) const {
        if (cfi_) {
            const int n = memtool_cfi_backtrace(out, max, &ts);
            *cfi = n >= 0;
            if (n >= 0) return n;
        }
        *cfi = false;
        ts.walkMemo.forget();  // out may be its frames
        return backtrace_(out, max);
    }

private:
    int (*backtrace_)(void**, int) = nullptr;
    // MEMTOOL_NATIVE_UNWINDER=libunwind turns CfiUnwinder off (to compare).
    bool cfi_ = true;
};

// dlopen that bypasses the collector's own dlopen interposition.
void* realDlopen(const char* file, int mode);

}  // namespace memtool::collectors
