#include "collectors/stacks/CPythonApi.h"

#include <dlfcn.h>

#include <initializer_list>

namespace memtool::collectors {

namespace {
template <typename F>
bool find(F& fn, const char* name) {
    fn = reinterpret_cast<F>(dlsym(RTLD_DEFAULT, name));
    return fn != nullptr;
}
}  // namespace

bool CPythonApi::resolve() {
    bool ok = find(IsInitialized, "Py_IsInitialized") && find(GILStateCheck, "PyGILState_Check") &&
              find(EvalSetProfile, "PyEval_SetProfile") && find(EvalGetFrame, "PyEval_GetFrame") &&
              find(FrameGetBack, "PyFrame_GetBack") && find(FrameGetCode, "PyFrame_GetCode") &&
              find(FrameGetLineNumber, "PyFrame_GetLineNumber") &&
              find(ObjectGetAttrString, "PyObject_GetAttrString") &&
              find(UnicodeAsUTF8AndSize, "PyUnicode_AsUTF8AndSize") &&
              find(LongAsLong, "PyLong_AsLong") && find(DecRef, "Py_DecRef") &&
              find(ImportModule, "PyImport_ImportModule") &&
              find(CFunctionNewEx, "PyCFunction_NewEx") &&
              find(ObjectCallMethodObjArgs, "PyObject_CallMethodObjArgs") &&
              find(UnicodeFromString, "PyUnicode_FromString") &&
              find(BuildValue, "Py_BuildValue") && find(ErrClear, "PyErr_Clear");
    find(EvalSetProfileAllThreads, "PyEval_SetProfileAllThreads");  // optional
    find(GetVersion, "Py_GetVersion");
    return ok && resolvePendingCalls();
}

bool CPythonApi::resolveFrameReading() {
    if (!find(IsFinalizing, "Py_IsFinalizing")) find(IsFinalizing, "_Py_IsFinalizing");
    codeType = dlsym(RTLD_DEFAULT, "PyCode_Type");
    unicodeType = dlsym(RTLD_DEFAULT, "PyUnicode_Type");
    return find(GILStateGetThisThreadState, "PyGILState_GetThisThreadState") &&
           find(ThreadStateGet, "PyThreadState_Get") && IsFinalizing &&
           find(CodeAddr2Line, "PyCode_Addr2Line") && codeType && unicodeType &&
           find(DictNew, "PyDict_New") && find(DictSetItemString, "PyDict_SetItemString") &&
           find(EvalGetBuiltins, "PyEval_GetBuiltins") && find(RunStringFlags, "PyRun_StringFlags");
}

bool CPythonApi::resolveCalls() {
    return find(ImportModule, "PyImport_ImportModule") &&
           find(ObjectCallMethodObjArgs, "PyObject_CallMethodObjArgs") &&
           find(UnicodeFromString, "PyUnicode_FromString") &&
           find(UnicodeAsUTF8AndSize, "PyUnicode_AsUTF8AndSize") && find(DecRef, "Py_DecRef") &&
           find(ErrClear, "PyErr_Clear") && find(ErrFetch, "PyErr_Fetch") &&
           find(ObjectStr, "PyObject_Str");
}

bool CPythonApi::runSource(const char* source, const char* name, const char* value) {
    if (!find(DictNew, "PyDict_New") || !find(DictSetItemString, "PyDict_SetItemString") ||
        !find(EvalGetBuiltins, "PyEval_GetBuiltins") || !find(RunStringFlags, "PyRun_StringFlags"))
        return false;
    PyObjectPtr globals = DictNew();
    PyObjectPtr text = UnicodeFromString(value);
    PyObjectPtr result = nullptr;
    if (globals && text && DictSetItemString(globals, "__builtins__", EvalGetBuiltins()) == 0 &&
        DictSetItemString(globals, name, text) == 0)
        result = RunStringFlags(source, kPyFileInput, globals, globals, nullptr);
    for (PyObjectPtr o : {result, text, globals})
        if (o) DecRef(o);
    return result != nullptr;
}

bool CPythonApi::callWithFunction(const char* module, const char* method, PyMethodDefLayout* def) {
    PyObjectPtr target = ImportModule(module);
    PyObjectPtr function = CFunctionNewEx(def, nullptr, nullptr);
    PyObjectPtr name = UnicodeFromString(method);
    PyObjectPtr result = nullptr;
    if (target && function && name)
        result = ObjectCallMethodObjArgs(target, name, function, nullptr);
    if (!result) ErrClear();
    for (PyObjectPtr o : {result, name, function, target})
        if (o) DecRef(o);
    return result != nullptr;
}

bool CPythonApi::resolvePendingCalls() {
    find(GILStateEnsure, "PyGILState_Ensure");
    find(GILStateRelease, "PyGILState_Release");
    find(GetVersion, "Py_GetVersion");
    if (!find(IsFinalizing, "Py_IsFinalizing")) find(IsFinalizing, "_Py_IsFinalizing");
    return find(IsInitialized, "Py_IsInitialized") && find(AddPendingCall, "Py_AddPendingCall");
}

}  // namespace memtool::collectors
