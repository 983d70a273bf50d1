#pragma once
// Per-thread shadow of the Python call stack, kept by the profile function
// (PythonTracker, which runs with the GIL) and read by allocation hooks on the
// same thread (which may run without it: torch releases the GIL inside most ops).
//
// Only the owning thread touches its stack, so no lock guards it. A frame's line
// is fixed while it waits on a callee, so a frame's line and trie node stay valid
// until it calls again (push marks it stale) or, for the innermost frame, moves
// on. Lines are read at allocation time, before the engine's lock and without the
// GIL: the frames belong to the allocating thread, which cannot move them while
// it is in the hook.

#include <cstdint>

namespace memtool::collectors {

struct ShadowFrame {
    void* frame;      // PyFrameObject*, alive while it is on the stack
    uint32_t codeId;  // interned code object (wire id of this stream)
    uint32_t line;    // line executing in this frame when `node` was computed
    uint32_t node;    // Python trie node of the stack up to this frame at `line`; 0: to compute
};

struct ShadowStack {
    static constexpr uint32_t kCapacity = 1024;
    uint32_t depth = 0;       // may exceed kCapacity; frames beyond it are not recorded
    uint64_t generation = 0;  // the stream generation its nodes belong to
    ShadowFrame frames[kCapacity];

    // The frames recorded (at most kCapacity).
    uint32_t recorded() const { return depth < kCapacity ? depth : kCapacity; }
};

// The calling thread's shadow stack, or null when Python tracking never saw it.
ShadowStack* currentShadowStack();

// How lines are read: PyFrame_GetLineNumber, set once the interpreter is found.
using LineReader = int (*)(void* frame);
void setLineReader(LineReader reader);

// Line now executing in `frame`: safe without the GIL for a frame of the calling
// thread, which cannot move while the thread is in a hook.
uint32_t currentLine(void* frame);

// Before the engine's lock: re-reads the lines that may have moved (the innermost
// frame, frames marked stale) and clears the node of every frame whose stack
// prefix changed. Returns the index of the first frame without a node (recorded()
// when all are valid). Nodes of another stream generation are all stale.
uint32_t refreshLines(ShadowStack& stack, uint64_t generation);

}  // namespace memtool::collectors
