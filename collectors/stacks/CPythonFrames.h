#pragma once
// CPython's private frame layouts, read directly: the one place that knows them.
//
// At an allocation the allocating thread's own Python frames are read from its
// thread state: the chain of _PyInterpreterFrame (3.11+), each with its code
// object and the instruction it is at. Only that thread pushes and pops its
// frames, and it is inside the allocator, so the chain holds still whether the
// thread holds the GIL or not (torch releases it inside most ops); the frames
// keep their code objects alive, and code objects and their strings are
// immutable. So nothing runs between allocations, and no lock is taken to read.
//
// Offsets are per minor version, from CPython's Include/internal headers (values
// in CPythonFrames.cpp). An interpreter this file does not know, or one whose
// frames do not read as its C API says (the self-check, PythonTracker.cpp), is
// profiled the old way, with a profile function.

#include <cstddef>
#include <cstdint>

#include "collectors/stacks/CPythonApi.h"
#include "collectors/stacks/ShadowStack.h"

namespace memtool::collectors {

struct CPythonLayout {
    unsigned minor = 0;  // 3.minor
    // PyThreadState to its innermost frame: through the _PyCFrame (3.11, 3.12) or
    // directly (3.13).
    bool viaCFrame = false;
    uint32_t tstateFrame = 0;    // PyThreadState.cframe, or .current_frame
    uint32_t cframeCurrent = 0;  // _PyCFrame.current_frame
    // _PyInterpreterFrame
    uint32_t frameCode = 0;      // f_code (f_executable in 3.13)
    uint32_t framePrevious = 0;  // previous
    uint32_t frameInstr = 0;     // prev_instr (3.11, 3.12) or instr_ptr (3.13)
    uint32_t frameOwner = 0;     // owner (a char)
    int ownerGenerator = 1;      // FRAME_OWNED_BY_GENERATOR
    int ownerCStack = -1;        // FRAME_OWNED_BY_CSTACK (3.12+): the C stack's shim frames
    // PyCodeObject
    uint32_t codeFilename = 0, codeQualname = 0, codeFirstLine = 0;
    uint32_t codeFirstTraceable = 0;  // _co_firsttraceable (an int, in code units)
    uint32_t codeAdaptive = 0;        // co_code_adaptive: the bytecode, inline
    // PyASCIIObject / PyCompactUnicodeObject
    uint32_t strLength = 16, strState = 32;
    uint32_t strAsciiData = 0, strCompactData = 0;  // where the characters start
    uint32_t strUtf8 = 0, strUtf8Length = 0;

    // The layout of CPython 3.minor, or null when it is not known here.
    static const CPythonLayout* forMinor(unsigned minor);
};

class CPythonFrames {
public:
    // For the interpreter `api` resolved: false, with the reason in *why, when
    // its version's layout is unknown or the API lacks a function frames need.
    bool configure(const CPythonApi& api, const char** why);
    const CPythonLayout& layout() const { return layout_; }
    // Test support: reads qualified names from the wrong place, as a layout that
    // changed would, so that the self-check must catch it.
    void breakLayoutForTest() { layout_.codeQualname = layout_.codeFilename; }

    // Calls visit(PyFrameRef) for each frame of the calling thread, innermost
    // first, as PyEval_GetFrame and PyFrame_GetBack would give them (frames not
    // yet started and the C stack's shim frames are left out). None once the
    // interpreter starts shutting down: it frees other threads' states then (a
    // daemon thread inside a torch op when that begins is the one case left).
    template <typename Visit>
    void walk(Visit&& visit) const {
        walkRaw([&](const PyFrameRef& ref, int owner) {
            if (complete(ref, owner)) visit(ref);
        });
    }
    // The same frames and the ones walk() leaves out for being incomplete: calls
    // visit(PyFrameRef, owner) for each; complete(ref, owner) tells them apart.
    // For a caller that knows most frames already (a frame with the code object
    // and instruction of one that was complete is complete) and checks only the rest.
    template <typename Visit>
    void walkRaw(Visit&& visit) const;
    // _PyFrame_IsIncomplete's opposite: past its prologue (MAKE_CELL,
    // COPY_FREE_VARS), or a generator's.
    bool complete(const PyFrameRef& ref, int owner) const {
        const char* firstTraceable = static_cast<const char*>(ref.code) + layout_.codeAdaptive +
                                     2 * load<int>(ref.code, layout_.codeFirstTraceable);
        return owner == layout_.ownerGenerator ||
               static_cast<const char*>(ref.instr) >= firstTraceable;
    }

    // The line the frame executes, as PyFrame_GetLineNumber computes it (0 for a
    // frame that does not run a code object).
    uint32_t line(const PyFrameRef& frame) const;
    bool isCode(const void* object) const { return typeOf(object) == codeType_; }
    int firstLine(const void* code) const { return load<int>(code, layout_.codeFirstLine); }
    // The code object's file name and qualified name in UTF-8, into `out` (at most
    // `capacity` bytes, cut there); returns the length.
    size_t filename(const void* code, char* out, size_t capacity) const {
        return utf8(load<const void*>(code, layout_.codeFilename), out, capacity);
    }
    size_t qualname(const void* code, char* out, size_t capacity) const {
        return utf8(load<const void*>(code, layout_.codeQualname), out, capacity);
    }

private:
    template <typename T>
    static T load(const void* base, uint32_t offset) {
        T value;
        __builtin_memcpy(&value, static_cast<const char*>(base) + offset, sizeof value);
        return value;
    }
    static const void* typeOf(const void* object) { return load<const void*>(object, 8); }
    size_t utf8(const void* str, char* out, size_t capacity) const;

    CPythonLayout layout_;
    PyObjectPtr (*threadState_)() = nullptr;
    int (*isInitialized_)() = nullptr;
    int (*isFinalizing_)() = nullptr;
    int (*addr2line_)(PyObjectPtr, int) = nullptr;
    const void* codeType_ = nullptr;
    const void* unicodeType_ = nullptr;
};

template <typename Visit>
void CPythonFrames::walkRaw(Visit&& visit) const {
    if (!isInitialized_() || isFinalizing_()) return;
    const void* ts = threadState_();
    if (!ts) return;  // a thread that never ran Python
    const void* f = load<const void*>(ts, layout_.tstateFrame);
    if (layout_.viaCFrame && f) f = load<const void*>(f, layout_.cframeCurrent);
    // The offsets in registers: a deep stack reads them for every frame.
    const uint32_t previous = layout_.framePrevious, ownerAt = layout_.frameOwner,
                   codeAt = layout_.frameCode, instrAt = layout_.frameInstr;
    const int cstack = layout_.ownerCStack;
    // A chain longer than any recursion limit is not a chain: stop.
    for (int guard = 0; f && guard < (1 << 20); ++guard, f = load<const void*>(f, previous)) {
        const int owner = load<char>(f, ownerAt);
        if (owner == cstack) continue;
        visit(PyFrameRef{load<const void*>(f, codeAt), load<const void*>(f, instrAt)}, owner);
    }
}

}  // namespace memtool::collectors
