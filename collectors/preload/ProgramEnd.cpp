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

// --modules: memtool's package hooks torch.nn's modules from when it is imported.
// Through PyDLL, whose calls keep the GIL: a hook that let it go at every module
// and node would hand it to the program's other threads, and wait to get it back.
void armModuleScopes(Engine& e) {
    constexpr const char* kArm =
        "import ctypes\n"
        "import memtool._modules\n"
        "memtool._modules.arm(ctypes.PyDLL(None))\n";
    if (api.runSource(kArm, "_memtool_unused", "")) return;
    api.ErrClear();
    e.note(core::kNoteWarning,
           "--modules: memtool's Python package could not be imported here; the modules are "
           "not named");
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
    if (e.options().moduleScopes) armModuleScopes(e);
}

MainFunction wrapMain(MainFunction realMain) {
    gRealMain = realMain;
    return mainThenMark;
}

}  // namespace memtool::collectors::programEnd
