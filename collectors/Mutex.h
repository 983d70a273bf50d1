#pragma once
// A lock that cannot throw: std::mutex::lock reports failure with an exception,
// which must never unwind through a program memtool observes.
//
// The engine takes it twice for every allocation and free, so its uncontended
// path is inline: one compare-and-swap to lock, one exchange to unlock (glibc's
// adaptive mutex, a call through the PLT and a dispatch on the mutex's type, cost
// ~70 instructions a lock and unlock). With LTO it inlines into the hooks: 258
// fewer instructions for a small tensor's allocation and free (bench/RESULTS.md,
// run 14). Contended, a thread spins a little before it sleeps: the engine
// holds it for ~100 ns an event, and torch allocates with the GIL released, so
// threads meet here; sleeping at once would cost each of them a futex call and a
// context switch. Sleeping and waking are a private futex (a fork child has its
// own copy of the word).
//
// The word: 0 free, 1 held, 2 held and a thread may be asleep on it (the unlock
// then wakes one). Drepper's "Futexes Are Tricky", mutex 2.

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
        while (__atomic_exchange_n(&word_, 2, __ATOMIC_ACQUIRE) != 0)
            syscall(SYS_futex, &word_, FUTEX_WAIT_PRIVATE, 2, nullptr, nullptr, 0);
        errno = savedErrno;
    }

    __attribute__((noinline)) void wakeOne() {
        const int savedErrno = errno;
        syscall(SYS_futex, &word_, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
        errno = savedErrno;
    }

    uint32_t word_ = 0;
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
