#pragma once
// The Python front end: keeps each Python thread's shadow stack (ShadowStack.h)
// with a C profile function, installed once an interpreter is running and memtool
// is recording, and interns code objects as wire ids through the engine.

namespace memtool::collectors {

class Engine;

class PythonTracker {
public:
    // Installs the profile function on this thread (seeding its shadow stack with
    // the frames already running) and, through threading.setprofile, on threads
    // started later. Needs the GIL; a no-op until then or without an interpreter.
    static void tryInstall(Engine& engine);
};

}  // namespace memtool::collectors
