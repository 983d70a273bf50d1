#pragma once
// Call stacks as trees, one per kind (native return addresses; Python code and
// line): each stack becomes the id of its innermost node, and each node new to the
// stream is written once as a node record. Ids are per stream: reset() starts a
// new stream (a new generation), and every per-thread cache of an older
// generation is stale. Generations are unique in the process, whichever
// interner took them. Not thread-safe: the engine calls it under its lock.

#include <cstdint>

#include "collectors/engine/MappedTable.h"
#include "collectors/engine/RecordWriter.h"
#include "collectors/engine/ThreadState.h"

namespace memtool::collectors {

class StackInterner {
public:
    uint64_t generation() const { return generation_; }
    void reset();
    // Nodes defined so far in this generation (a continuing stream takes them over).
    uint32_t nativeCount() const { return native_.size(); }
    uint32_t pythonCount() const { return python_.size(); }

    // `ips` innermost first. 0 for no stack. On running out of memory, the node of
    // the outer part that could be interned. `walkSerial`: the kept walk of the
    // thread's whose frames these are, in place (WalkMemo::resultSerial), or 0:
    // the same serial at the same `ips` as the thread's last stack is that stack,
    // without comparing frames.
    uint32_t native(ThreadState& ts, const uint64_t* ips, int count, uint64_t walkSerial,
                    RecordWriter& out);
    // Computes the nodes of frames [firstStale, recorded()) (see refreshLines);
    // returns the innermost frame's node, 0 for an empty stack.
    uint32_t python(ShadowStack& stack, uint32_t firstStale, RecordWriter& out);

private:
    FrameTrie native_;
    FrameTrie python_;
    uint64_t generation_ = 1;
};

}  // namespace memtool::collectors
