#include "cli/ElfSymbolizer.h"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "cli/ModuleSymbols.h"
#include "reporters/Files.h"

namespace memtool::cli {

namespace {

std::string demangle(const char* name) {
    if (!name) return {};
    int status = 0;
    char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    if (status == 0 && out) {
        std::string s(out);
        std::free(out);
        return s;
    }
    return name;
}

// When pc lies in inlined code, the file:line in the function that the symbol
// names is the call site of the outermost inlined scope.
bool inlinedCallSite(Dwfl_Module* mod, uint64_t pc, std::string* file, uint64_t* line) {
    Dwarf_Addr bias = 0;
    Dwarf_Die* cu = dwfl_module_addrdie(mod, pc, &bias);
    if (!cu) return false;
    Dwarf_Die* scopes = nullptr;
    int n = dwarf_getscopes(cu, pc - bias, &scopes);
    if (n <= 0) return false;
    bool found = false;
    for (int i = n - 1; i >= 0 && !found; --i) {
        if (dwarf_tag(&scopes[i]) != DW_TAG_inlined_subroutine) continue;
        Dwarf_Attribute attr;
        Dwarf_Word fileIdx = 0, lineNo = 0;
        if (!dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_file, &attr), &fileIdx) &&
            !dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_line, &attr), &lineNo)) {
            Dwarf_Files* files = nullptr;
            size_t count = 0;
            if (dwarf_getsrcfiles(cu, &files, &count) == 0 && fileIdx < count) {
                if (const char* name = dwarf_filesrc(files, fileIdx, nullptr, nullptr)) {
                    *file = name;
                    *line = lineNo;
                    found = lineNo > 0;
                }
            }
        }
    }
    std::free(scopes);
    return found;
}

char* noDebuginfoPath = nullptr;
// Separate debug info by build id only (/usr/lib/debug/.build-id, where Debian's
// -dbgsym packages put it): dwfl_standard_find_debuginfo would also load the
// debuginfod client and its network stack, which memtool never uses.
const Dwfl_Callbacks kCallbacks = {
    dwfl_build_id_find_elf,
    dwfl_build_id_find_debuginfo,
    dwfl_offline_section_address,
    &noDebuginfoPath,
};

}  // namespace

struct ElfSymbolizer::Impl {
    Dwfl* dwfl = nullptr;
    std::vector<core::ModuleRecord> modules;
    std::vector<bool> reported;  // per module: handed to libdw yet?
    std::unordered_map<uint64_t, core::Frame> cache;
    std::unordered_map<Dwfl_Module*, std::unique_ptr<ModuleSymbols>> symbols;  // read on first use

    const char* symbolName(Dwfl_Module* mod, uint64_t pc) {
        auto& table = symbols[mod];
        if (!table) table = std::make_unique<ModuleSymbols>(mod);
        return table->name(pc);
    }

    // A process maps hundreds of objects and a stack touches a few: open only those.
    // The path comes from the stream: only a regular file is opened, and without
    // waiting (libdw's own open of a FIFO would block memtool run for good, with
    // its signals blocked for the signalfd).
    void report(const core::ModuleRecord* m) {
        size_t i = static_cast<size_t>(m - modules.data());
        if (!dwfl || reported[i] || m->path.empty() || m->path[0] != '/') return;
        reported[i] = true;
        std::string why;
        const int fd = reporters::openRegularFile(m->path, &why);
        if (fd < 0) return;
        dwfl_report_begin_add(dwfl);
        // On success libdw owns the descriptor.
        if (!dwfl_report_elf(dwfl, m->path.c_str(), m->path.c_str(), fd, m->loadBias, false))
            close(fd);
        dwfl_report_end(dwfl, nullptr, nullptr);
    }

    const core::ModuleRecord* moduleOf(uint64_t ip) const {
        // Latest first: a range reused after dlclose belongs to the newer module.
        for (auto it = modules.rbegin(); it != modules.rend(); ++it)
            for (const auto& [s, e] : it->ranges)
                if (ip >= s && ip < e) return &*it;
        return nullptr;
    }
};

ElfSymbolizer::ElfSymbolizer() : impl_(std::make_unique<Impl>()) {
    impl_->dwfl = dwfl_begin(&kCallbacks);
}

ElfSymbolizer::ElfSymbolizer(const std::vector<core::ModuleRecord>& modules) : ElfSymbolizer() {
    for (const auto& m : modules) addModule(m);
}

void ElfSymbolizer::addModule(const core::ModuleRecord& module) {
    impl_->modules.push_back(module);
    impl_->reported.push_back(false);
}

ElfSymbolizer::~ElfSymbolizer() {
    if (impl_->dwfl) dwfl_end(impl_->dwfl);
}

const core::Frame& ElfSymbolizer::symbolize(uint64_t ip) {
    auto it = impl_->cache.find(ip);
    if (it != impl_->cache.end()) return it->second;
    core::Frame f;  // native
    uint64_t pc = ip - 1;
    if (const core::ModuleRecord* m = impl_->moduleOf(pc)) {
        f.module = m->path;
        f.offset = pc - m->loadBias;
        impl_->report(m);
    }
    if (impl_->dwfl) {
        if (Dwfl_Module* mod = dwfl_addrmodule(impl_->dwfl, pc)) {
            f.function = demangle(impl_->symbolName(mod, pc));
            if (inlinedCallSite(mod, pc, &f.file, &f.line)) {
                // pc sits in code inlined into the symbol's function: report where
                // that function made the (inlined) call, not the inlined body.
            } else if (Dwfl_Line* line = dwfl_module_getsrc(mod, pc)) {
                int lineNo = 0;
                const char* file = dwfl_lineinfo(line, nullptr, &lineNo, nullptr, nullptr, nullptr);
                if (file && lineNo > 0) {
                    f.file = file;
                    f.line = static_cast<uint64_t>(lineNo);
                }
            }
        }
    }
    return impl_->cache.emplace(ip, std::move(f)).first->second;
}

}  // namespace memtool::cli
