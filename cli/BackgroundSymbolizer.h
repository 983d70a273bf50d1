#pragma once
// Symbolizes the native frames of every stream on one thread of its own, at the
// lowest priority, while the target runs: when the program ends, the trace is
// written from symbols already read instead of memtool reading libtorch's symbol
// tables then (tens of milliseconds after a training run's exit).
//
// The work is the same the trace would cost (every frame of every recorded stack
// is in the trace), done earlier, on a core the target leaves idle. A symbolizer
// handed to it belongs to the worker until reclaim(): whoever needs its answers
// (the trace, `memtool ctl`, the live view) reclaims it first and uses it alone.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>

#include "cli/ElfSymbolizer.h"
#include "core/Records.h"

namespace memtool::cli {

class BackgroundSymbolizer {
public:
    BackgroundSymbolizer() = default;
    ~BackgroundSymbolizer();  // stops the worker and waits for it
    BackgroundSymbolizer(const BackgroundSymbolizer&) = delete;
    BackgroundSymbolizer& operator=(const BackgroundSymbolizer&) = delete;

    // Work for `symbolizer`, done in order: a module to know, an address to name.
    void addModule(ElfSymbolizer* symbolizer, const core::ModuleRecord& module);
    void warm(ElfSymbolizer* symbolizer, uint64_t ip);
    // Takes `symbolizer` back: nothing more is done for it here, and the modules
    // still queued for it are added on the calling thread. Waits while the worker
    // is inside one of its calls.
    void reclaim(ElfSymbolizer* symbolizer);
    // Waits until everything queued so far is done (tests).
    void waitUntilIdle();

    // The run's one worker.
    static BackgroundSymbolizer& shared();

private:
    struct Item {
        ElfSymbolizer* symbolizer;
        bool isModule;
        core::ModuleRecord module;
        uint64_t ip;
    };
    void push(Item item);
    void work();

    std::mutex mu_;
    std::condition_variable wake_, idle_;
    std::deque<Item> queue_;
    ElfSymbolizer* busyWith_ = nullptr;
    bool stop_ = false;
    std::thread thread_;
};

}  // namespace memtool::cli
