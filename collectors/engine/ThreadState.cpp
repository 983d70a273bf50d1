#include "collectors/engine/ThreadState.h"

#include <pthread.h>
#include <sys/mman.h>

namespace memtool::collectors {

namespace {

thread_local ThreadState* tlsState __attribute__((tls_model("initial-exec"))) = nullptr;
pthread_key_t gKey;
pthread_once_t gKeyOnce = PTHREAD_ONCE_INIT;
bool gKeyMade = false;

void releaseState(void* p) {
    if (tlsState == p) tlsState = nullptr;
    munmap(p, sizeof(ThreadState));
}

void makeKey() { gKeyMade = pthread_key_create(&gKey, releaseState) == 0; }

}  // namespace

ThreadState* threadState() {
    if (tlsState) return tlsState;
    void* p = mmap(nullptr, sizeof(ThreadState), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    // Zero-filled by mmap: every cache starts empty, generation 0 matches no stream.
    tlsState = static_cast<ThreadState*>(p);
    pthread_once(&gKeyOnce, makeKey);
    if (gKeyMade) pthread_setspecific(gKey, p);
    return tlsState;
}

ThreadState* existingThreadState() { return tlsState; }

ShadowStack* currentShadowStack() {
    ThreadState* s = tlsState;
    return s && s->pythonSeen ? &s->python : nullptr;
}

}  // namespace memtool::collectors
