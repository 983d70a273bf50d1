#include "cli/symbols/ElfSymbolizer.h"

#include <algorithm>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

namespace memtool::cli {

struct ElfSymbolizer::Impl {
    ObjectFiles* store = nullptr;
    std::vector<core::SharedModule> modules;
    // Per module: looked for in the store yet, and what it gave.
    std::vector<bool> opened;
    std::vector<std::shared_ptr<ObjectFiles::File>> files;
    std::unordered_map<uint64_t, std::vector<core::Frame>> cache;  // by return address

    ObjectFiles::File* fileOf(size_t i) {
        if (!opened[i]) {
            opened[i] = true;
            files[i] = store->open(modules[i]->path);
        }
        return files[i].get();
    }

    // The index of the module `ip` lies in, or modules.size().
    size_t moduleOf(uint64_t ip) const {
        // Latest first: a range reused after dlclose belongs to the newer module.
        for (size_t i = modules.size(); i-- > 0;)
            for (const auto& [s, e] : modules[i]->ranges)
                if (ip >= s && ip < e) return i;
        return modules.size();
    }
};

ElfSymbolizer::ElfSymbolizer() : ElfSymbolizer(ObjectFiles::shared()) {}

ElfSymbolizer::ElfSymbolizer(ObjectFiles& store) : impl_(std::make_unique<Impl>()) {
    impl_->store = &store;
}

ElfSymbolizer::ElfSymbolizer(const std::vector<core::ModuleRecord>& modules) : ElfSymbolizer() {
    for (const auto& m : modules) addModule(m);
}

void ElfSymbolizer::addModule(const core::ModuleRecord& module) {
    addModule(std::make_shared<const core::ModuleRecord>(module));
}

void ElfSymbolizer::addModule(core::SharedModule module) {
    impl_->modules.push_back(std::move(module));
    impl_->opened.push_back(false);
    impl_->files.emplace_back();
}

ElfSymbolizer::~ElfSymbolizer() = default;

bool ElfSymbolizer::known(uint64_t ip) const { return impl_->cache.count(ip) != 0; }

void ElfSymbolizer::closeFiles() {
    std::fill(impl_->opened.begin(), impl_->opened.end(), false);
    std::fill(impl_->files.begin(), impl_->files.end(), nullptr);
}

const std::vector<core::Frame>& ElfSymbolizer::symbolize(uint64_t ip) {
    auto it = impl_->cache.find(ip);
    if (it != impl_->cache.end()) return it->second;
    const uint64_t pc = ip - 1;
    std::string module;
    uint64_t offset = 0;
    std::vector<core::Frame> frames;
    if (const size_t i = impl_->moduleOf(pc); i < impl_->modules.size()) {
        const core::ModuleRecord& m = *impl_->modules[i];
        module = m.path;
        offset = pc - m.loadBias;
        if (ObjectFiles::File* file = impl_->fileOf(i)) frames = ObjectFiles::frames(*file, offset);
    }
    if (frames.empty()) frames.emplace_back();  // nothing but the module, if that
    for (core::Frame& f : frames) {             // native, all in one module at one address
        f.module = module;
        f.offset = offset;
    }
    return impl_->cache.emplace(ip, std::move(frames)).first->second;
}

}  // namespace memtool::cli
