#pragma once
// A lock that cannot throw: std::mutex::lock reports failure with an exception,
// which must never unwind through a program memtool observes. A pthread mutex
// only fails for misuse (a non-recursive relock), which the engine does not do.
// Adaptive: a thread that finds it taken spins a little before it sleeps. The
// engine holds it for ~100 ns an event, and torch allocates with the GIL
// released, so threads meet here; a plain mutex put each one that did to sleep
// (a futex call and a context switch).

#include <pthread.h>

namespace memtool::collectors {

class Mutex {
public:
    constexpr Mutex() = default;
    Mutex(const Mutex&) = delete;
    Mutex& operator=(const Mutex&) = delete;
    void lock() { pthread_mutex_lock(&m_); }
    void unlock() { pthread_mutex_unlock(&m_); }

private:
    pthread_mutex_t m_ = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
};

class LockGuard {
public:
    explicit LockGuard(Mutex& m) : m_(m) { m_.lock(); }
    ~LockGuard() { m_.unlock(); }
    LockGuard(const LockGuard&) = delete;
    LockGuard& operator=(const LockGuard&) = delete;

private:
    Mutex& m_;
};

}  // namespace memtool::collectors
