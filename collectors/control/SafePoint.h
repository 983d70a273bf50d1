#pragma once
// Stopping a program where it can wait: its Python main thread between two
// bytecodes, holding the interpreter (so every other Python thread stops at its
// next bytecode too), until it is let go. memtool ctl's yield parks the program
// here while its memory is away.
//
// The main thread gets there through the interpreter's pending-call mechanism
// (Py_AddPendingCall, asked from the control thread without the GIL). A main
// thread that does not come (blocked in a long system call, a sleep, a C loop
// that never checks) leaves the request to time out; when it comes later it finds
// the request withdrawn and goes on at once. A program without an interpreter
// (LibTorch C++) can offer safe points itself: memtool_safe_point() in its loop
// parks there while a park is asked for.

#include <pthread.h>

#include <cstddef>
#include <cstdint>

namespace memtool::collectors::control {

class SafePoint {
public:
    enum class Outcome {
        Parked,        // the program waits at a safe point until release()
        TimedOut,      // it did not come within the time given; the request is withdrawn
        NoSafePoints,  // no Python interpreter, and the program marks no safe points
        Busy,          // a park (or a run) is asked for or held already
        Ran,           // run(): the function ran on the main thread
    };

    constexpr SafePoint() = default;
    SafePoint(const SafePoint&) = delete;
    SafePoint& operator=(const SafePoint&) = delete;

    // From the control thread: asks for a park and waits up to `timeoutNs` for it.
    Outcome park(uint64_t timeoutNs);
    // From the control thread: runs fn(context) on the program's main thread at its
    // next safe point, the GIL held (Python programs only: C++ programs' own marks
    // only park). Waits up to `timeoutNs` for it to start, then until it ends.
    Outcome run(void (*fn)(void*), void* context, uint64_t timeoutNs);
    // Lets the parked program go on. False when none was parked.
    bool release();
    bool parked();
    bool asked();  // a park or a run is asked for and has not started

    // The program's own safe point (memtool_safe_point): marks that it offers them,
    // and parks while a park is asked for.
    void reached();

private:
    enum class State { Idle, Requested, Parked, Running, Done };
    static int onMainThread(void* generation);
    void parkHereLocked();
    // Asks the interpreter for a pending call; false (state back to Idle) when it
    // cannot be asked. Under mu_.
    bool requestLocked(Outcome* refused);

    pthread_mutex_t mu_ = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t changed_ = PTHREAD_COND_INITIALIZER;
    State state_ = State::Idle;
    uintptr_t generation_ = 0;       // tells a late pending call its request is gone
    bool programMarks_ = false;      // the program called memtool_safe_point at least once
    void (*task_)(void*) = nullptr;  // run(): what the pending call runs instead of parking
    void* taskContext_ = nullptr;
};

// The process's safe point (the preload collector's).
SafePoint& safePoint();

}  // namespace memtool::collectors::control
