#pragma once
// Native unwinding without libunwind's per-trace set-up, for x86-64: each return
// address's frame rule (where the caller's stack pointer, return address and
// frame pointer are) is read once from the loaded module's .eh_frame (the call
// frame information the compiler emits for exceptions) and kept in the thread's
// own cache; a walk is then a few loads per frame.
//
// Only the common rules are taken: the CFA at rsp or rbp plus an offset, the
// return address at CFA-8, rbp saved at an offset from the CFA or untouched.
// Anything else (signal frames, realigned stacks, DWARF expressions, code
// without CFI such as a JIT's) makes the walk give up, and the caller asks
// libunwind for the whole stack instead, so results never differ from
// libunwind's. Every stack read is checked against the thread's stack bounds.

#include <cstdint>

namespace memtool::collectors {

struct ThreadState;

// How the frame of one code address is unwound, packed in 64 bits (0: not known).
struct FrameRule {
    enum Kind : uint8_t { Unknown = 0, Frame = 1, Outermost = 2, Unsupported = 3 };
    Kind kind = Unknown;
    bool cfaFromRbp = false;  // else from rsp
    bool rbpSaved = false;    // else the caller's rbp is this frame's
    uint32_t cfaOffset = 0;   // bytes added to rsp or rbp
    uint32_t rbpSlot = 0;     // the saved rbp is at CFA - 8 * rbpSlot

    uint64_t pack() const;
    static FrameRule unpack(uint64_t bits);
};

// The rule for code address `pc` (a return address minus one), read from the
// .eh_frame of the module that holds it. Unsupported when no module or no FDE
// covers it, or its rule is not one of the common ones. Takes the dynamic
// loader's lock (dl_iterate_phdr); allocates nothing. (A walk reads rules through
// its thread's module spans instead, asking the loader once per module.)
FrameRule frameRuleFor(uint64_t pc);

// A library was unloaded: every thread's cached rules are stale (dlclose hook).
void codeUnloaded();

// From now on, rules read by this process and by the processes it forks are
// kept where all of them see them (memory shared across fork), besides each
// thread's own cache: a fork pool's workers run the same code, which their
// parent may never have run, and each would read the same rules again from
// .eh_frame pages fork did not map for it (~80 rules and ~55 page faults a
// worker of bench/workloads/pool.py). A rule is keyed by its module's build ID
// and its offset in the module, so a module loaded later at another address, or
// a different one at the same address, never takes another's rule; modules
// without a build ID are not shared. Called before each fork (the collector's
// fork handler); later calls do nothing, and without the memory nothing is shared.
void shareRulesWithForks();
// The 64-bit identity shareRulesWithForks keys a module by: its build ID
// (NT_GNU_BUILD_ID) folded, from the program headers of the module holding
// `address`; 0 when it has none or no module holds it.
uint64_t moduleIdentity(const void* address);

// How many rules walks have read from .eh_frame in this process (each a
// dl_iterate_phdr and an FDE search): a thread's cache misses.
uint64_t ruleReads();
// How many times walks asked the loader which module holds a code address
// (dl_iterate_phdr): the rule reads whose module the thread's spans did not hold.
uint64_t moduleLookups();

// The calling thread's return addresses, innermost first, starting with its
// caller's own: what unw_backtrace gives from the same call site. `ts` is the
// calling thread's state (threadState()): its stack bounds and cached rules. -1
// when a frame's rule is not supported (the caller then asks libunwind). x86-64
// only; elsewhere always -1. `out` may be ts->walkMemo.ips itself (max at most
// kWalkRoom): the walk then copies nothing, kept or replayed; a caller that then
// writes there otherwise must say so (WalkMemo::forget).
extern "C" __attribute__((visibility("hidden"))) int memtool_cfi_backtrace(void** out, int max,
                                                                           ThreadState* ts);

}  // namespace memtool::collectors
