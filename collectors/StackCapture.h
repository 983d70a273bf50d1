#pragma once
// Taking the calling thread's native stack, before the engine's lock: libunwind
// (NativeUnwinder), with memtool's own frames skipped and, when the Python stack
// stands in for it, everything outside the interpreter loop cut off.

#include <cstdint>

#include "collectors/NativeUnwinder.h"
#include "collectors/ThreadState.h"

namespace memtool::collectors {

class StackCapture {
public:
    // Loads libunwind; false (with the reason in *why) when it is missing.
    bool load(const char** why);
    bool loaded() const { return unwinder_.loaded(); }

    // Code whose frames are never reported: the collector's own (the hooks).
    void setOwnCode(uint64_t start, uint64_t end) {
        ownStart_ = start;
        ownEnd_ = end;
    }
    // The interpreter loop's code, [start, end): with Python frames recorded,
    // unwinding stops at its innermost frame (the CLI puts the Python stack there).
    void setInterpreterLoop(uint64_t start, uint64_t end) {
        evalStart_ = start;
        evalEnd_ = end;
    }

    // Return addresses of the calling thread, innermost first, at most maxDepth.
    int native(ThreadState& ts, uint64_t* ips, int maxDepth, bool stopAtInterpreter) const;

    // The executable segment holding `address` (the collector's own code), or false.
    static bool codeRangeOf(const void* address, uint64_t* start, uint64_t* end);

private:
    bool inInterpreterLoop(uint64_t ip) const { return ip > evalStart_ && ip <= evalEnd_; }

    NativeUnwinder unwinder_;
    uint64_t ownStart_ = 0, ownEnd_ = 0;
    uint64_t evalStart_ = 0, evalEnd_ = 0;
};

}  // namespace memtool::collectors
