#include "cli/symbols/BackgroundSymbolizer.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "trace/TraceBuilder.h"

namespace memtool::cli {

BackgroundSymbolizer& BackgroundSymbolizer::shared() {
    static BackgroundSymbolizer worker;
    return worker;
}

BackgroundSymbolizer::~BackgroundSymbolizer() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
        modules_.clear();
        tries_.clear();
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void BackgroundSymbolizer::start() {
    // Started with the first work, after memtool run has launched its program:
    // a fork with this thread running would give the child its locks.
    if (!thread_.joinable()) thread_ = std::thread([this] { work(); });
}

void BackgroundSymbolizer::addModule(ElfSymbolizer* symbolizer, core::SharedModule module) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) return;
        start();
        modules_[symbolizer].push_back(std::move(module));
    }
    wake_.notify_one();
}

void BackgroundSymbolizer::addNodes(ElfSymbolizer* symbolizer, uint64_t firstId,
                                    std::span<const core::NativeNodeRecord> nodes,
                                    bool cutAtInterpreter) {
    if (nodes.empty()) return;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) return;
        Trie& t = tries_[symbolizer];
        if (firstId != t.ip.size()) return;  // not the next nodes: left to the trace
        start();
        t.cutAtInterpreter = cutAtInterpreter;
        uint64_t id = firstId;
        for (const core::NativeNodeRecord& n : nodes) {
            if (n.parent >= id) break;  // not a trie: the rest is left to the trace
            t.parent.push_back(n.parent);
            t.ip.push_back(n.ip);
            t.done.push_back(0);
            t.pending.push_back(id++);
        }
    }
    wake_.notify_one();
}

void BackgroundSymbolizer::reclaim(ElfSymbolizer* symbolizer) {
    std::vector<core::SharedModule> mine;
    {
        std::unique_lock<std::mutex> lock(mu_);
        idle_.wait(lock, [&] { return busyWith_ != symbolizer; });
        tries_.erase(symbolizer);
        if (auto it = modules_.find(symbolizer); it != modules_.end()) {
            mine = std::move(it->second);
            modules_.erase(it);
        }
    }
    for (core::SharedModule& m : mine) symbolizer->addModule(std::move(m));
}

void BackgroundSymbolizer::waitUntilIdle() {
    std::unique_lock<std::mutex> lock(mu_);
    idle_.wait(lock, [&] { return stop_ || (!hasWork() && busyWith_ == nullptr); });
}

bool BackgroundSymbolizer::hasWork() const {
    if (!modules_.empty()) return true;
    for (const auto& [s, t] : tries_)
        if (!t.pending.empty()) return true;
    return false;
}

void BackgroundSymbolizer::nameStack(std::unique_lock<std::mutex>& lock, ElfSymbolizer* s,
                                     uint64_t id) {
    for (uint64_t n = id;;) {
        auto it = tries_.find(s);
        if (it == tries_.end() || n == 0 || it->second.done[n]) return;
        it->second.done[n] = 1;
        const uint64_t ip = it->second.ip[n];
        const bool cutAtInterpreter = it->second.cutAtInterpreter;
        lock.unlock();
        const std::vector<core::Frame>& frames = s->symbolize(ip);
        const bool cut = !frames.empty() && endsShownStack(frames.back(), cutAtInterpreter);
        lock.lock();
        it = tries_.find(s);  // reclaimed meanwhile: gone
        if (it == tries_.end()) return;
        if (cut) {  // what lies beyond is never shown
            for (uint64_t a = it->second.parent[n]; a != 0 && !it->second.done[a];
                 a = it->second.parent[a])
                it->second.done[a] = 1;
            return;
        }
        n = it->second.parent[n];
    }
}

void BackgroundSymbolizer::work() {
    // Only a core the target leaves idle: nice 19 for this thread alone.
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        wake_.wait(lock, [&] { return stop_ || hasWork(); });
        if (stop_) return;
        try {
            if (!modules_.empty()) {  // before any frame: a frame's module came first
                auto first = modules_.begin();
                ElfSymbolizer* s = first->first;
                std::vector<core::SharedModule> queued = std::move(first->second);
                modules_.erase(first);
                busyWith_ = s;
                lock.unlock();
                for (core::SharedModule& m : queued) s->addModule(std::move(m));
                lock.lock();
            } else {
                for (auto& [s, t] : tries_) {
                    if (t.pending.empty()) continue;
                    const uint64_t id = t.pending.back();  // newest: innermost frames first
                    t.pending.pop_back();
                    busyWith_ = s;
                    nameStack(lock, s, id);
                    break;
                }
            }
        } catch (...) {
            // Left to the trace's own symbolizing, which meets the same failure there.
            if (!lock.owns_lock()) lock.lock();
        }
        busyWith_ = nullptr;
        idle_.notify_all();
    }
}

}  // namespace memtool::cli
