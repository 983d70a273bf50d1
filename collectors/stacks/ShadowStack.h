#pragma once
// Per-thread copy of the Python call stack as the last allocation saw it, with
// the trie node of each frame, so that an allocation interns only the frames
// that changed since the thread's previous one. It is filled one of two ways
// (PythonTracker chooses at start):
//
// - Reading the interpreter's own frames at the allocation (PythonFrameWalker):
//   nothing runs between allocations. A frame keeps its node while its code
//   object and instruction stay what they were.
// - A profile function (PythonTracker's fallback, for interpreters whose layout
//   memtool does not know) pushes and pops on every call and return. A frame's
//   line is fixed while it waits on a callee, so its line and node stay valid
//   until it calls again (push marks it stale) or, for the innermost frame,
//   moves on.
//
// Only the owning thread touches its stack, so no lock guards it. It is read at
// allocation time, before the engine's lock and without the GIL: the frames
// belong to the allocating thread, which cannot move them while it is in the hook.

#include <cstdint>

namespace memtool::collectors {

struct ShadowFrame {
    void* frame;        // profile function: the PyFrameObject*, alive while it is on the stack
    const void* code;   // frame reading: the code object and the instruction the frame was at
    const void* instr;  //   when `line` was computed
    uint32_t codeId;    // interned code object (wire id of this stream)
    uint32_t line;      // line executing in this frame when `node` was computed
    uint32_t node;      // Python trie node of the stack up to this frame at `line`; 0: to compute
};

// One interpreter frame as a walk of the chain sees it.
struct PyFrameRef {
    const void* code;   // PyCodeObject*
    const void* instr;  // the instruction the frame is at
};

struct ShadowStack {
    static constexpr uint32_t kCapacity = 1024;
    uint32_t depth = 0;       // may exceed kCapacity; frames beyond it are not recorded
    uint64_t generation = 0;  // the stream generation its nodes belong to
    ShadowFrame frames[kCapacity];
    // Frame reading: the walk's scratch, innermost first, a ring that keeps the
    // outermost kCapacity frames of a deeper stack.
    PyFrameRef walked[kCapacity];

    // The frames recorded (at most kCapacity).
    uint32_t recorded() const { return depth < kCapacity ? depth : kCapacity; }
};

struct ThreadState;

// Brings the calling thread's stack up to date at an allocation (before the
// engine's lock): returns it, or null when the thread runs no Python now, with
// *firstStale set to the first frame whose node must be computed (recorded()
// when all are valid). Code ids are this stream generation's.
using PythonStackReader = ShadowStack* (*)(ThreadState& ts, uint64_t generation,
                                           uint32_t* firstStale);
// Set once, when an interpreter is found; until then no stack is read.
void setPythonStackReader(PythonStackReader reader);
ShadowStack* readPythonStack(ThreadState& ts, uint64_t generation, uint32_t* firstStale);

// The calling thread's shadow stack, or null when Python tracking never saw it.
ShadowStack* currentShadowStack();

// ---- the profile function's stack ------------------------------------------------
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
