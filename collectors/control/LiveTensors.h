#pragma once
// `memtool ctl PID tensors [--device D] [--wait S]`: the tensors Python can reach,
// named (python/memtool/_live.py), listed on the program's main thread at a safe
// point (SafePoint::run), never in a hook, a signal handler or under an allocator
// lock. The answer is the Python function's JSON text, sent up the stream as the
// request's reply whatever its size; `memtool run` adds what Python cannot see
// before `memtool ctl` prints it.

#include <cstddef>
#include <cstdint>

namespace memtool::collectors {
class Engine;
}

namespace memtool::collectors::control {

class SafePoint;

class LiveTensors {
public:
    constexpr explicit LiveTensors(SafePoint& safePoint) : safePoint_(safePoint) {}
    LiveTensors(const LiveTensors&) = delete;
    LiveTensors& operator=(const LiveTensors&) = delete;

    // Answers request `id` itself (a reply of any size through `engine`).
    void command(size_t argc, const char* const* argv, Engine& engine, uint64_t id);
    // Where memtool's Python package is (the directory that holds memtool/), for a
    // program whose path does not lead there (memtool attach's): the package is
    // loaded from it, as `memtool`, when the tensors are first listed. Copied.
    static void setPackageDirectory(const char* dir);
    // As the interpreter begins to finalize (the GIL held, before the program-end
    // note): the storage addresses of the tensors the program's globals still
    // reach (memtool._live.reachable_storages), as core::kNoteReachable notes and
    // one core::kNoteReachableEnd with their count. Sends nothing where Python
    // cannot list them (no torch, no package): the CLI then knows no split.
    static void noteReachable(Engine& engine);

private:
    SafePoint& safePoint_;
};

}  // namespace memtool::collectors::control
