// Module paths come from the stream: the symbolizer opens regular files only, and
// never waits on one (a FIFO opened by libdw blocked memtool run for good). Code
// inlined at an address is a frame per inlined function (tests/cli/InlinedCode.cpp).
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/symbols/BackgroundSymbolizer.h"
#include "cli/symbols/ElfSymbolizer.h"
#include "cli/symbols/ObjectFiles.h"
#include "tests/TempDir.h"
#include "tests/cli/InlinedCode.h"

using namespace memtool;

TEST(ElfSymbolizer, AModuleThatIsNoRegularFileIsNeverOpened) {
    const std::string dir = memtool::test_support::makeTempDir("memtool-symbolizer-test");
    const std::string fifo = dir + "/libfifo.so";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    core::ModuleRecord fifoModule{1, fifo, 0x10000, {{0x10000, 0x20000}}};
    core::ModuleRecord zero{2, "/dev/zero", 0x40000, {{0x40000, 0x50000}}};
    cli::ElfSymbolizer symbolizer({fifoModule, zero});

    ASSERT_EQ(symbolizer.symbolize(0x10101).size(), 1u);
    const core::Frame& f = symbolizer.symbolize(0x10101).front();
    EXPECT_EQ(f.module, fifo);
    EXPECT_EQ(f.offset, 0x100u);  // the return address less one, less the bias
    EXPECT_EQ(f.function, "");
    const core::Frame& z = symbolizer.symbolize(0x40011).front();
    EXPECT_EQ(z.module, "/dev/zero");
    EXPECT_EQ(z.offset, 0x10u);
    EXPECT_EQ(z.function, "");
    // No one holds the FIFO open for reading: a writer that will not wait finds none.
    errno = 0;
    EXPECT_EQ(open(fifo.c_str(), O_WRONLY | O_NONBLOCK), -1);
    EXPECT_EQ(errno, ENXIO);
}

namespace {

// This test binary as the collector would announce it: the path, the load bias
// and the loaded segments of the main program (dl_iterate_phdr's first object).
// An object's load bias and loaded segments, from dl_iterate_phdr.
void takeSegments(const dl_phdr_info* info, core::ModuleRecord& m) {
    m.loadBias = info->dlpi_addr;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type == PT_LOAD)
            m.ranges.push_back(
                {info->dlpi_addr + ph.p_vaddr, info->dlpi_addr + ph.p_vaddr + ph.p_memsz});
    }
}

core::ModuleRecord thisProgram() {
    core::ModuleRecord m;
    m.id = 1;
    char path[4096];
    const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    m.path.assign(path, n > 0 ? static_cast<size_t>(n) : 0);
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
            takeSegments(info, *static_cast<core::ModuleRecord*>(data));
            return 1;  // the main program only
        },
        &m);
    return m;
}

bool endsWith(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The frames of inlinedCallAddress()'s return address: two inlined, one not.
void expectInlinedCallFrames(const std::vector<core::Frame>& frames) {
    ASSERT_EQ(frames.size(), 3u);
    EXPECT_EQ(frames[0].function, "memtool::testing::innermost()");
    EXPECT_EQ(frames[0].line, 18u);
    EXPECT_EQ(frames[1].function, "memtool::testing::middle()");
    EXPECT_EQ(frames[1].line, 23u);
    EXPECT_EQ(frames[2].function, "memtool::testing::inlinedCallAddress()");
    EXPECT_EQ(frames[2].line, 26u);
}

}  // namespace

// One return address inside two inlined functions: three frames, innermost
// first, each at its own line, as `addr2line -i -f -C` prints them.
TEST(ElfSymbolizer, InlinedFunctionsAreFramesOfTheirOwn) {
    const uint64_t ip = memtool::testing::inlinedCallAddress();
    const core::ModuleRecord program = thisProgram();
    cli::ElfSymbolizer symbolizer({program});
    const std::vector<core::Frame>& frames = symbolizer.symbolize(ip);
    expectInlinedCallFrames(frames);
    if (frames.size() != 3) return;
    for (const core::Frame& f : frames) {
        EXPECT_TRUE(endsWith(f.file, "/tests/cli/InlinedCode.cpp")) << f.file;
        EXPECT_EQ(f.module, program.path);
        EXPECT_EQ(f.offset, ip - 1 - program.loadBias);
    }
    // Computed once per address: the same frames, where they were.
    EXPECT_EQ(&symbolizer.symbolize(ip), &frames);
}

// An object without .debug_aranges (clang emits none): libdw 0.188 finds no unit
// for an address through it, and the symbolizer read no line and no inlined frame
// of clang's code. Units are found by their own ranges then: this test binary,
// copied without the table, gives the same three frames.
TEST(ElfSymbolizer, AnObjectWithoutAddressRangesHasItsLinesAndInlinedFrames) {
    const std::string dir = memtool::test_support::makeTempDir("memtool-symbolizer-test");
    core::ModuleRecord program = thisProgram();
    const std::string copy = dir + "/no-aranges";
    const std::string command =
        "objcopy --remove-section=.debug_aranges '" + program.path + "' '" + copy + "'";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    const std::string sections = "readelf -S '" + copy + "' | grep -q debug_aranges";
    ASSERT_NE(std::system(sections.c_str()), 0) << "the copy still has .debug_aranges";
    program.path = copy;
    const uint64_t ip = memtool::testing::inlinedCallAddress();
    cli::ElfSymbolizer symbolizer({program});
    expectInlinedCallFrames(symbolizer.symbolize(ip));
}

// A lambda taken as a function pointer runs as its closure type's _FUN, with
// operator() inlined into it or called. That code lies in the closure type: inside the
// function that defines the lambda, or at namespace level. Calls inlined there
// are frames all the same (the scope walk enters a class only inside a function).
TEST(ElfSymbolizer, CallsInlinedIntoLambdasAreFramesOfTheirOwn) {
    const core::ModuleRecord program = thisProgram();
    cli::ElfSymbolizer symbolizer({program});
    const std::pair<uint64_t, uint64_t> cases[] = {
        {memtool::testing::inlinedIntoALambda(), 40},
        {memtool::testing::inlinedIntoANamespaceLambda(), 49}};
    for (const auto& [ip, line] : cases) {
        // operator() is a frame of its own, inlined into _FUN or not (an ASan
        // build keeps it out of line): three frames or four.
        const std::vector<core::Frame>& frames = symbolizer.symbolize(ip);
        ASSERT_GE(frames.size(), 3u) << line;
        ASSERT_LE(frames.size(), 4u) << line;
        EXPECT_EQ(frames[0].function, "memtool::testing::innermost()");
        EXPECT_EQ(frames[0].line, 18u);
        EXPECT_EQ(frames[1].function, "memtool::testing::middle()");
        EXPECT_EQ(frames[1].line, 23u);
        EXPECT_NE(frames[2].function.find("operator()"), std::string::npos) << frames[2].function;
        EXPECT_EQ(frames[2].line, line);
        // The closure type's static: gcc's "...{lambda()#1}::_FUN()", clang's
        // "...$_0::__invoke()".
        const std::string& outer = frames.back().function;
        EXPECT_TRUE(outer.find("{lambda()#1}::_FUN") != std::string::npos ||
                    outer.find("::__invoke()") != std::string::npos)
            << outer;
    }
}

// Frames named on the worker's thread are the symbolizer's own afterwards: the
// trace finds them known, and the same as naming them on the spot.
TEST(BackgroundSymbolizer, NamesFramesOnItsThreadForTheSymbolizerItGivesBack) {
    const uint64_t ip = memtool::testing::inlinedCallAddress();
    cli::ElfSymbolizer early, onTheSpot({thisProgram()});
    cli::BackgroundSymbolizer worker;
    worker.addModule(&early, std::make_shared<const core::ModuleRecord>(thisProgram()));
    const core::NativeNodeRecord node{1, 0, ip};
    worker.addNodes(&early, 1, std::span(&node, 1), false);
    worker.waitUntilIdle();
    worker.reclaim(&early);
    EXPECT_TRUE(early.known(ip));
    EXPECT_FALSE(onTheSpot.known(ip));
    const std::vector<core::Frame>& frames = early.symbolize(ip);
    ASSERT_EQ(frames.size(), 3u);
    const std::vector<core::Frame>& expected = onTheSpot.symbolize(ip);
    for (size_t i = 0; i < frames.size(); ++i) {
        EXPECT_EQ(frames[i].function, expected[i].function);
        EXPECT_EQ(frames[i].line, expected[i].line);
        EXPECT_EQ(frames[i].offset, expected[i].offset);
    }
}

// A symbolizer reclaimed at once has its queued module all the same (added by the
// worker or, still queued, by reclaim) and names frames on the caller's thread.
TEST(BackgroundSymbolizer, AReclaimedSymbolizerKeepsItsQueuedModules) {
    const uint64_t ip = memtool::testing::inlinedCallAddress();
    cli::ElfSymbolizer symbolizer;
    cli::BackgroundSymbolizer worker;
    worker.addModule(&symbolizer, std::make_shared<const core::ModuleRecord>(thisProgram()));
    worker.reclaim(&symbolizer);
    ASSERT_EQ(symbolizer.symbolize(ip).size(), 3u);
    EXPECT_EQ(symbolizer.symbolize(ip)[0].function, "memtool::testing::innermost()");
}

namespace {
// Every loaded object as the collector would announce it.
std::vector<core::ModuleRecord> loadedModules() {
    std::vector<core::ModuleRecord> modules;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
            auto* out = static_cast<std::vector<core::ModuleRecord>*>(data);
            core::ModuleRecord m = out->empty() ? thisProgram() : core::ModuleRecord{};
            if (!out->empty()) {
                if (!info->dlpi_name || !*info->dlpi_name) return 0;
                m.path = info->dlpi_name;
                takeSegments(info, m);
            }
            m.id = out->size() + 1;
            out->push_back(m);
            return 0;
        },
        &modules);
    return modules;
}
}  // namespace

// The worker names what the trace shows and no more: a stack from its innermost
// frame out to main, never libc's start-up frames beyond it.
TEST(BackgroundSymbolizer, NamesAStackOnlyAsFarAsMain) {
    void* raw[128];
    const int n = backtrace(raw, 128);
    const std::vector<core::ModuleRecord> modules = loadedModules();
    cli::ElfSymbolizer probe(modules);
    int mainAt = -1;
    for (int i = 0; i < n && mainAt < 0; ++i) {
        const auto& frames = probe.symbolize(reinterpret_cast<uint64_t>(raw[i]));
        if (!frames.empty() && frames.back().function == "main") mainAt = i;
    }
    ASSERT_GT(mainAt, 0);
    ASSERT_LT(mainAt + 1, n) << "no frame beyond main";
    cli::ElfSymbolizer symbolizer;
    cli::BackgroundSymbolizer worker;
    for (const core::ModuleRecord& m : modules)
        worker.addModule(&symbolizer, std::make_shared<const core::ModuleRecord>(m));
    std::vector<core::NativeNodeRecord> trie;  // one stack, outermost node first
    for (int k = 0; k < n; ++k)
        trie.push_back({uint64_t(k + 1), uint64_t(k), reinterpret_cast<uint64_t>(raw[n - 1 - k])});
    worker.addNodes(&symbolizer, 1, trie, false);
    worker.waitUntilIdle();
    worker.reclaim(&symbolizer);
    EXPECT_TRUE(symbolizer.known(reinterpret_cast<uint64_t>(raw[0])));
    EXPECT_TRUE(symbolizer.known(reinterpret_cast<uint64_t>(raw[mainAt])));
    for (int i = mainAt + 1; i < n; ++i)
        EXPECT_FALSE(symbolizer.known(reinterpret_cast<uint64_t>(raw[i]))) << i;
}

// Nodes from a hostile stream that are no trie (a parent not yet seen) are left
// to the trace from where the trie breaks; those before it are named.
TEST(BackgroundSymbolizer, NamesABatchOnlyUpToWhereItIsNoTrie) {
    void* raw[2];
    ASSERT_EQ(backtrace(raw, 2), 2);
    const uint64_t inner = memtool::testing::inlinedCallAddress();
    const uint64_t caller = reinterpret_cast<uint64_t>(raw[1]);
    cli::ElfSymbolizer symbolizer;
    cli::BackgroundSymbolizer worker;
    worker.addModule(&symbolizer, std::make_shared<const core::ModuleRecord>(thisProgram()));
    const std::vector<core::NativeNodeRecord> nodes{{1, 0, inner}, {2, 7, caller}};
    worker.addNodes(&symbolizer, 1, nodes, false);
    worker.addNodes(&symbolizer, 3, nodes, false);  // not the next ids: ignored
    worker.waitUntilIdle();
    worker.reclaim(&symbolizer);
    EXPECT_TRUE(symbolizer.known(inner));
    EXPECT_FALSE(symbolizer.known(caller));
}

// Two processes that map one library, one of them at another address (another
// run of the same program, a rank): the file is opened and read once, and an
// address in it is named alike for both.
TEST(ObjectFiles, AFileMappedByManyProcessesIsReadOnce) {
    const uint64_t ip = memtool::testing::inlinedCallAddress();
    const core::ModuleRecord here = thisProgram();
    core::ModuleRecord elsewhere = here;
    const uint64_t shift = 0x100000000;
    elsewhere.loadBias += shift;
    for (auto& [start, end] : elsewhere.ranges) start += shift, end += shift;

    cli::ObjectFiles store;
    cli::ElfSymbolizer first(store), second(store);
    first.addModule(here);
    second.addModule(elsewhere);
    const std::vector<core::Frame> a = first.symbolize(ip);
    const std::vector<core::Frame> b = second.symbolize(ip + shift);
    EXPECT_EQ(store.opened(), 1u);
    ASSERT_EQ(a.size(), 3u);
    ASSERT_EQ(b.size(), a.size());
    for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(b[i].function, a[i].function);
        EXPECT_EQ(b[i].file, a[i].file);
        EXPECT_EQ(b[i].line, a[i].line);
        EXPECT_EQ(b[i].offset, ip - 1 - here.loadBias);
    }
    EXPECT_EQ(a[0].function, "memtool::testing::innermost()");

    // Let go of, then needed again: read anew.
    first.closeFiles();
    second.closeFiles();
    store.closeAll();
    cli::ElfSymbolizer third(store);
    third.addModule(here);
    EXPECT_EQ(third.symbolize(ip).at(2).function, "memtool::testing::inlinedCallAddress()");
    EXPECT_EQ(store.opened(), 2u);
}

// A file is known by what it is, not by its name: two names of one file are
// read once; a file put in place of another under its name is read again.
TEST(ObjectFiles, AFileIsKnownByItsInodeAndModificationNotItsPath) {
    const std::string dir = memtool::test_support::makeTempDir("memtool-object-files-test");
    const std::string program = thisProgram().path;
    const std::string lib = dir + "/libcopy.so", link = dir + "/liblink.so";
    auto copyTo = [&](const std::string& to) {
        const std::string tmp = to + ".new";
        ASSERT_EQ(std::system(("cp " + program + " " + tmp).c_str()), 0);
        ASSERT_EQ(rename(tmp.c_str(), to.c_str()), 0);  // a new inode under the name
    };
    copyTo(lib);
    ASSERT_EQ(::link(lib.c_str(), link.c_str()), 0);

    cli::ObjectFiles store;
    const auto one = store.open(lib);
    ASSERT_NE(one, nullptr);
    EXPECT_EQ(store.open(lib), one);
    EXPECT_EQ(store.open(link), one);
    EXPECT_EQ(store.opened(), 1u);

    copyTo(lib);
    const auto replaced = store.open(lib);
    ASSERT_NE(replaced, nullptr);
    EXPECT_NE(replaced, one);
    EXPECT_EQ(store.open(link), one);  // the link still names the first file
    EXPECT_EQ(store.opened(), 2u);

    // What is no regular file is never opened, and not counted.
    EXPECT_EQ(store.open(dir), nullptr);
    EXPECT_EQ(store.open("relative/libx.so"), nullptr);
    EXPECT_EQ(store.open(dir + "/absent.so"), nullptr);
    EXPECT_EQ(store.opened(), 2u);
}

// The worker names one process's stack while the main thread names the same
// addresses for another process, from the same files at the same time (a trace
// written while streams are still named): each gets the same frames. Under
// TSan (scripts/test-sanitizers.sh), a race on a file's tables fails here.
TEST(ObjectFiles, TwoThreadsNameAddressesOfOneFileAtOnce) {
    void* raw[128];
    const int n = backtrace(raw, 128);
    const std::vector<core::ModuleRecord> modules = loadedModules();
    cli::ObjectFiles store;
    cli::ElfSymbolizer onWorker(store), here(store);
    cli::BackgroundSymbolizer worker;
    for (const core::ModuleRecord& m : modules) {
        worker.addModule(&onWorker, std::make_shared<const core::ModuleRecord>(m));
        here.addModule(m);
    }
    std::vector<core::NativeNodeRecord> trie;
    for (int k = 0; k < n; ++k)
        trie.push_back({uint64_t(k + 1), uint64_t(k), reinterpret_cast<uint64_t>(raw[n - 1 - k])});
    worker.addNodes(&onWorker, 1, trie, false);
    std::vector<std::vector<core::Frame>> named;
    for (int i = 0; i < n; ++i) named.push_back(here.symbolize(reinterpret_cast<uint64_t>(raw[i])));
    worker.waitUntilIdle();
    worker.reclaim(&onWorker);
    ASSERT_TRUE(onWorker.known(reinterpret_cast<uint64_t>(raw[0])));
    int compared = 0;
    for (int i = 0; i < n; ++i) {
        const uint64_t ip = reinterpret_cast<uint64_t>(raw[i]);
        if (!onWorker.known(ip)) continue;
        const std::vector<core::Frame>& theirs = onWorker.symbolize(ip);
        ASSERT_EQ(theirs.size(), named[i].size()) << i;
        for (size_t f = 0; f < theirs.size(); ++f)
            EXPECT_TRUE(theirs[f].identity() == named[i][f].identity()) << i << " " << f;
        ++compared;
    }
    EXPECT_GE(compared, 2);  // this test's frame and main's, at least
    EXPECT_LE(store.opened(), modules.size());
}
