#pragma once
// Symbolizes the native frames of every stream on one thread of its own, at the
// lowest priority, while the target runs: when the program ends, the trace is
// written from symbols already read instead of memtool reading libtorch's symbol
// tables then (tens of milliseconds after a training run's exit).
//
// The work is what the trace will do, done earlier, on a core the target leaves
// idle: each stack is named from its innermost frame out, up to where the trace
// stops showing frames (main, or the interpreter's innermost frame), so libc's
// start-up frames are never read. A symbolizer
// handed to it belongs to the worker until reclaim(): whoever needs its answers
// (the trace, `memtool ctl`, the live view) reclaims it first and uses it alone.

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cli/symbols/ElfSymbolizer.h"
#include "core/Records.h"

namespace memtool::cli {

class BackgroundSymbolizer {
public:
    BackgroundSymbolizer() = default;
    ~BackgroundSymbolizer();  // stops the worker and waits for it
    BackgroundSymbolizer(const BackgroundSymbolizer&) = delete;
    BackgroundSymbolizer& operator=(const BackgroundSymbolizer&) = delete;

    // Work for `symbolizer`: a module to know (before any frame), and stack-trie
    // nodes (their parent's id, their return address) whose stacks are to be
    // named, newest first. Ids count from 1 in the order they arrive, parents
    // first; `firstId` is the id of nodes[0]. A batch is queued whole, so the
    // stacks that arrived together are named from their innermost frames: the
    // worker never starts from a caller whose callees were still on their way.
    // `cutAtInterpreter`: Python frames stand in for the interpreter's.
    void addModule(ElfSymbolizer* symbolizer, core::SharedModule module);
    void addNodes(ElfSymbolizer* symbolizer, uint64_t firstId,
                  std::span<const core::NativeNodeRecord> nodes, bool cutAtInterpreter);
    // Takes `symbolizer` back: nothing more is done for it here, and the modules
    // still queued for it are added on the calling thread. Waits while the worker
    // is inside one of its calls.
    void reclaim(ElfSymbolizer* symbolizer);
    // Waits until everything queued so far is done (tests).
    void waitUntilIdle();

    // The run's one worker.
    static BackgroundSymbolizer& shared();

private:
    // One symbolizer's trie as far as it arrived: parent and address by id, and
    // which nodes were named or lie beyond a cut.
    struct Trie {
        std::vector<uint64_t> parent{0}, ip{0};
        std::vector<uint8_t> done{1};
        std::vector<uint64_t> pending;  // ids to start from, newest last
        bool cutAtInterpreter = false;
    };
    void start();
    void work();
    bool hasWork() const;
    // Names node `id`'s stack outward (the lock is dropped while naming).
    void nameStack(std::unique_lock<std::mutex>& lock, ElfSymbolizer* s, uint64_t id);

    std::mutex mu_;
    std::condition_variable wake_, idle_;
    // Modules queued, by symbolizer, in the order they came.
    std::unordered_map<ElfSymbolizer*, std::vector<core::SharedModule>> modules_;
    std::unordered_map<ElfSymbolizer*, Trie> tries_;
    ElfSymbolizer* busyWith_ = nullptr;
    bool stop_ = false;
    std::thread thread_;
};

}  // namespace memtool::cli
