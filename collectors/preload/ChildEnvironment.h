#pragma once
// What a program's children need to be profiled too: memtool's variables, as this
// process was started with them. A program that starts a child with an
// environment of its own making (subprocess's env={...}, `env -i`, os.environ
// cleared before an exec, posix_spawn with a short list) would otherwise run it
// unseen. The exec and posix_spawn hooks complete the child's environment with
// what it lacks: a variable missing is added as this process had it, and the
// collector's entry of LD_PRELOAD (and the memtool package's of PYTHONPATH) goes
// first in the child's own list. Nothing the child has is removed or replaced.
//
// complete() runs in a vfork child (subprocess), in its parent's memory: it
// allocates nothing and takes no lock; the caller gives it room on its stack.

#include <cstddef>

namespace memtool::collectors {

class ChildEnvironment {
public:
    // From the environment at start-up (`env`, NAME=value strings up to a null),
    // under `memtool run` (MEMTOOL_SOCKET set); `collectorPath` is the path the
    // loader opened this library by. What does not fit is left out.
    void capture(char* const* env, const char* collectorPath);
    bool captured() const { return count_ > 0; }

    // Bytes of room complete() needs for `envp` (null: empty); 0 when it lacks
    // nothing and goes to the child as it is.
    size_t roomFor(char* const* envp) const;
    // `envp` completed, in `room` (roomFor(envp) bytes, aligned for pointers):
    // the array the child gets, null-terminated.
    char* const* complete(char* const* envp, void* room) const;

private:
    struct Variable {
        const char* whole = nullptr;  // NAME=value, as this process had it
        size_t nameBytes = 0;         // of NAME=
        // For a list (LD_PRELOAD, PYTHONPATH): memtool's entry, which the child's
        // own list gets first when it lacks it; null for a variable taken whole.
        const char* entry = nullptr;
        const char* separators = ":";
    };
    // What `envp` holds and lacks: its entries, the variables it lacks, and the
    // bytes of its lists completed.
    struct Shape {
        size_t entries = 0, added = 0, text = 0;
    };
    Shape shape(char* const* envp) const;
    // The child's variable of `v`'s name (its NAME=value), or null.
    static const char* find(char* const* envp, const Variable& v);
    // Bytes of a list the child has that lacks memtool's entry, as completed
    // (NAME=entry:theirs and its null); 0 when it has it or has no such variable.
    static size_t listBytes(const char* theirs, const Variable& v);

    static constexpr size_t kMaxVariables = 8;
    static constexpr size_t kTextBytes = 16384;
    Variable variables_[kMaxVariables];
    size_t count_ = 0;
    char text_[kTextBytes] = {};
    size_t used_ = 0;
    // Copies of `parts` (null-terminated list) into text_, as one string; null if it does not fit.
    const char* keep(const char* const* parts);
};

}  // namespace memtool::collectors
