#include "cli/BackgroundSymbolizer.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace memtool::cli {

BackgroundSymbolizer& BackgroundSymbolizer::shared() {
    static BackgroundSymbolizer worker;
    return worker;
}

BackgroundSymbolizer::~BackgroundSymbolizer() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
        queue_.clear();
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void BackgroundSymbolizer::addModule(ElfSymbolizer* symbolizer, const core::ModuleRecord& module) {
    push({symbolizer, true, module, 0});
}

void BackgroundSymbolizer::warm(ElfSymbolizer* symbolizer, uint64_t ip) {
    push({symbolizer, false, {}, ip});
}

void BackgroundSymbolizer::push(Item item) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) return;
        // Started with the first work, after memtool run has launched its program:
        // a fork with this thread running would give the child its locks.
        if (!thread_.joinable()) thread_ = std::thread([this] { work(); });
        queue_.push_back(std::move(item));
    }
    wake_.notify_one();
}

void BackgroundSymbolizer::reclaim(ElfSymbolizer* symbolizer) {
    std::deque<Item> mine;
    {
        std::unique_lock<std::mutex> lock(mu_);
        idle_.wait(lock, [&] { return busyWith_ != symbolizer; });
        for (auto it = queue_.begin(); it != queue_.end();) {
            if (it->symbolizer == symbolizer) {
                if (it->isModule) mine.push_back(std::move(*it));
                it = queue_.erase(it);
            } else {
                ++it;
            }
        }
    }
    for (const Item& item : mine) symbolizer->addModule(item.module);
}

void BackgroundSymbolizer::waitUntilIdle() {
    std::unique_lock<std::mutex> lock(mu_);
    idle_.wait(lock, [&] { return stop_ || (queue_.empty() && busyWith_ == nullptr); });
}

void BackgroundSymbolizer::work() {
    // Only a core the target leaves idle: nice 19 for this thread alone.
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (stop_) return;
        Item item = std::move(queue_.front());
        queue_.pop_front();
        busyWith_ = item.symbolizer;
        lock.unlock();
        try {
            if (item.isModule)
                item.symbolizer->addModule(item.module);
            else
                item.symbolizer->symbolize(item.ip);
        } catch (...) {
            // Left to the trace's own symbolizing, which meets the same failure there.
        }
        lock.lock();
        busyWith_ = nullptr;
        idle_.notify_all();
    }
}

}  // namespace memtool::cli
