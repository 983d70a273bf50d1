// ModuleSymbols against libdw's own dwfl_module_addrinfo, on real objects: every
// address it is asked must get the very name libdw gives.
#include <elfutils/libdwfl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "cli/symbols/ModuleSymbols.h"

using memtool::cli::ModuleSymbols;

namespace {

char* noDebuginfo = nullptr;
const Dwfl_Callbacks kCallbacks = {dwfl_build_id_find_elf, dwfl_build_id_find_debuginfo,
                                   dwfl_offline_section_address, &noDebuginfo};

std::string selfPath() {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

struct Compared {
    size_t addresses = 0;
    size_t named = 0;
    std::vector<std::string> mismatches;
};

// Asks both at every symbol's start, inside, last byte and just past it, and at
// evenly spaced addresses across the module.
Compared compareWithLibdw(const std::string& path, uint64_t bias) {
    Compared c;
    Dwfl* dwfl = dwfl_begin(&kCallbacks);
    dwfl_report_begin(dwfl);
    Dwfl_Module* mod = dwfl_report_elf(dwfl, path.c_str(), path.c_str(), -1, bias, false);
    dwfl_report_end(dwfl, nullptr, nullptr);
    if (!mod) {
        dwfl_end(dwfl);
        return c;
    }
    ModuleSymbols ours(mod);
    std::vector<uint64_t> addresses;
    const int count = dwfl_module_getsymtab(mod);
    // libdw costs a scan of the table per address: a sample of symbols is enough.
    const int step = count > 3000 ? count / 1500 : 1;
    for (int i = 1; i < count; i += step) {
        GElf_Sym sym;
        GElf_Addr a = 0;
        if (!dwfl_module_getsym_info(mod, i, &sym, &a, nullptr, nullptr, nullptr)) continue;
        for (uint64_t d : {uint64_t{0}, uint64_t{1}, sym.st_size / 2, sym.st_size - 1, sym.st_size})
            addresses.push_back(a + d);
    }
    Dwarf_Addr low = 0, high = 0;
    dwfl_module_info(mod, nullptr, &low, &high, nullptr, nullptr, nullptr, nullptr);
    for (uint64_t a = low; high > low && a < high; a += (high - low) / 2000 + 1)
        addresses.push_back(a);
    for (uint64_t a : addresses) {
        GElf_Off off;
        GElf_Sym sym;
        const char* theirs = dwfl_module_addrinfo(mod, a, &off, &sym, nullptr, nullptr, nullptr);
        const char* mine = ours.name(a);
        ++c.addresses;
        c.named += theirs != nullptr;
        const bool same = (!theirs && !mine) || (theirs && mine && std::strcmp(theirs, mine) == 0);
        if (!same && c.mismatches.size() < 10)
            c.mismatches.push_back(std::to_string(a - bias) + ": libdw " +
                                   (theirs ? theirs : "(none)") + ", ours " +
                                   (mine ? mine : "(none)"));
    }
    dwfl_end(dwfl);
    return c;
}

void expectSameNames(const std::string& path, uint64_t bias) {
    if (access(path.c_str(), R_OK) != 0) GTEST_SKIP() << path << " is not here";
    Compared c = compareWithLibdw(path, bias);
    ASSERT_GT(c.named, 100u) << path;
    EXPECT_TRUE(c.mismatches.empty()) << path << " (" << c.addresses << " addresses):\n"
                                      << [&] {
                                             std::string s;
                                             for (const auto& m : c.mismatches) s += m + "\n";
                                             return s;
                                         }();
}

}  // namespace

// This test binary: a full .symtab with locals, C++ aliases (C1/C2 constructors)
// and sizeless labels from the C runtime.
TEST(ModuleSymbols, NamesLikeLibdwInAnExecutableWithLocals) { expectSameNames(selfPath(), 0); }

// A symbol's size is kept in 32 bits, and one of 4 GiB or more apart: named
// through all of it, past 4 GiB too, and never where a closer one starts.
TEST(ModuleSymbols, NamesLikeLibdwInASymbolOfMoreThanFourGib) {
    Compared c = compareWithLibdw(BIG_SYMBOL_OBJECT, 0);
    EXPECT_GE(c.named, 12u);  // each of the 3 symbols at 4 offsets or more
    EXPECT_TRUE(c.mismatches.empty()) << [&] {
        std::string s;
        for (const auto& m : c.mismatches) s += m + "\n";
        return s;
    }();
    // Past 4 GiB into it, where a size cut to 32 bits would have ended.
    Dwfl* dwfl = dwfl_begin(&kCallbacks);
    dwfl_report_begin(dwfl);
    Dwfl_Module* mod = dwfl_report_elf(dwfl, "big", BIG_SYMBOL_OBJECT, -1, 0, false);
    dwfl_report_end(dwfl, nullptr, nullptr);
    ASSERT_NE(mod, nullptr);
    const ModuleSymbols ours(mod);
    uint64_t huge = 0;
    for (int i = 1; i < dwfl_module_getsymtab(mod); ++i) {
        GElf_Sym sym;
        GElf_Addr a = 0;
        const char* name = dwfl_module_getsym_info(mod, i, &sym, &a, nullptr, nullptr, nullptr);
        if (name && std::strcmp(name, "huge") == 0) huge = a;
    }
    ASSERT_NE(huge, 0u);
    ASSERT_NE(ours.name(huge + 0x100000008), nullptr);
    EXPECT_STREQ(ours.name(huge + 0x100000008), "huge");
    EXPECT_STREQ(ours.name(huge + 1), "after");  // a closer start wins
    EXPECT_EQ(ours.name(huge + 0x100000010), nullptr);
    dwfl_end(dwfl);
}

// Shared libraries as Debian ships them (.dynsym only), at a load bias.
TEST(ModuleSymbols, NamesLikeLibdwInLibc) {
    expectSameNames("/lib/x86_64-linux-gnu/libc.so.6", 0x7f0000000000);
}

TEST(ModuleSymbols, NamesLikeLibdwInLibstdcxx) {
    expectSameNames("/lib/x86_64-linux-gnu/libstdc++.so.6", 0x7f1000000000);
}

TEST(ModuleSymbols, NamesLikeLibdwInTheInterpreter) {
    expectSameNames("/usr/bin/python3.11", 0x555500000000);
}
