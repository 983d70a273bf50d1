#include "collectors/control/LiveTensors.h"

#include <algorithm>
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

// Notes stay small (the stream's buffer sends each at once): a list is cut at
// its spaces into pieces of at most this many bytes.
constexpr size_t kReachableNoteBytes = 4000;

// Sends `text` (hex addresses, each with its "@name", space-separated) as notes,
// then the count.
void sendReachable(Engine& engine, const char* text, size_t n) {
    char piece[kReachableNoteBytes + 1];
    size_t count = 0;
    for (size_t at = 0; at < n;) {
        size_t len = std::min(n - at, kReachableNoteBytes);
        if (at + len < n)
            while (len > 0 && text[at + len] != ' ') --len;  // cut before a space
        if (len == 0) return;                                // no address fits: send no count
        std::memcpy(piece, text + at, len);
        piece[len] = '\0';
        for (size_t i = 0; i < len; ++i)
            count += piece[i] != ' ' && (i == 0 || piece[i - 1] == ' ');
        engine.note(core::kNoteReachable, piece);
        at += len;
        while (at < n && text[at] == ' ') ++at;
    }
    char total[32];
    std::snprintf(total, sizeof total, "%zu", count);
    engine.note(core::kNoteReachableEnd, total);
}

// An exception ended the main module (sys.last_value is set): running Python code
// now (memtool's package, first imported here) cleared the interpreter's note of
// an unhandled KeyboardInterrupt, and a Ctrl-C'd program exited 1 instead of
// dying of SIGINT. Such a program's split stays unknown.
bool mainModuleRaised() {
    PyObjectPtr sys = gPython.ImportModule("sys");
    PyObjectPtr last = sys ? gPython.ObjectGetAttrString(sys, "last_value") : nullptr;
    if (!last) gPython.ErrClear();
    for (PyObjectPtr o : {sys, last})
        if (o) gPython.DecRef(o);
    return last != nullptr;
}

}  // namespace

void LiveTensors::noteReachable(Engine& engine) {
    // No stream, no split to send: the walk (most of a second for a large model)
    // would be for nothing.
    if (!engine.active()) return;
    // resolve() for ObjectGetAttrString, which resolveCalls() leaves out.
    static bool resolvedAll = false;
    if (!resolvedAll) resolvedAll = gPython.resolve() && gPython.resolveCalls();
    if (!resolvedAll || mainModuleRaised()) return;
    PyObjectPtr module = importLive();
    PyObjectPtr name = module ? gPython.UnicodeFromString("reachable_storages_text") : nullptr;
    PyObjectPtr result = name ? gPython.ObjectCallMethodObjArgs(module, name, nullptr) : nullptr;
    for (PyObjectPtr o : {module, name})
        if (o) gPython.DecRef(o);
    ssize_t n = 0;
    const char* text = result ? gPython.UnicodeAsUTF8AndSize(result, &n) : nullptr;
    if (text) sendReachable(engine, text, static_cast<size_t>(n));
    if (result) gPython.DecRef(result);
    if (!text) gPython.ErrClear();  // the split stays unknown; the program's exit goes on
}

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
