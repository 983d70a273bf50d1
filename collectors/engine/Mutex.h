#pragma once
// A lock that cannot throw: std::mutex::lock reports failure with an exception,
// which must never unwind through a program memtool observes.
//
// The engine takes it twice for every allocation and free, so its uncontended
// path is inline: one compare-and-swap to lock, one exchange to unlock (glibc's
// adaptive mutex, a call through the PLT and a dispatch on the mutex's type, cost
// ~70 instructions a lock and unlock). With LTO it inlines into the hooks: 258
// fewer instructions for a small tensor's allocation and free (bench/history/runs.md,
// run 14). Contended, a thread spins a little before it sleeps: the engine
// holds it for ~100 ns an event, and torch allocates with the GIL released, so
// threads meet here; sleeping at once would cost each of them a futex call and a
// context switch. Sleeping and waking are a private futex (a fork child has its
// own copy of the word).
//
// The word: 0 free, 1 held, 2 held and a thread may be asleep on it (the unlock
// then wakes one). Drepper's "Futexes Are Tricky", mutex 2.
//
// It counts, on the contended path only, the locks that found it held and the
// times a thread went to sleep on it: the engine reports its own in the trace
// (core::kNoteCollectorLock), so that what threads cost each other in the
// collector is a figure, not a guess.

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace memtool::collectors {

class Mutex {
public:
    constexpr Mutex() = default;
    Mutex(const Mutex&) = delete;
    Mutex& operator=(const Mutex&) = delete;

    void lock() {
        uint32_t expected = 0;
        if (__builtin_expect(__atomic_compare_exchange_n(&word_, &expected, 1, false,
                                                         __ATOMIC_ACQUIRE, __ATOMIC_RELAXED),
                             1))
            return;
        lockContended();
    }
    void unlock() {
        if (__builtin_expect(__atomic_exchange_n(&word_, 0, __ATOMIC_RELEASE) == 2, 0)) wakeOne();
    }

    // Locks that found it held, and sleeps on it, since it was made.
    uint64_t contended() const { return __atomic_load_n(&contended_, __ATOMIC_RELAXED); }
    uint64_t waits() const { return __atomic_load_n(&waits_, __ATOMIC_RELAXED); }
    // Forgets them: a new stream counts its own.
    void resetCounts() {
        __atomic_store_n(&contended_, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&waits_, 0, __ATOMIC_RELAXED);
    }

private:
    static constexpr int kSpins = 100;

    static void pause() {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        asm volatile("yield");
#endif
    }

    __attribute__((noinline)) void lockContended() {
        __atomic_fetch_add(&contended_, 1, __ATOMIC_RELAXED);
        for (int i = 0; i < kSpins; ++i) {
            pause();
            uint32_t expected = 0;
            if (__atomic_load_n(&word_, __ATOMIC_RELAXED) == 0 &&
                __atomic_compare_exchange_n(&word_, &expected, 1, false, __ATOMIC_ACQUIRE,
                                            __ATOMIC_RELAXED))
                return;
        }
        // From here the word says 2 while anyone waits, so every unlock wakes one.
        // The program's errno survives (a hook may not change it).
        const int savedErrno = errno;
        while (__atomic_exchange_n(&word_, 2, __ATOMIC_ACQUIRE) != 0) {
            __atomic_fetch_add(&waits_, 1, __ATOMIC_RELAXED);
            syscall(SYS_futex, &word_, FUTEX_WAIT_PRIVATE, 2, nullptr, nullptr, 0);
        }
        errno = savedErrno;
    }

    __attribute__((noinline)) void wakeOne() {
        const int savedErrno = errno;
        syscall(SYS_futex, &word_, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
        errno = savedErrno;
    }

    uint32_t word_ = 0;
    uint64_t contended_ = 0;
    uint64_t waits_ = 0;
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
