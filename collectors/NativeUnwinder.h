#pragma once
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
    // Return addresses of the calling thread, innermost first (unw_backtrace).
    int backtrace(void** out, int max) const { return backtrace_(out, max); }

private:
    int (*backtrace_)(void**, int) = nullptr;
};

// dlopen that bypasses the collector's own dlopen interposition.
void* realDlopen(const char* file, int mode);

}  // namespace memtool::collectors
