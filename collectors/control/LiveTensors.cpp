#include "collectors/control/LiveTensors.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "collectors/control/SafePoint.h"
#include "collectors/engine/Engine.h"
#include "collectors/stacks/CPythonApi.h"
#include "core/CtlArgs.h"

namespace memtool::collectors::control {

namespace {

constexpr double kDefaultWaitS = 30;

CPythonApi gPython;
bool gResolved = false;
char gPackageDir[4096] = "";

// memtool's package, put in sys.modules as `memtool` from the directory memtool
// attach named, where the program's own path has none: sys.path stays as it was.
constexpr const char* kLoadPackage =
    "import sys\n"
    "if 'memtool' not in sys.modules:\n"
    "    import importlib.util\n"
    "    _spec = importlib.util.spec_from_file_location(\n"
    "        'memtool', _memtool_dir + '/memtool/__init__.py',\n"
    "        submodule_search_locations=[_memtool_dir + '/memtool'])\n"
    "    _module = importlib.util.module_from_spec(_spec)\n"
    "    sys.modules['memtool'] = _module\n"
    "    try:\n"
    "        _spec.loader.exec_module(_module)\n"
    "    except BaseException:\n"
    "        del sys.modules['memtool']\n"
    "        raise\n";

// memtool._live, imported; loaded from gPackageDir where the path has no memtool.
PyObjectPtr importLive() {
    PyObjectPtr module = gPython.ImportModule("memtool._live");
    if (module || !gPackageDir[0]) return module;
    gPython.ErrClear();
    if (!gPython.runSource(kLoadPackage, "_memtool_dir", gPackageDir)) return nullptr;
    return gPython.ImportModule("memtool._live");
}

struct Call {
    Engine* engine;
    uint64_t id;
    const char* device;  // null: every device
};

void replyText(Engine& engine, uint64_t id, core::ReplyStatus status, const char* text) {
    engine.reply(id, status, text, std::strlen(text));
}

// The failure of the Python call, as a one-line JSON answer (the GIL held).
void replyPythonError(const Call& c) {
    PyObjectPtr type = nullptr, value = nullptr, traceback = nullptr;
    gPython.ErrFetch(&type, &value, &traceback);
    char why[512] = "unknown error";
    if (PyObjectPtr text = value ? gPython.ObjectStr(value) : nullptr) {
        ssize_t n = 0;
        if (const char* s = gPython.UnicodeAsUTF8AndSize(text, &n)) {
            // Kept JSON-safe: quotes, backslashes and control bytes become spaces.
            size_t i = 0;
            for (; i + 1 < sizeof why && i < static_cast<size_t>(n); ++i)
                why[i] = s[i] == '"' || s[i] == '\\' || static_cast<unsigned char>(s[i]) < 0x20
                             ? ' '
                             : s[i];
            why[i] = '\0';
        }
        gPython.DecRef(text);
    }
    gPython.ErrClear();
    for (PyObjectPtr o : {type, value, traceback})
        if (o) gPython.DecRef(o);
    char out[768];
    std::snprintf(out, sizeof out,
                  "{\"error\":\"memtool's Python package could not list the tensors: %s\"}", why);
    replyText(*c.engine, c.id, core::ReplyStatus::Failed, out);
}

// On the main thread, the GIL held: memtool._live.visible_tensors_json(device).
void listOnMainThread(void* context) {
    const Call& c = *static_cast<const Call*>(context);
    PyObjectPtr module = importLive();
    if (!module) return replyPythonError(c);
    PyObjectPtr name = gPython.UnicodeFromString("visible_tensors_json");
    PyObjectPtr device = gPython.UnicodeFromString(c.device ? c.device : "");
    PyObjectPtr result =
        name && device ? gPython.ObjectCallMethodObjArgs(module, name, device, nullptr) : nullptr;
    for (PyObjectPtr o : {module, name, device})
        if (o) gPython.DecRef(o);
    if (!result) return replyPythonError(c);
    ssize_t n = 0;
    const char* text = gPython.UnicodeAsUTF8AndSize(result, &n);
    if (text)
        c.engine->reply(c.id, core::ReplyStatus::Ok, text, static_cast<size_t>(n));
    else
        replyPythonError(c);
    gPython.DecRef(result);
}

}  // namespace

void LiveTensors::command(size_t argc, const char* const* argv, Engine& engine, uint64_t id) {
    const char* device = nullptr;
    double waitS = kDefaultWaitS;
    for (size_t i = 1; i < argc; ++i) {
        const bool hasValue = i + 1 < argc;
        if (std::strcmp(argv[i], "--device") == 0 && hasValue &&
            core::isTensorDevice(argv[i + 1])) {
            device = argv[++i];
        } else if (std::strcmp(argv[i], "--wait") == 0 && hasValue &&
                   core::parseWaitSeconds(argv[i + 1], &waitS)) {
            ++i;
        } else {
            return replyText(engine, id, core::ReplyStatus::Refused,
                             "{\"error\":\"tensors takes [--device cpu|cuda:N] [--wait SECONDS] "
                             "(seconds above 0, at most 10000000)\"}");
        }
    }
    if (!gResolved) gResolved = gPython.resolveCalls();
    if (!gResolved)
        return replyText(
            engine, id, core::ReplyStatus::Refused,
            "{\"error\":\"this program runs no Python interpreter: there are no Python "
            "tensors to list\"}");
    Call call{&engine, id, device};
    char out[512];
    switch (safePoint_.run(listOnMainThread, &call, static_cast<uint64_t>(waitS * 1e9))) {
        case SafePoint::Outcome::Ran:
            return;  // it replied
        case SafePoint::Outcome::TimedOut:
            std::snprintf(
                out, sizeof out,
                "{\"error\":\"the program's main thread did not reach a safe point within %g s "
                "(it may be blocked in a system call: a sleep, I/O, a lock)\"}",
                waitS);
            return replyText(engine, id, core::ReplyStatus::Failed, out);
        case SafePoint::Outcome::NoSafePoints:
            return replyText(engine, id, core::ReplyStatus::Refused,
                             "{\"error\":\"this program runs no Python interpreter: there are no "
                             "Python tensors to list\"}");
        case SafePoint::Outcome::Busy:
        case SafePoint::Outcome::Parked:  // not an outcome of run()
            return replyText(engine, id, core::ReplyStatus::Failed,
                             "{\"error\":\"the program is parked (yielded) or busy with another "
                             "command; try again after restore\"}");
    }
}

void LiveTensors::setPackageDirectory(const char* dir) {
    if (!dir) return;
    std::strncpy(gPackageDir, dir, sizeof gPackageDir - 1);
    gPackageDir[sizeof gPackageDir - 1] = '\0';
}

}  // namespace memtool::collectors::control
