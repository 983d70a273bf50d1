#include "collectors/stacks/PythonTracker.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "collectors/engine/Engine.h"
#include "collectors/engine/MappedTable.h"
#include "collectors/engine/NoDestroy.h"
#include "collectors/engine/ThreadState.h"
#include "collectors/stacks/CPythonApi.h"
#include "collectors/stacks/CPythonFrames.h"
#include "collectors/stacks/PythonFrameWalker.h"
#include "collectors/stacks/ShadowStack.h"

namespace memtool::collectors {

namespace {

// Test support: "broken" makes the frame layout read qualified names from the wrong
// place, so that tests see the self-check catch it and the profile function take over.
constexpr const char* kEnvTestLayout = "MEMTOOL_TEST_PYTHON_LAYOUT";

CPythonApi api;
bool resolved = false;
bool installed = false;
Engine* gEngine = nullptr;
constinit NoDestroy<CPythonFrames> gFrames;

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
        s->frames[s->depth] = ShadowFrame{frame, nullptr, nullptr, internCode(frame), 0, 0};
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

// The interpreter's code (the executable or libpython that holds its evaluation
// loop), so native unwinding can stop where it enters torch.
void findInterpreterCode(Engine& engine) {
    void* eval = dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault");
    uint64_t start = 0, end = 0;
    if (eval && StackCapture::codeRangeOf(eval, &start, &end))
        engine.capture().setInterpreterCode(start, end);
}

// The profile function's stack, as an allocation reads it.
ShadowStack* readShadowStack(ThreadState& ts, uint64_t generation, uint32_t* firstStale) {
    if (!ts.pythonSeen || ts.python.depth == 0) return nullptr;
    *firstStale = refreshLines(ts.python, generation);
    return &ts.python;
}

// The fallback: a C profile function on this thread (seeded with the frames
// running now) and, through threading.setprofile, on threads started later.
void installProfileFunction() {
    setLineReader(api.FrameGetLineNumber);
    api.EvalSetProfile(profile, nullptr);
    seedCurrentThread();
    setPythonStackReader(readShadowStack);
    api.callWithFunction("threading", "setprofile", &bootstrapDef);
}

// ---- the self-check ------------------------------------------------------------------
// Before frames are read at allocations, a chain of known frames is read both ways,
// directly and through the C API (PyEval_GetFrame, PyFrame_GetBack, PyFrame_GetCode,
// PyFrame_GetLineNumber, the code objects' attributes), and must agree frame by frame:
// code object, line, file, qualified name and first line. The check's Python code
// nests a method, a generator, a comprehension and a non-ASCII name.
constexpr const char* kCheckSource =
    "def _memtool_inner():\n"
    "    return _memtool_probe()\n"
    "\n"
    "\n"
    "def _memtool_\xc3\xbc"
    "n\xc3\xaf"
    "code():\n"
    "    return [_memtool_inner() for _ in (0,)][0]\n"
    "\n"
    "\n"
    "def _memtool_generator():\n"
    "    yield _memtool_\xc3\xbc"
    "n\xc3\xaf"
    "code()\n"
    "\n"
    "\n"
    "class _MemtoolCheck:\n"
    "    def method(self):\n"
    "        return next(_memtool_generator())\n"
    "\n"
    "\n"
    "_MemtoolCheck().method()\n";

bool gProbeRan = false;
const char* gCheckFailure = nullptr;

bool sameText(std::string_view expected, const char* got, size_t gotBytes) {
    return expected.size() == gotBytes && std::memcmp(expected.data(), got, gotBytes) == 0;
}

// One frame, both ways; the reason when they differ.
const char* compareFrame(PyFramePtr frame, const PyFrameRef& raw) {
    const CPythonFrames& frames = gFrames.value;
    PyObjectPtr code = api.FrameGetCode(frame);
    if (!code) {
        api.ErrClear();
        return "a frame without a code object";
    }
    const char* failure = nullptr;
    PyObjectPtr fileObj = nullptr, nameObj = nullptr, lineObj = nullptr;
    static char file[4096], name[1024];
    if (code != raw.code) {
        failure = "the frames read are not the interpreter's";
    } else if (static_cast<int>(frames.line(raw)) != api.FrameGetLineNumber(frame)) {
        failure = "the lines read are not the interpreter's";
    } else if (!sameText(utf8Attr(code, "co_filename", &fileObj), file,
                         frames.filename(code, file, sizeof file))) {
        failure = "the file names read are not the interpreter's";
    } else if (!sameText(utf8Attr(code, "co_qualname", &nameObj), name,
                         frames.qualname(code, name, sizeof name))) {
        failure = "the qualified names read are not the interpreter's";
    } else {
        lineObj = api.ObjectGetAttrString(code, "co_firstlineno");
        if (!lineObj) api.ErrClear();
        if (!lineObj || api.LongAsLong(lineObj) != frames.firstLine(code))
            failure = "the first lines read are not the interpreter's";
    }
    for (PyObjectPtr o : {lineObj, nameObj, fileObj, code})
        if (o) api.DecRef(o);
    return failure;
}

// Called by the check's Python code, GIL held, from its innermost frame.
PyObjectPtr probe(PyObjectPtr, PyObjectPtr) {
    gProbeRan = true;
    static PyFrameRef raw[ShadowStack::kCapacity];
    uint32_t n = 0;
    gFrames.value.walk([&](const PyFrameRef& f) {
        if (n < ShadowStack::kCapacity) raw[n] = f;
        ++n;
    });
    uint32_t i = 0;
    PyFramePtr f = api.EvalGetFrame();  // borrowed
    static char innermost[64];
    const size_t innermostBytes =
        n > 0 ? gFrames.value.qualname(raw[0].code, innermost, sizeof innermost) : 0;
    if (!sameText("_memtool_inner", innermost, innermostBytes))
        gCheckFailure = "the innermost frame read is not the one running";
    for (; f && !gCheckFailure; ++i) {
        if (i >= n || i >= ShadowStack::kCapacity) {
            gCheckFailure = "fewer frames read than the interpreter has";
            break;
        }
        gCheckFailure = compareFrame(f, raw[i]);
        PyFramePtr back = api.FrameGetBack(f);  // new reference; its frame holds another
        if (back) api.DecRef(back);
        f = back;
    }
    if (!gCheckFailure && i != n) gCheckFailure = "more frames read than the interpreter has";
    return api.BuildValue("");
}

PyMethodDefLayout probeDef{"_memtool_probe", probe, kMethVarargs, nullptr};

// GIL held: reads a known chain of frames both ways (see kCheckSource).
bool selfCheck(const char** why) {
    if (api.GILStateGetThisThreadState() != api.ThreadStateGet()) {
        *why = "the thread state found without the GIL is not the interpreter's";
        return false;
    }
    gProbeRan = false;
    gCheckFailure = nullptr;
    PyObjectPtr globals = api.DictNew();
    PyObjectPtr probeFn = api.CFunctionNewEx(&probeDef, nullptr, nullptr);
    PyObjectPtr result = nullptr;
    if (globals && probeFn &&
        api.DictSetItemString(globals, "__builtins__", api.EvalGetBuiltins()) == 0 &&
        api.DictSetItemString(globals, "_memtool_probe", probeFn) == 0)
        result = api.RunStringFlags(kCheckSource, kPyFileInput, globals, globals, nullptr);
    if (!result) api.ErrClear();
    for (PyObjectPtr o : {result, probeFn, globals})
        if (o) api.DecRef(o);
    if (!gProbeRan) {
        *why = "the self-check of the frame layout could not run";
        return false;
    }
    *why = gCheckFailure;
    return !gCheckFailure;
}

// Frames are read directly when this interpreter's layout is known and reads as
// its C API says.
bool readFramesChecked(const char** why) {
    api.resolveFrameReading();
    if (!gFrames.value.configure(api, why)) return false;
    const char* test = std::getenv(kEnvTestLayout);
    if (test && std::strcmp(test, "broken") == 0) gFrames.value.breakLayoutForTest();
    return selfCheck(why);
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
    findInterpreterCode(engine);

    const char* why = nullptr;
    if (readFramesChecked(&why)) {
        PythonFrameWalker::install(gFrames.value, engine);
        return;
    }
    const char* version = api.GetVersion ? api.GetVersion() : "";
    char warning[512];
    std::snprintf(warning, sizeof warning,
                  "Python stacks: %s (Python %.*s); they are recorded with a profile "
                  "function instead, which costs time on every Python call",
                  why, static_cast<int>(std::strcspn(version, " ")), version);
    engine.note(core::kNoteWarning, warning);
    installProfileFunction();
}

}  // namespace memtool::collectors
