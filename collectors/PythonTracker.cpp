#include "collectors/PythonTracker.h"

#include <dlfcn.h>
#include <link.h>

#include <string_view>

#include "collectors/CPythonApi.h"
#include "collectors/Engine.h"
#include "collectors/MappedTable.h"
#include "collectors/NoDestroy.h"
#include "collectors/ShadowStack.h"
#include "collectors/ThreadState.h"

namespace memtool::collectors {

namespace {

CPythonApi api;
bool resolved = false;
bool installed = false;
Engine* gEngine = nullptr;

// Code object -> (stream generation << 32 | wire id). Touched only with the GIL
// held. Each interned code object keeps one reference, so its address is never
// reused for another one.
constinit NoDestroy<PointerMap> gCodeIds;
PointerMap& codeIds = gCodeIds.value;

std::string_view utf8Attr(PyObjectPtr obj, const char* name, PyObjectPtr* holder) {
    *holder = api.ObjectGetAttrString(obj, name);
    if (!*holder) {
        api.ErrClear();
        return {};
    }
    ssize_t len = 0;
    const char* s = api.UnicodeAsUTF8AndSize(*holder, &len);
    if (!s) {
        api.ErrClear();
        return {};
    }
    return {s, static_cast<size_t>(len)};
}

uint32_t internCode(PyFramePtr frame) {
    PyObjectPtr code = api.FrameGetCode(frame);
    if (!code) return 0;
    const uint64_t generation = gEngine->generation();
    const uint64_t key = reinterpret_cast<uint64_t>(code);
    uint64_t entry = 0;
    const bool known = codeIds.find(key, &entry);
    if (known && entry >> 32 == generation) {
        api.DecRef(code);
        return static_cast<uint32_t>(entry);
    }
    PyObjectPtr fileObj, nameObj, lineObj;
    std::string_view file = utf8Attr(code, "co_filename", &fileObj);
    // co_qualname (3.11+) names methods as Class.method; co_name before that.
    std::string_view name = utf8Attr(code, "co_qualname", &nameObj);
    if (!nameObj) name = utf8Attr(code, "co_name", &nameObj);
    long firstLine = 0;
    lineObj = api.ObjectGetAttrString(code, "co_firstlineno");
    if (lineObj) {
        firstLine = api.LongAsLong(lineObj);
        api.DecRef(lineObj);
    } else {
        api.ErrClear();
    }
    const uint32_t id = gEngine->pyCode(file.data(), file.size(), name.data(), name.size(),
                                        static_cast<uint64_t>(firstLine < 0 ? 0 : firstLine));
    if (fileObj) api.DecRef(fileObj);
    if (nameObj) api.DecRef(nameObj);
    codeIds.insert(key, generation << 32 | id);
    if (known) api.DecRef(code);  // the map holds one reference already
    return id;
}

void push(ShadowStack* s, PyFramePtr frame) {
    // The caller may have moved to another line since it was last read: mark it
    // stale. Its line is read at the next allocation (most calls see none).
    if (s->depth > 0 && s->depth <= ShadowStack::kCapacity) s->frames[s->depth - 1].node = 0;
    if (s->depth < ShadowStack::kCapacity)
        s->frames[s->depth] = ShadowFrame{frame, internCode(frame), 0, 0};
    ++s->depth;
}

void pop(ShadowStack* s, PyFramePtr frame) {
    if (s->depth == 0) return;
    if (s->depth > ShadowStack::kCapacity) {
        --s->depth;
        return;
    }
    // Normally the top; a frame seeded late may be missing, so look a little deeper.
    for (uint32_t d = s->depth; d > 0 && s->depth - d < 8; --d) {
        if (s->frames[d - 1].frame == frame) {
            s->depth = d - 1;
            return;
        }
    }
}

// This thread's shadow stack, made on its first Python event.
ShadowStack* ownStack() {
    ThreadState* ts = threadState();
    if (!ts) return nullptr;
    ts->pythonSeen = true;
    return &ts->python;
}

int profile(PyObjectPtr, PyFramePtr frame, int what, PyObjectPtr) {
    if (what == kPyTraceCall) {
        if (ShadowStack* s = ownStack()) push(s, frame);
    } else if (what == kPyTraceReturn) {
        if (ShadowStack* s = currentShadowStack()) pop(s, frame);
    }
    return 0;
}

// Rebuilds this thread's shadow stack from the frames running now.
void seedCurrentThread() {
    ShadowStack* s = ownStack();
    if (!s) return;
    s->depth = 0;
    PyFramePtr chain[ShadowStack::kCapacity];
    uint32_t n = 0;
    PyFramePtr f = api.EvalGetFrame();  // borrowed
    while (f && n < ShadowStack::kCapacity) {
        chain[n++] = f;
        PyFramePtr back = api.FrameGetBack(f);  // new reference; the frame outlives it
        if (back) api.DecRef(back);
        f = back;
    }
    for (uint32_t i = n; i > 0; --i) push(s, chain[i - 1]);
}

// threading.setprofile hook: the first event of a new thread lands here; from then
// on the C profile function takes over for that thread.
PyObjectPtr threadBootstrap(PyObjectPtr, PyObjectPtr) {
    api.EvalSetProfile(profile, nullptr);
    seedCurrentThread();
    return api.BuildValue("");
}

PyMethodDefLayout bootstrapDef{"_memtool_thread_profile", threadBootstrap, kMethVarargs, nullptr};

// The interpreter loop's extent, so native unwinding can stop at it.
void findInterpreterLoop(Engine& engine) {
    void* eval = dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault");
    if (!eval) return;
    Dl_info info;
    void* entry = nullptr;  // const ElfW(Sym)*
    if (!dladdr1(eval, &info, &entry, RTLD_DL_SYMENT) || !entry) return;
    const auto* sym = static_cast<const ElfW(Sym)*>(entry);
    if (sym->st_size == 0) return;
    const uint64_t start = reinterpret_cast<uint64_t>(eval);
    engine.capture().setInterpreterLoop(start, start + sym->st_size);
}

}  // namespace

void PythonTracker::tryInstall(Engine& engine) {
    if (installed) return;
    if (!resolved) {
        if (!api.resolve()) return;  // no interpreter in this process (yet)
        resolved = true;
    }
    if (!api.IsInitialized() || !api.GILStateCheck()) return;
    installed = true;
    gEngine = &engine;
    setLineReader(api.FrameGetLineNumber);
    findInterpreterLoop(engine);

    api.EvalSetProfile(profile, nullptr);
    seedCurrentThread();

    PyObjectPtr threading = api.ImportModule("threading");
    PyObjectPtr hook = api.CFunctionNewEx(&bootstrapDef, nullptr, nullptr);
    PyObjectPtr method = api.UnicodeFromString("setprofile");
    PyObjectPtr result = nullptr;
    if (threading && hook && method)
        result = api.ObjectCallMethodObjArgs(threading, method, hook, nullptr);
    if (!result) api.ErrClear();
    for (PyObjectPtr o : {result, method, hook, threading})
        if (o) api.DecRef(o);
}

}  // namespace memtool::collectors
