#pragma once
// Per-thread flag that keeps a hook from recording work done on memtool's own
// behalf (unwinding, emitting) and from re-entering itself. Initial-exec TLS: the
// collector is preloaded, so the access is a single %fs-relative load, and it never
// allocates (global-dynamic TLS may call malloc on first touch).

namespace memtool::collectors {

struct RecursionGuard {
    static inline thread_local bool active __attribute__((tls_model("initial-exec"))) = false;

    RecursionGuard() : wasActive(active) { active = true; }
    ~RecursionGuard() { active = wasActive; }
    RecursionGuard(const RecursionGuard&) = delete;
    RecursionGuard& operator=(const RecursionGuard&) = delete;

    const bool wasActive;
};

// The opposite, for a stretch of memtool's own thread that frees or allocates the
// program's memory on its behalf (the control thread emptying PyTorch's CUDA
// cache for a yield): those events are the program's, recorded as any other.
struct ProgramEvents {
    ProgramEvents() : wasActive(RecursionGuard::active) { RecursionGuard::active = false; }
    ~ProgramEvents() { RecursionGuard::active = wasActive; }
    ProgramEvents(const ProgramEvents&) = delete;
    ProgramEvents& operator=(const ProgramEvents&) = delete;

    const bool wasActive;
};

}  // namespace memtool::collectors

namespace memtool::collectors {

// Around memtool's own device calls (the CUDA VMM backend creating and mapping
// memory for a region): the driver-level events they cause, which CUPTI reports
// on this thread, are ignored by the engine without counting as missed; the
// region's allocation is recorded itself, once.
struct OwnDeviceCalls {
    static inline thread_local bool active __attribute__((tls_model("initial-exec"))) = false;

    OwnDeviceCalls() : wasActive(active) { active = true; }
    ~OwnDeviceCalls() { active = wasActive; }
    OwnDeviceCalls(const OwnDeviceCalls&) = delete;
    OwnDeviceCalls& operator=(const OwnDeviceCalls&) = delete;

    const bool wasActive;
};

}  // namespace memtool::collectors
