#pragma once
// Taking the calling thread's native stack, before the engine's lock: libunwind
// (NativeUnwinder), with memtool's own frames skipped and, when the Python stack
// stands in for it, everything outside the interpreter loop cut off.

#include <cstdint>

#include "collectors/engine/ThreadState.h"
#include "collectors/stacks/NativeUnwinder.h"

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
    // The interpreter's code, [start, end) (the executable segment holding its
    // evaluation loop): with Python frames recorded, unwinding stops at the
    // innermost frame inside it, where torch's binding was called. The CLI puts
    // the Python stack there; the interpreter's own call plumbing and loop frames
    // outside it would be dropped anyway.
    void setInterpreterCode(uint64_t start, uint64_t end) {
        evalStart_ = start;
        evalEnd_ = end;
    }

    // Frames of the collector's own above the caller's, at most: `ips` has room
    // for maxDepth plus these.
    static constexpr int kOwnFrameRoom = 8;
    static_assert(kWalkRoom == kMaxNativeDepth + kOwnFrameRoom, "a walk's room in its memo");
    // Return addresses of the calling thread, innermost first, at most maxDepth:
    // the walk writes them into ips and they are left there, from ips[*first]
    // (after the collector's own frames).
    int native(ThreadState& ts, uint64_t* ips, int maxDepth, bool stopAtInterpreter,
               int* first) const;

    // The executable segment holding `address` (the collector's own code), or false.
    static bool codeRangeOf(const void* address, uint64_t* start, uint64_t* end);

private:
    bool inInterpreter(uint64_t ip) const { return ip > evalStart_ && ip <= evalEnd_; }

    NativeUnwinder unwinder_;
    uint64_t ownStart_ = 0, ownEnd_ = 0;
    uint64_t evalStart_ = 0, evalEnd_ = 0;
};

// Inline (with Engine::alloc) in the hook's own frame: see Engine::alloc.
[[gnu::always_inline]] inline int StackCapture::native(ThreadState& ts, uint64_t* ips, int maxDepth,
                                                       bool stopAtInterpreter, int* first) const {
    void** raw = reinterpret_cast<void**>(ips);
    const int limit =
        maxDepth < kMaxNativeDepth ? maxDepth + kOwnFrameRoom : kMaxNativeDepth + kOwnFrameRoom;
    const bool cutAtLoop = stopAtInterpreter && evalStart_ != 0;
    int got = 0;
    int cut = -1;  // index of the innermost interpreter frame
    bool cfi = false;
    auto findLoop = [&] {
        // CfiUnwinder's walk ends at that frame: it is the last or there is none.
        if (cfi) {
            if (got > 0 && inInterpreter(reinterpret_cast<uint64_t>(raw[got - 1]))) cut = got - 1;
            return;
        }
        for (int i = 0; i < got && cut < 0; ++i)
            if (inInterpreter(reinterpret_cast<uint64_t>(raw[i])))
                cut = i;  // a return address: ip - 1 is inside
    };
    // CfiUnwinder's walk ends at the loop's frame; libunwind's runs to `want`.
    ts.walkStopStart = cutAtLoop ? evalStart_ : 0;
    ts.walkStopEnd = cutAtLoop ? evalEnd_ : 0;
    if (cutAtLoop) {
        int want = ts.evalDepth > 0 ? ts.evalDepth + 4 : 24;
        if (want > limit) want = limit;
        got = unwinder_.backtrace(raw, want, ts, &cfi);
        findLoop();
        if (cut < 0 && got == want && want < limit) got = 0;  // deeper than guessed: walk it all
    }
    if (got == 0) {
        got = unwinder_.backtrace(raw, limit, ts, &cfi);
        if (cutAtLoop) findLoop();
    }
    if (cut >= 0) {
        ts.evalDepth = cut + 1;
        got = cut + 1;  // keep that frame: the CLI splices Python frames there
    }
    int skip = 0;
    while (skip < got && ips[skip] >= ownStart_ && ips[skip] < ownEnd_) ++skip;
    *first = skip;
    return got - skip < maxDepth ? got - skip : maxDepth;
}

}  // namespace memtool::collectors
