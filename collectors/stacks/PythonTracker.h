#pragma once
// The Python front end, started once an interpreter is running and memtool is
// recording. Where the interpreter's frame layout is known (CPythonFrames) and
// passes a self-check, allocations read their thread's frames directly
// (PythonFrameWalker) and nothing runs between them. Elsewhere each Python
// thread's shadow stack (ShadowStack.h) is kept by a C profile function, and the
// trace says so in a warning.

namespace memtool::collectors {

class Engine;

class PythonTracker {
public:
    // Chooses how Python stacks are read (see above) and starts it: for the profile
    // function, on this thread (seeding its shadow stack with the frames already
    // running) and, through threading.setprofile, on threads started later. Needs
    // the GIL; a no-op until then or without an interpreter.
    static void tryInstall(Engine& engine);
};

}  // namespace memtool::collectors
