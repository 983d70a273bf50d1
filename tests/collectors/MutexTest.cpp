// The engine's lock: exclusion under contention, a waiter put to sleep in the
// kernel and woken by the unlock, the program's errno kept through it, and the
// counts of both.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "collectors/engine/Mutex.h"

namespace memtool::collectors {
namespace {

TEST(Mutex, CountsExactlyUnderContention) {
    Mutex m;
    uint64_t counter = 0;  // plain: only the lock keeps the increments whole
    constexpr int kThreads = 4, kEach = 200000;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&] {
            for (int i = 0; i < kEach; ++i) {
                LockGuard lock(m);
                uint64_t v = counter;
                asm volatile("" : "+r"(v));  // a read and a write apart, as a race needs
                counter = v + 1;
            }
        });
    for (auto& t : threads) t.join();
    EXPECT_EQ(counter, uint64_t(kThreads) * kEach);
}

// The system call a thread is blocked in, by number, from /proc ("running"
// while it runs).
std::string currentSyscall(pid_t tid) {
    std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/syscall");
    std::string first;
    in >> first;
    return first;
}

TEST(Mutex, AWaiterSleepsUntilTheUnlockWakesItAndKeepsErrno) {
    Mutex m;
    m.lock();
    std::atomic<pid_t> tid{0};
    std::atomic<bool> acquired{false};
    int errnoAfter = 0;
    std::thread waiter([&] {
        tid.store(static_cast<pid_t>(syscall(SYS_gettid)));
        errno = 4321;
        m.lock();
        errnoAfter = errno;
        acquired.store(true);
        m.unlock();
    });
    while (tid.load() == 0) std::this_thread::yield();
    // Past its spins the waiter sleeps in futex(2), where only the unlock can wake it.
    const std::string futex = std::to_string(SYS_futex);
    while (currentSyscall(tid.load()) != futex) std::this_thread::yield();
    EXPECT_FALSE(acquired.load());
    m.unlock();
    waiter.join();
    EXPECT_TRUE(acquired.load());
    EXPECT_EQ(errnoAfter, 4321);
    // One lock found it held, and slept once: the unlock's wake-up found it free.
    EXPECT_EQ(m.contended(), 1u);
    EXPECT_EQ(m.waits(), 1u);
    m.lock();  // free again: taken at once, and not counted
    m.unlock();
    EXPECT_EQ(m.contended(), 1u);
    EXPECT_EQ(m.waits(), 1u);
    m.resetCounts();
    EXPECT_EQ(m.contended(), 0u);
    EXPECT_EQ(m.waits(), 0u);
}

}  // namespace
}  // namespace memtool::collectors
