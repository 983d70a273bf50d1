#pragma once
// What the collector keeps per thread, in one block of its own memory reached
// through a single initial-exec TLS pointer. Large per-thread caches must not
// live in static TLS: a library loaded with dlopen into a running process gets
// only the small surplus glibc reserves ("cannot allocate memory in static TLS
// block"), and memtool's collector must be loadable that way.
//
// The block comes from mmap, never from the program's heap, on the thread's
// first allocation event; it is unmapped when the thread exits. Pages the thread
// never touches (the shadow stack of a thread that runs no Python) cost nothing.

#include <cstdint>

#include "collectors/stacks/ShadowStack.h"

namespace memtool::collectors {

inline constexpr int kMaxNativeDepth = 256;

// A code address and how its frame is unwound (CfiUnwinder's FrameRule, packed).
struct UnwindRuleSlot {
    uint64_t pc;
    uint64_t rule;
};
// 2,048 slots, 32 KiB: 512 sets of 4 ways, a set per cache line.
inline constexpr int kUnwindRuleSetBits = 9;
inline constexpr int kUnwindRuleWays = 4;
inline constexpr int kRecentWalkDepth = 48;

// CfiUnwinder's last walk of the thread, replayed when the next one starts at the
// same call site with the same stack pointer and every stack slot it read still
// holds what it held then: a walk is a function of those and of the frame rules,
// which stay while nothing is unloaded. A loop that allocates at one place walks
// once. Walks of more than kWalkMemoFrames frames are not kept.
//
// The engine's walks write into `ips` itself (StackCapture): a replay then
// copies nothing, and `serial` tells the stack interner that the frames are the
// very ones a walk it has seen gave, so it need not compare them either.
inline constexpr int kWalkMemoFrames = 48;
// Room for the deepest walk the engine asks for (StackCapture::kOwnFrameRoom more
// than kMaxNativeDepth).
inline constexpr int kWalkRoom = kMaxNativeDepth + 8;
struct WalkMemo {
    uint64_t ip, sp, bp;  // the registers it started from; bp counts only when usesBp
    uint64_t stopStart, stopEnd, rulesGeneration;
    int max;     // the limit it was asked for
    int frames;  // what it returned; 0: nothing kept
    int reads;
    bool usesBp;       // a frame's CFA came from the starting rbp
    uint64_t replays;  // walks answered from here (tests read it)
    // Each kept walk gets the next serial (from 1); `resultSerial` says which one's
    // frames the last walk gave: that of the walk kept or replayed, 0 when it was
    // neither (not kept, failed, or libunwind's).
    uint64_t serial, resultSerial;
    // The stack slots the result depends on, with what they held: every return
    // address read, and each restored rbp that a frame's CFA was computed from.
    uint64_t slot[2 * kWalkMemoFrames];
    uint64_t value[2 * kWalkMemoFrames];
    uint64_t ips[kWalkRoom];
    // `ips` was written by something else (libunwind): nothing is kept.
    void forget() {
        frames = 0;
        resultSerial = 0;
    }
};

// A loaded module's address span (its lowest PT_LOAD start to its highest end:
// the loader reserves the whole span, so nothing else lies inside it) and its
// .eh_frame_hdr (null: none). A thread's rule reads look up the module of each
// new code address here before asking the loader (dl_iterate_phdr, which walks
// every loaded object: 300 of them once torch is imported).
struct ModuleSpan {
    uint64_t low, high;
    const uint8_t* ehFrameHdr;
    uint64_t base;      // the loader's bias: a code address less it is the module's own
    uint64_t identity;  // its build ID folded to 64 bits; 0: it has none
};
inline constexpr int kModuleSpans = 16;

struct ThreadState {
    // The last native stack this thread recorded, innermost frame first as the walk
    // gives it, and the trie node of each prefix, outermost first (nativeNodes[k]:
    // the outer k + 1 frames): consecutive allocations share their outer frames
    // (main, the interpreter loop), so only the differing inner part is looked up.
    uint64_t nativeGeneration;
    int nativeDepth;
    // The kept walk (WalkMemo::serial) whose frames, at nativeWalkIps, the last
    // stack was; 0: none or not known.
    uint64_t nativeWalkSerial;
    const uint64_t* nativeWalkIps;
    uint64_t nativeIps[kMaxNativeDepth];
    uint32_t nativeNodes[kMaxNativeDepth];
    // How deep the interpreter loop sat in this thread's last stack: the next walk
    // asks for a little more than that, instead of the whole stack.
    int evalDepth;
    bool pythonSeen;  // the profile function has run on this thread
    // Pausable regions this thread is inside (memtool.region), innermost last, as
    // Regions' entries (control/Regions.h: tag, backup, devices): allocations go to
    // the innermost that takes their device.
    static constexpr int kMaxRegionDepth = 16;
    uint16_t regionEntries[kMaxRegionDepth];
    int regionDepth;
    // The nn.Module scope its allocations are in now (stacks/ModuleScopes.h), 0 for
    // none, and the scopes' epoch it was set in.
    uint32_t moduleScope;
    uint32_t moduleScopeEpoch;
    // The thread's stack, [stackLow, stackHigh) (stackHigh 1: could not be read),
    // and the frame rules CfiUnwinder has read, by code address (set-associative,
    // the most recently read first in its set).
    uint64_t stackLow, stackHigh;
    // Where CfiUnwinder's walk ends early: after the first frame whose return
    // address r has walkStopStart < r <= walkStopEnd (the interpreter loop's
    // code, when the Python stack stands in for what lies outside it); 0, 0: none.
    uint64_t walkStopStart, walkStopEnd;
    uint64_t unwindRulesGeneration;
    UnwindRuleSlot recentWalk[kRecentWalkDepth];  // the last walk's frames, by depth
    // The modules this thread's rule reads found, the most recent first (dropped
    // with the rules when something is unloaded); high 0: an empty slot.
    ModuleSpan moduleSpans[kModuleSpans];
    WalkMemo walkMemo;
    alignas(64) UnwindRuleSlot unwindRules[kUnwindRuleWays << kUnwindRuleSetBits];
    ShadowStack python;
};

// The calling thread's block, made on first use; null when memory ran out.
ThreadState* threadState();
// The calling thread's block if it has one.
ThreadState* existingThreadState();

}  // namespace memtool::collectors
