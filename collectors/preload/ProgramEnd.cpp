#include "collectors/preload/ProgramEnd.h"

#include <cstdlib>

#include "collectors/Collector.h"
#include "collectors/control/LiveTensors.h"
#include "collectors/engine/Engine.h"
#include "collectors/stacks/CPythonApi.h"

namespace memtool::collectors::programEnd {

namespace {

CPythonApi api;
bool resolved = false;
bool installed = false;
MainFunction gRealMain = nullptr;

// The first moment wins: Python's note comes before main returns in python3.
void mark(const char* how) { engine().note(core::kNoteProgramEnd, how); }

PyObjectPtr atexitHook(PyObjectPtr, PyObjectPtr) {
    // Before the mark: the CLI splits what is live there by this list.
    control::LiveTensors::noteReachable(engine());
    mark(core::kProgramEndPython);
    return api.BuildValue("");
}

PyMethodDefLayout atexitDef{"_memtool_program_end", atexitHook, kMethVarargs, nullptr};

void exitCalled() { mark(core::kProgramEndExit); }

int mainThenMark(int argc, char** argv, char** envp) {
    // exit() inside main runs the atexit handlers registered after this one first
    // (the program's own), then this, then the destructors of static objects.
    atexit(exitCalled);
    const int status = gRealMain(argc, argv, envp);
    mark(core::kProgramEndExit);
    return status;
}

}  // namespace

void tryInstallPython(Engine& e) {
    if (installed || !e.active()) return;
    if (!resolved) {
        if (!api.resolve()) return;  // no interpreter (yet)
        resolved = true;
    }
    if (!api.IsInitialized() || !api.GILStateCheck()) return;
    installed = true;
    api.callWithFunction("atexit", "register", &atexitDef);
}

MainFunction wrapMain(MainFunction realMain) {
    gRealMain = realMain;
    return mainThenMark;
}

}  // namespace memtool::collectors::programEnd
