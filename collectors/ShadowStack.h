#pragma once
// Per-thread shadow of the Python call stack, kept by the profile function
// (which runs with the GIL) and read by allocation hooks on the same thread
// (which may run without it: torch releases the GIL inside most ops).
//
// Only the owning thread touches its stack, so no lock guards it. A frame's line
// is fixed while it waits on a callee, so a frame's line and trie node stay valid
// until it calls again (push marks it stale) or, for the innermost frame, moves
// on. Lines are read at allocation time, without the GIL: the frames belong to
// the allocating thread, which cannot move them while it is in the hook.

#include <cstdint>

namespace memtool::collectors {

struct ShadowFrame {
    void* frame;      // PyFrameObject*, alive while it is on the stack
    uint32_t codeId;  // interned code object (wire id)
    uint32_t line;    // line executing in this frame when `node` was computed
    uint32_t node;    // Python trie node of the stack up to this frame at `line`; 0: stale
};

struct ShadowStack {
    static constexpr uint32_t kCapacity = 1024;
    uint32_t depth = 0;  // may exceed kCapacity; frames beyond it are not recorded
    ShadowFrame frames[kCapacity];
};

// The calling thread's shadow stack, or null when Python tracking never saw it.
ShadowStack* currentShadowStack();

}  // namespace memtool::collectors

namespace memtool::collectors {
// Line now executing in `frame` (PyFrame_GetLineNumber): safe without the GIL for
// a frame of the calling thread, which cannot move while the thread is in a hook.
uint32_t currentLine(void* frame);
}  // namespace memtool::collectors
