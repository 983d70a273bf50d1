#pragma once
// A thread of memtool's own in the program: detached (unless asked), a 256 KiB stack, every
// signal blocked (they are the program's to handle). `name`, where given, names
// it in the program's thread listings: only for a thread that lives on, as a
// detached thread that has ended has no id left to name.

#include <pthread.h>
#include <signal.h>

namespace memtool::collectors::control {

// With `joinable`, the thread is made joinable and its id put there: its
// starter waits for it to be gone (memtool.track's end).
inline bool startOwnThread(void* (*fn)(void*), void* arg, const char* name,
                           pthread_t* joinable = nullptr) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr,
                                joinable ? PTHREAD_CREATE_JOINABLE : PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    pthread_t thread;
    const bool started = pthread_create(&thread, &attr, fn, arg) == 0;
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (started && joinable) *joinable = thread;
    if (started && name) pthread_setname_np(thread, name);
    return started;
}

}  // namespace memtool::collectors::control
