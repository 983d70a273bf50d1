#include "cli/symbols/ObjectFiles.h"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <unordered_map>
#include <utility>

#include "cli/symbols/ModuleSymbols.h"
#include "core/Files.h"

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

// The line of pc in the line table: where the innermost function (inlined or
// not) is. False when the table has none (compiler-made code, no debug info).
// Through cu (pc's unit, at bias) when libdw finds none itself (UnitRanges).
bool lineOf(Dwfl_Module* mod, uint64_t pc, Dwarf_Die* cu, Dwarf_Addr bias, std::string* file,
            uint64_t* line) {
    const char* name = nullptr;
    int lineNo = 0;
    if (Dwfl_Line* entry = dwfl_module_getsrc(mod, pc))
        name = dwfl_lineinfo(entry, nullptr, &lineNo, nullptr, nullptr, nullptr);
    else if (Dwarf_Line* row = cu ? dwarf_getsrc_die(cu, pc - bias) : nullptr)
        if (dwarf_lineno(row, &lineNo) == 0) name = dwarf_linesrc(row, nullptr, nullptr);
    if (!name || lineNo <= 0) return false;
    *file = name;
    *line = static_cast<uint64_t>(lineNo);
    return true;
}

// Where an inlined scope was called from, in the function around it: its
// DW_AT_call_file (an index into the CU's file table) and DW_AT_call_line.
bool callSite(Dwarf_Die* cu, Dwarf_Die* scope, std::string* file, uint64_t* line) {
    Dwarf_Attribute attr;
    Dwarf_Word fileIdx = 0, lineNo = 0;
    if (dwarf_formudata(dwarf_attr(scope, DW_AT_call_file, &attr), &fileIdx) != 0 ||
        dwarf_formudata(dwarf_attr(scope, DW_AT_call_line, &attr), &lineNo) != 0 || lineNo == 0)
        return false;
    Dwarf_Files* files = nullptr;
    size_t count = 0;
    if (dwarf_getsrcfiles(cu, &files, &count) != 0 || fileIdx >= count) return false;
    const char* name = dwarf_filesrc(files, fileIdx, nullptr, nullptr);
    if (!name) return false;
    *file = name;
    *line = lineNo;
    return true;
}

// An inlined function's name as its out-of-line copy's symbol would give it: the
// abstract origin's linkage name, demangled ("Net::forward(long)"); else its plain
// DW_AT_name (C, extern "C"). dwarf_attr_integrate follows DW_AT_abstract_origin
// and DW_AT_specification (a member function's declaration in its class).
std::string inlinedName(Dwarf_Die* scope) {
    Dwarf_Attribute attr;
    for (int name : {DW_AT_linkage_name, DW_AT_MIPS_linkage_name})
        if (const char* linkage = dwarf_formstring(dwarf_attr_integrate(scope, name, &attr)))
            return demangle(linkage);
    const char* plain = dwarf_formstring(dwarf_attr_integrate(scope, DW_AT_name, &attr));
    return plain ? plain : "";
}

// Whether a DIE's children can hold code scopes. libdw's scope walk
// (dwarf_getscopes) enters units, namespaces, classes and the scopes with code;
// this one enters a class only inside a function. GCC and Clang put the code of
// member functions at namespace level, the class holding their declarations; the
// code a class does hold is a lambda's (the closure type's _FUN), and the closure
// type lies in the function that defines the lambda, or at namespace level with
// that code outside it (tests/cli/InlinedCode.cpp has both). Parameters,
// variables, enumerations and the members of namespace-level classes are most of
// a C++ unit's DIEs: in libtorch_sample, 23,000 of 89,000 DIEs are visited, and
// all 1,024 scopes with code found.
bool mayHoldScopes(int tag, bool inFunction) {
    switch (tag) {
        case DW_TAG_compile_unit:
        case DW_TAG_partial_unit:
        case DW_TAG_module:
        case DW_TAG_lexical_block:
        case DW_TAG_with_stmt:
        case DW_TAG_catch_block:
        case DW_TAG_try_block:
        case DW_TAG_entry_point:
        case DW_TAG_inlined_subroutine:
        case DW_TAG_subprogram:
        case DW_TAG_namespace:
            return true;
        case DW_TAG_class_type:
        case DW_TAG_structure_type:
            return inFunction;
        default:
            return false;
    }
}

// The scopes of one compilation unit that hold code (functions, inlined calls,
// lexical blocks), with their address ranges and the scope around each, gathered
// in one walk of the unit. dwarf_getscopes and dwarf_getscopes_die walk the
// whole unit on every call, and a LibTorch program's unit holds all of torch's
// headers: ~10 ms an address, where the index answers in microseconds.
class ScopeIndex {
public:
    explicit ScopeIndex(Dwarf_Die* cu) {
        struct Item {
            Dwarf_Die die;
            int parent;
            bool inFunction;  // below a function, inlined call or block (maybe without code)
        };
        std::vector<Item> todo;
        Dwarf_Die first;
        if (dwarf_child(cu, &first) == 0) todo.push_back({first, -1, false});
        while (!todo.empty()) {
            Item it = todo.back();
            todo.pop_back();
            Dwarf_Die next;
            if (dwarf_siblingof(&it.die, &next) == 0)
                todo.push_back({next, it.parent, it.inFunction});
            int self = it.parent;
            const int tag = dwarf_tag(&it.die);
            const bool isScope = tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine ||
                                 tag == DW_TAG_lexical_block;
            if (isScope) {
                Scope scope{
                    it.die, it.parent, it.parent < 0 ? 0 : scopes_[it.parent].depth + 1, {}};
                Dwarf_Addr base = 0, start = 0, end = 0;
                for (ptrdiff_t off = 0;
                     (off = dwarf_ranges(&it.die, off, &base, &start, &end)) > 0;)
                    if (start < end) scope.ranges.emplace_back(start, end);
                if (!scope.ranges.empty()) {
                    self = static_cast<int>(scopes_.size());
                    scopes_.push_back(std::move(scope));
                }
            }
            Dwarf_Die child;
            if (mayHoldScopes(tag, it.inFunction) && dwarf_haschildren(&it.die) &&
                dwarf_child(&it.die, &child) == 0)
                todo.push_back({child, self, it.inFunction || isScope});
        }
    }

    // The scopes around `address`, innermost first, up to the outermost function.
    std::vector<Dwarf_Die> around(uint64_t address) const {
        int innermost = -1;
        for (size_t i = 0; i < scopes_.size(); ++i)
            if ((innermost < 0 || scopes_[i].depth > scopes_[innermost].depth) &&
                scopes_[i].holds(address))
                innermost = static_cast<int>(i);
        std::vector<Dwarf_Die> chain;
        for (int i = innermost; i >= 0; i = scopes_[i].parent) chain.push_back(scopes_[i].die);
        return chain;
    }

private:
    struct Scope {
        Dwarf_Die die;
        int parent;
        int depth;
        std::vector<std::pair<uint64_t, uint64_t>> ranges;  // [start, end)
        bool holds(uint64_t a) const {
            for (const auto& [s, e] : ranges)
                if (a >= s && a < e) return true;
            return false;
        }
    };
    std::vector<Scope> scopes_;
};

// The compilation units of a module by address, read from the units themselves.
// libdw (0.188) finds pc's unit, and so its line, only through .debug_aranges,
// which clang does not emit: code clang built had no line and no inlined frames.
class UnitRanges {
public:
    explicit UnitRanges(Dwfl_Module* mod) {
        Dwarf_Addr bias = 0;
        for (Dwarf_Die* cu = nullptr; (cu = dwfl_module_nextcu(mod, cu, &bias)) != nullptr;) {
            Dwarf_Addr base = 0, start = 0, end = 0;
            for (ptrdiff_t off = 0; (off = dwarf_ranges(cu, off, &base, &start, &end)) > 0;)
                if (end > start) ranges_.push_back({start + bias, end + bias, bias, cu});
        }
        std::sort(ranges_.begin(), ranges_.end(),
                  [](const Range& a, const Range& b) { return a.start < b.start; });
    }

    // The unit whose ranges hold pc, or null.
    Dwarf_Die* at(uint64_t pc, Dwarf_Addr* bias) const {
        auto it = std::upper_bound(ranges_.begin(), ranges_.end(), pc,
                                   [](uint64_t a, const Range& r) { return a < r.start; });
        if (it == ranges_.begin() || pc >= std::prev(it)->end) return nullptr;
        *bias = std::prev(it)->bias;
        return std::prev(it)->cu;
    }

private:
    struct Range {
        uint64_t start, end;  // [start, end), module addresses
        Dwarf_Addr bias;
        Dwarf_Die* cu;
    };
    std::vector<Range> ranges_;
};

// One index per compilation unit, built on the first address inside it; the units
// by address, read on the first pc libdw finds none for.
class ScopeIndexes {
public:
    const ScopeIndex& of(Dwarf_Die* cu) {
        auto& index = byUnit_[cu->addr];  // where the unit's DIE lies in its module's data
        if (!index) index = std::make_unique<ScopeIndex>(cu);
        return *index;
    }

    Dwarf_Die* unitAt(Dwfl_Module* mod, uint64_t pc, Dwarf_Addr* bias) {
        if (Dwarf_Die* cu = dwfl_module_addrdie(mod, pc, bias)) return cu;
        if (!units_) units_ = std::make_unique<UnitRanges>(mod);
        return units_->at(pc, bias);
    }

private:
    std::unordered_map<const void*, std::unique_ptr<ScopeIndex>> byUnit_;
    std::unique_ptr<UnitRanges> units_;
};

// The frames pc stands for, innermost first (module and offset are the
// caller's to add): each DW_TAG_inlined_subroutine around pc is a function
// inlined there, standing at the line the previous one was called from (the
// innermost at pc's own line); the first DW_TAG_subprogram is the function
// `function` (the symbol) names, at the outermost inlined call site.
std::vector<core::Frame> sourceFrames(Dwfl_Module* mod, uint64_t pc, std::string function,
                                      ScopeIndexes& indexes) {
    std::vector<core::Frame> chain;
    core::Frame at;  // file and line where the next frame out stands
    Dwarf_Addr bias = 0;
    Dwarf_Die* cu = indexes.unitAt(mod, pc, &bias);
    lineOf(mod, pc, cu, bias, &at.file, &at.line);
    std::vector<Dwarf_Die> scopes;
    if (cu) scopes = indexes.of(cu).around(pc - bias);
    for (size_t i = 0; i < scopes.size(); ++i) {
        const int tag = dwarf_tag(&scopes[i]);
        if (tag == DW_TAG_subprogram) break;
        if (tag != DW_TAG_inlined_subroutine) continue;  // a lexical block
        at.function = inlinedName(&scopes[i]);
        chain.push_back(std::move(at));
        at = core::Frame{};
        callSite(cu, &scopes[i], &at.file, &at.line);  // unknown: the caller shows no line
    }
    at.function = std::move(function);
    chain.push_back(std::move(at));
    return chain;
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

// One object file, reported to a Dwfl of its own at its file addresses (bias 0),
// with what has been read from it.
class ObjectFiles::File {
public:
    File(Dwfl* dwfl, Dwfl_Module* module) : dwfl_(dwfl), module_(module) {
        if (module_)
            dwfl_module_info(module_, nullptr, &low_, &high_, nullptr, nullptr, nullptr, nullptr);
    }
    ~File() {
        // Symbol names and scopes point into the Dwfl's data: they go first.
        symbols_.reset();
        scopes_ = ScopeIndexes{};
        dwfl_end(dwfl_);
    }
    File(const File&) = delete;
    File& operator=(const File&) = delete;

    std::vector<core::Frame> frames(uint64_t address) {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = byAddress_.find(address);
        if (it == byAddress_.end()) {
            std::vector<core::Frame> named;
            if (module_ && address >= low_ && address < high_) {
                if (!symbols_) symbols_ = std::make_unique<ModuleSymbols>(module_);
                named = sourceFrames(module_, address, demangle(symbols_->name(address)), scopes_);
            }
            it = byAddress_.emplace(address, std::move(named)).first;
        }
        return it->second;
    }

private:
    std::mutex mu_;
    Dwfl* dwfl_;
    Dwfl_Module* module_;  // null: not an object file libdw reads
    Dwarf_Addr low_ = 0, high_ = 0;
    std::unique_ptr<ModuleSymbols> symbols_;  // read on the first address
    ScopeIndexes scopes_;
    std::unordered_map<uint64_t, std::vector<core::Frame>> byAddress_;
};

namespace {

std::tuple<uint64_t, uint64_t, int64_t, int64_t, int64_t> identityOf(const struct stat& st) {
    return {st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec};
}

}  // namespace

ObjectFiles::~ObjectFiles() = default;

std::shared_ptr<ObjectFiles::File> ObjectFiles::open(const std::string& path) {
    // A process maps hundreds of objects and a stack touches a few: only those
    // are opened. The path comes from the stream: only a regular file is opened,
    // and without waiting (libdw's own open of a FIFO would block memtool run for
    // good, with its signals blocked for the signalfd).
    struct stat st {};
    if (path.empty() || path[0] != '/' || stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
        return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    auto known = files_.find(identityOf(st));
    if (known != files_.end()) return known->second;
    std::string why;
    const int fd = core::openRegularFile(path, &why);
    if (fd < 0) return nullptr;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return nullptr;
    }
    known = files_.find(identityOf(st));  // replaced since the stat above
    if (known != files_.end()) {
        close(fd);
        return known->second;
    }
    Dwfl* dwfl = dwfl_begin(&kCallbacks);
    if (!dwfl) {
        close(fd);
        return nullptr;
    }
    dwfl_report_begin(dwfl);
    // At its file addresses: the first loaded segment's address, not 0, for a
    // library linked to load elsewhere. On success libdw owns the descriptor.
    Dwfl_Module* module = dwfl_report_elf(dwfl, path.c_str(), path.c_str(), fd, 0, true);
    if (!module) close(fd);
    dwfl_report_end(dwfl, nullptr, nullptr);
    ++opened_;
    return files_.emplace(identityOf(st), std::make_shared<File>(dwfl, module)).first->second;
}

std::vector<core::Frame> ObjectFiles::frames(File& file, uint64_t fileAddress) {
    return file.frames(fileAddress);
}

void ObjectFiles::closeAll() {
    std::lock_guard<std::mutex> lock(mu_);
    files_.clear();
}

size_t ObjectFiles::opened() const {
    std::lock_guard<std::mutex> lock(mu_);
    return opened_;
}

ObjectFiles& ObjectFiles::shared() {
    static ObjectFiles* store = new ObjectFiles;  // never destroyed: threads may outlive main
    return *store;
}

}  // namespace memtool::cli
