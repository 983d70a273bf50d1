#pragma once
// The seam to CPython's API (its private layouts are CPythonFrames'). Functions
// are looked up at run time with dlsym, so the collector carries no Python
// headers and serves 3.9 through 3.13 alike; only public parts of the C API are
// used (opaque PyObject pointers, the profile-function protocol, PyMethodDef's
// public layout), and _Py_IsFinalizing where Py_IsFinalizing is not public yet.

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
inline constexpr int kPyFileInput = 257;  // Py_file_input, for PyRun_StringFlags

struct CPythonApi {
    int (*IsInitialized)() = nullptr;
    int (*GILStateCheck)() = nullptr;
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
    // Taking the GIL from a thread of memtool's own and giving it back
    // (PyGILState_Ensure, PyGILState_Release; their state is an int-sized enum).
    int (*GILStateEnsure)() = nullptr;
    void (*GILStateRelease)(int) = nullptr;
    PyObjectPtr (*ObjectStr)(PyObjectPtr) = nullptr;

    // ---- for reading frames directly (CPythonFrames); each may be missing -------
    // The calling thread's own thread state, GIL held or not: the gilstate TLS slot
    // (PyGILState_GetThisThreadState reads it without locking, in 3.11 to 3.13).
    PyObjectPtr (*GILStateGetThisThreadState)() = nullptr;
    PyObjectPtr (*ThreadStateGet)() = nullptr;  // the GIL holder's (PyThreadState_Get)
    int (*IsFinalizing)() = nullptr;            // Py_IsFinalizing (3.13) or _Py_IsFinalizing
    // Line of a code object's instruction at byte offset `offset`; reads only the
    // code object's immutable line table (the frame's line, as PyFrame_GetLineNumber
    // computes it).
    int (*CodeAddr2Line)(PyObjectPtr code, int offset) = nullptr;
    const char* (*GetVersion)() = nullptr;  // Py_GetVersion: "3.11.2 (main, ...)"
    const void* codeType = nullptr;         // &PyCode_Type
    const void* unicodeType = nullptr;      // &PyUnicode_Type
    // For the self-check, which runs a little Python code of its own.
    PyObjectPtr (*DictNew)() = nullptr;
    int (*DictSetItemString)(PyObjectPtr, const char*, PyObjectPtr) = nullptr;
    PyObjectPtr (*EvalGetBuiltins)() = nullptr;  // borrowed
    PyObjectPtr (*RunStringFlags)(const char*, int, PyObjectPtr, PyObjectPtr, void*) = nullptr;

    // Resolves every symbol from the global scope; true when an interpreter is
    // linked into this process and all required functions were found.
    bool resolve();
    // Resolves only what safe points need (Py_IsInitialized, Py_AddPendingCall),
    // and, where they are, what waking the main thread up needs (PyGILState_Ensure
    // and _Release, Py_GetVersion, Py_IsFinalizing or _Py_IsFinalizing).
    bool resolvePendingCalls();
    // Resolves what reading frames directly needs; false when any is missing.
    bool resolveFrameReading();
    // Resolves what calling a Python function from C needs (the GIL held):
    // import, call, strings, errors.
    bool resolveCalls();

    // module.method(f) with f a C function built from `def` (atexit.register,
    // threading.setprofile), the GIL held, after resolve(). False when any step
    // failed; the Python error is cleared either way.
    bool callWithFunction(const char* module, const char* method, PyMethodDefLayout* def);
    // Runs `source` as a module's code in a namespace of its own, where `name` is
    // the string `value` (the GIL held, after resolveCalls()). False when it raised;
    // the Python error is left set then.
    bool runSource(const char* source, const char* name, const char* value);
};

}  // namespace memtool::collectors
