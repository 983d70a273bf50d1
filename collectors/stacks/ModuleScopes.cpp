#include "collectors/stacks/ModuleScopes.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "collectors/engine/Mutex.h"
#include "core/Protocol.h"

namespace memtool::collectors::moduleScopes {

namespace {

struct Scope {
    std::atomic<const char*> label{nullptr};  // published after bytes and phase
    size_t bytes = 0;
    uint32_t phase = 0;
};

// Scope ids index both: the marks are the addresses a walk records for them.
constinit Scope gScopes[kMaxScopes];
constinit char gMarks[kMaxScopes] = {};
Mutex gAddMutex;
uint32_t gNext = 1;
std::atomic<uint32_t> gEpoch{0}, gLastEpoch{0};

constexpr size_t kMaxLabel = 1000;

}  // namespace

void start() { gEpoch.store(gLastEpoch.fetch_add(1) + 1, std::memory_order_release); }
void stop() { gEpoch.store(0, std::memory_order_release); }
uint32_t epoch() { return gEpoch.load(std::memory_order_acquire); }

uint32_t add(const char* label, int phase) {
    const auto p = static_cast<uint64_t>(phase);
    if (!label || (p != core::kModuleScopeForward && p != core::kModuleScopeBackward)) return 0;
    const size_t bytes = strnlen(label, kMaxLabel);
    LockGuard lock(gAddMutex);
    if (gNext >= kMaxScopes) return 0;
    // Never freed: a label is read by walks on any thread until the process ends.
    char* copy = static_cast<char*>(std::malloc(bytes + 1));
    if (!copy) return 0;
    std::memcpy(copy, label, bytes);
    copy[bytes] = '\0';
    Scope& s = gScopes[gNext];
    s.bytes = bytes;
    s.phase = static_cast<uint32_t>(phase);
    s.label.store(copy, std::memory_order_release);
    return gNext++;
}

const void* codeOf(uint32_t id) {
    if (id == 0 || id >= kMaxScopes) return nullptr;
    if (!gScopes[id].label.load(std::memory_order_acquire)) return nullptr;
    return &gMarks[id];
}

bool isScope(const void* code) {
    const char* p = static_cast<const char*>(code);
    return p > gMarks && p < gMarks + kMaxScopes;
}

const char* labelOf(const void* code, size_t* bytes) {
    const Scope& s = gScopes[static_cast<const char*>(code) - gMarks];
    *bytes = s.bytes;
    return s.label.load(std::memory_order_acquire);
}

uint32_t phaseOf(const void* code) {
    return gScopes[static_cast<const char*>(code) - gMarks].phase;
}

}  // namespace memtool::collectors::moduleScopes
