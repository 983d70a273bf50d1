#include "collectors/control/SafePoint.h"

#include <time.h>

#include <cstdlib>

#include "collectors/control/OwnThread.h"
#include "collectors/stacks/CPythonApi.h"

namespace memtool::collectors::control {

namespace {

CPythonApi gPython;
bool gPythonResolved = false;

// A Python interpreter runs in this process (looked up once it does).
bool pythonRuns() {
    if (!gPythonResolved) gPythonResolved = gPython.resolvePendingCalls();
    return gPythonResolved && gPython.IsInitialized();
}

// Before 3.13, Py_AddPendingCall from a thread other than the main one does not
// wake the main thread up: the interpreter's eval breaker is computed for the
// calling thread, which cannot run pending calls, and stays unset. A main thread
// that ran only Python code (never releasing the GIL, whose retaking recomputes
// it) did not come: a pure-Python loop timed out as if blocked (3.11 and 3.12;
// 3.13 came in 0.07 s). A thread that asks for the GIL sets the drop request,
// which breaks into the main thread's loop, and there pending calls run first.
// That thread may wait until the task ends: it is one of its own, holds nothing
// of memtool's, and ends once it has had the GIL for a moment (or, at
// finalization, where the interpreter ends threads that ask for it).
//
// A park too: unhurried, the main thread came only when another thread asked for
// the GIL, a thread inside a long op at its end (a yield waited 1 s for a sort).
// Another thread may well be inside an op, the GIL released, when the main thread
// parks (as on 3.13): a yield makes memory read-only before backing it up, then
// takes it, and a thread that touches it meanwhile waits for restore
// (PausedAccess).
bool wakingNeeded() {
    static const bool needed = [] {
        if (!gPython.GILStateEnsure || !gPython.GILStateRelease || !gPython.GetVersion)
            return false;
        const char* v = gPython.GetVersion();  // "3.11.2 (main, ...)"
        char* end = nullptr;
        const long major = std::strtol(v, &end, 10);
        const long minor = end && *end == '.' ? std::strtol(end + 1, nullptr, 10) : 0;
        return major == 3 && minor < 13;
    }();
    return needed;
}

void* askForTheGil(void*) {
    if (!(gPython.IsFinalizing && gPython.IsFinalizing())) {
        const int state = gPython.GILStateEnsure();
        gPython.GILStateRelease(state);
    }
    return nullptr;
}

void wakeTheMainThread() {
    if (wakingNeeded()) startOwnThread(askForTheGil, nullptr, nullptr);  // none: it may still come
}

timespec deadlineAfter(uint64_t ns) {
    timespec t;
    clock_gettime(CLOCK_REALTIME, &t);  // pthread_cond_timedwait's clock by default
    const uint64_t total = static_cast<uint64_t>(t.tv_nsec) + ns % 1000000000ull;
    t.tv_sec += static_cast<time_t>(ns / 1000000000ull + total / 1000000000ull);
    t.tv_nsec = static_cast<long>(total % 1000000000ull);
    return t;
}

}  // namespace

bool SafePoint::requestLocked(Outcome* refused) {
    const bool python = pythonRuns();
    const bool canPark = !task_ && programMarks_;  // the program's own marks only park
    // A park may wait for the program's first mark: a LibTorch program in its first
    // half second has not reached its loop yet. A run cannot: marks only park.
    if (!python && task_) {
        *refused = Outcome::NoSafePoints;
        return false;
    }
    ++generation_;
    state_ = State::Requested;
    if (python) {
        if (gPython.AddPendingCall(onMainThread, reinterpret_cast<void*>(generation_)) != 0) {
            if (!canPark) {
                state_ = State::Idle;  // the interpreter's queue is full: as good as not coming
                *refused = Outcome::TimedOut;
                return false;
            }
        } else {
            wakeTheMainThread();
        }
    }
    return true;
}

SafePoint::Outcome SafePoint::park(uint64_t timeoutNs) {
    pthread_mutex_lock(&mu_);
    if (state_ != State::Idle) {
        pthread_mutex_unlock(&mu_);
        return Outcome::Busy;
    }
    task_ = nullptr;
    Outcome refused;
    if (!requestLocked(&refused)) {
        pthread_mutex_unlock(&mu_);
        return refused;
    }
    const timespec deadline = deadlineAfter(timeoutNs);
    while (state_ == State::Requested)
        if (pthread_cond_timedwait(&changed_, &mu_, &deadline) != 0) break;
    const bool parked = state_ == State::Parked;
    if (!parked) state_ = State::Idle;  // withdrawn: a late arrival goes on at once
    // Without Python, and no mark within the wait: a program that marks none.
    const bool unmarked = !parked && !programMarks_ && !pythonRuns();
    pthread_mutex_unlock(&mu_);
    return parked ? Outcome::Parked : unmarked ? Outcome::NoSafePoints : Outcome::TimedOut;
}

SafePoint::Outcome SafePoint::run(void (*fn)(void*), void* context, uint64_t timeoutNs) {
    pthread_mutex_lock(&mu_);
    if (state_ != State::Idle) {
        pthread_mutex_unlock(&mu_);
        return Outcome::Busy;
    }
    task_ = fn;
    taskContext_ = context;
    Outcome refused;
    if (!requestLocked(&refused)) {
        task_ = nullptr;
        pthread_mutex_unlock(&mu_);
        return refused;
    }
    const timespec deadline = deadlineAfter(timeoutNs);
    while (state_ == State::Requested)
        if (pthread_cond_timedwait(&changed_, &mu_, &deadline) != 0) break;
    // Once it started, it runs to its end: its context must outlive it.
    while (state_ == State::Running) pthread_cond_wait(&changed_, &mu_);
    const bool ran = state_ == State::Done;
    state_ = State::Idle;  // done, or withdrawn before it started
    task_ = nullptr;
    pthread_mutex_unlock(&mu_);
    return ran ? Outcome::Ran : Outcome::TimedOut;
}

bool SafePoint::release() {
    pthread_mutex_lock(&mu_);
    const bool wasParked = state_ == State::Parked;
    if (wasParked) {
        state_ = State::Idle;
        pthread_cond_broadcast(&changed_);
    }
    pthread_mutex_unlock(&mu_);
    return wasParked;
}

bool SafePoint::parked() {
    pthread_mutex_lock(&mu_);
    const bool p = state_ == State::Parked;
    pthread_mutex_unlock(&mu_);
    return p;
}

bool SafePoint::asked() {
    pthread_mutex_lock(&mu_);
    const bool a = state_ == State::Requested;
    pthread_mutex_unlock(&mu_);
    return a;
}

void SafePoint::parkHereLocked() {
    state_ = State::Parked;
    pthread_cond_broadcast(&changed_);
    while (state_ == State::Parked) pthread_cond_wait(&changed_, &mu_);
}

int SafePoint::onMainThread(void* generation) {
    SafePoint& s = safePoint();
    pthread_mutex_lock(&s.mu_);
    // Only the request that scheduled this call, and only while it stands.
    if (s.state_ == State::Requested && s.generation_ == reinterpret_cast<uintptr_t>(generation)) {
        if (s.task_) {
            s.state_ = State::Running;
            pthread_mutex_unlock(&s.mu_);
            s.task_(s.taskContext_);  // the GIL held, the lock not
            pthread_mutex_lock(&s.mu_);
            s.state_ = State::Done;
            pthread_cond_broadcast(&s.changed_);
        } else {
            s.parkHereLocked();
        }
    }
    pthread_mutex_unlock(&s.mu_);
    return 0;
}

void SafePoint::reached() {
    pthread_mutex_lock(&mu_);
    programMarks_ = true;
    if (state_ == State::Requested && !task_) parkHereLocked();
    pthread_mutex_unlock(&mu_);
}

}  // namespace memtool::collectors::control
