#pragma once
// Python stacks read at the allocation: the allocating thread's own interpreter
// frames (CPythonFrames), compared with what its previous allocation saw
// (ShadowStack) so that only the frames that changed get a line and a trie node,
// and code objects interned once per stream. Nothing runs between allocations,
// and every thread that runs Python has frames, however it started.

namespace memtool::collectors {

class CPythonFrames;
class Engine;

class PythonFrameWalker {
public:
    // From now on allocations read their frames through `frames` (configured and
    // self-checked; it must outlive the process's tracking) and intern code
    // objects through `engine`.
    static void install(const CPythonFrames& frames, Engine& engine);
};

}  // namespace memtool::collectors
