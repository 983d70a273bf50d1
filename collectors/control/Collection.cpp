#include "collectors/control/Collection.h"

#include <malloc.h>

#include <cstring>

#include "collectors/control/JsonWriter.h"
#include "collectors/control/ResidentBytes.h"
#include "collectors/control/SafePoint.h"
#include "collectors/engine/MonotonicClock.h"
#include "collectors/engine/RecursionGuard.h"
#include "collectors/stacks/CPythonApi.h"
#include "core/CtlArgs.h"
#include "core/Protocol.h"

namespace memtool::collectors::control {

namespace {

constexpr double kDefaultWaitS = 10;

CPythonApi gPython;
int gResolved = 0;  // 0 not tried, 1 resolved, -1 no interpreter

// On the main thread, the GIL held.
void collectOnMainThread(void* ok) {
    *static_cast<bool*>(ok) = gPython.runSource("import gc\ngc.collect()\n", "_memtool", "gc");
    if (!*static_cast<bool*>(ok)) gPython.ErrClear();
}

}  // namespace

uint8_t Collection::command(size_t argc, const char* const* argv, char* out, size_t size) {
    double waitS = kDefaultWaitS;
    for (size_t i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--wait") == 0 && i + 1 < argc &&
            core::parseWaitSeconds(argv[i + 1], &waitS)) {
            ++i;
            continue;
        }
        JsonWriter j(out, size);
        j.open('{');
        j.key("ok").value(false);
        j.key("message").value("gc takes [--wait SECONDS]");
        j.close('}');
        return static_cast<uint8_t>(core::ReplyStatus::Refused);
    }
    const uint64_t start = monotonicNs();
    const uint64_t before = residentBytes();
    if (gResolved == 0) gResolved = gPython.resolveCalls() ? 1 : -1;
    bool python = false;
    const char* message = "";
    if (gResolved > 0) {
        bool ran = false;
        switch (safePoint_.run(collectOnMainThread, &ran, static_cast<uint64_t>(waitS * 1e9))) {
            case SafePoint::Outcome::Ran:
                python = ran;
                if (!ran) message = "gc.collect() raised; the caches were emptied all the same";
                break;
            case SafePoint::Outcome::TimedOut:
                message = "the main thread reached no safe point in time: no gc.collect()";
                break;
            default:
                message = "no safe point to run gc.collect() at";
                break;
        }
    }
    // What the cache gives back is the program's memory, recorded as such though
    // the control thread asks (as Courtesy's yield does).
    if (emptyCache_) {
        ProgramEvents program;
        emptyCache_();
    }
    const bool trimmed = malloc_trim(0) != 0;
    const uint64_t after = residentBytes();
    JsonWriter j(out, size);
    j.open('{');
    j.key("ok").value(true);
    j.key("action").value("gc");
    j.key("python_gc").value(python);
    j.key("torch_cache_asked").value(emptyCache_ != nullptr);
    j.key("trimmed").value(trimmed);
    j.key("bytes").value(before > after ? before - after : uint64_t{0});
    j.key("seconds").value(static_cast<double>(monotonicNs() - start) / 1e9);
    j.key("message").value(message);
    j.close('}');
    return static_cast<uint8_t>(core::ReplyStatus::Ok);
}

}  // namespace memtool::collectors::control
