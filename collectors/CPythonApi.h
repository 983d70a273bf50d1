#pragma once
// The one seam to CPython. Functions are looked up at run time with dlsym, so
// the collector carries no Python headers and serves 3.9 through 3.13 alike;
// only the stable parts of the C API are used (opaque PyObject pointers, the
// profile-function protocol, PyMethodDef's public layout).

#include <sys/types.h>

namespace memtool::collectors {

using PyObjectPtr = void*;
using PyFramePtr = void*;
using ProfileFunc = int (*)(PyObjectPtr, PyFramePtr, int, PyObjectPtr);

// The profile-function event codes (Include/cpython/pystate.h, stable since 2.x).
inline constexpr int kPyTraceCall = 0;
inline constexpr int kPyTraceReturn = 3;

struct PyMethodDefLayout {  // struct PyMethodDef
    const char* name;
    PyObjectPtr (*meth)(PyObjectPtr, PyObjectPtr);
    int flags;
    const char* doc;
};
inline constexpr int kMethVarargs = 0x0001;

struct CPythonApi {
    int (*IsInitialized)() = nullptr;
    int (*GILStateCheck)() = nullptr;
    int (*AtExit)(void (*)()) = nullptr;  // Py_AtExit: run last in Py_FinalizeEx
    void (*EvalSetProfile)(ProfileFunc, PyObjectPtr) = nullptr;
    void (*EvalSetProfileAllThreads)(ProfileFunc, PyObjectPtr) = nullptr;  // 3.12+
    PyFramePtr (*EvalGetFrame)() = nullptr;                                // borrowed
    PyFramePtr (*FrameGetBack)(PyFramePtr) = nullptr;                      // new reference
    PyObjectPtr (*FrameGetCode)(PyFramePtr) = nullptr;                     // new reference
    int (*FrameGetLineNumber)(PyFramePtr) = nullptr;  // reads the frame only; no GIL needed
    PyObjectPtr (*ObjectGetAttrString)(PyObjectPtr, const char*) = nullptr;
    const char* (*UnicodeAsUTF8AndSize)(PyObjectPtr, ssize_t*) = nullptr;
    long (*LongAsLong)(PyObjectPtr) = nullptr;
    void (*DecRef)(PyObjectPtr) = nullptr;
    PyObjectPtr (*ImportModule)(const char*) = nullptr;
    PyObjectPtr (*CFunctionNewEx)(PyMethodDefLayout*, PyObjectPtr, PyObjectPtr) = nullptr;
    PyObjectPtr (*ObjectCallMethodObjArgs)(PyObjectPtr, PyObjectPtr, ...) = nullptr;
    PyObjectPtr (*UnicodeFromString)(const char*) = nullptr;
    PyObjectPtr (*BuildValue)(const char*, ...) = nullptr;
    void (*ErrClear)() = nullptr;
    // Schedules a call on the main thread, between bytecodes (the GIL held); callable
    // from any thread without the GIL (Py_AddPendingCall). -1 when its queue is full.
    int (*AddPendingCall)(int (*)(void*), void*) = nullptr;
    void (*ErrFetch)(PyObjectPtr*, PyObjectPtr*, PyObjectPtr*) = nullptr;
    PyObjectPtr (*ObjectStr)(PyObjectPtr) = nullptr;

    // Resolves every symbol from the global scope; true when an interpreter is
    // linked into this process and all required functions were found.
    bool resolve();
    // Resolves only what safe points need (Py_IsInitialized, Py_AddPendingCall).
    bool resolvePendingCalls();
    // Resolves what calling a Python function from C needs (the GIL held):
    // import, call, strings, errors.
    bool resolveCalls();
    // Resolves Py_AtExit (collectors/ProgramEnd).
    bool resolveExit();
};

}  // namespace memtool::collectors
