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

}  // namespace memtool::collectors
