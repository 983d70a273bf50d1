// The collector library as a shared object: what it exports, what it carries,
// and that it can be loaded into a running process.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "tests/e2e/E2eSupport.h"

using namespace memtool::e2e;

namespace {
std::string output(const std::string& command) {
    std::string out;
    FILE* p = popen(command.c_str(), "r");
    if (!p) return out;
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    pclose(p);
    return out;
}
}  // namespace

// The Python package (and any tool) may dlopen the collector into a process that
// runs already: its initial-exec TLS must fit glibc's small static-TLS surplus.
TEST(CollectorLibrary, LoadsIntoARunningProcess) {
    Outcome o = run({PYTHON_BIN, "-c",
                     "import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); "
                     "print(lib.memtool_collector_api_version())",
                     COLLECTOR_LIB});
    EXPECT_EQ(o.exitCode, 0) << o.err;
    EXPECT_EQ(o.out, "3\n");
    EXPECT_EQ(o.err, "");  // outside memtool run it stays silent and inactive
}

// It carries no stream reader and nothing that throws: an exception must never
// unwind through the program it observes.
TEST(CollectorLibrary, CarriesNoReaderAndNothingThatThrows) {
    const std::string symbols = output(std::string("nm -C ") + COLLECTOR_LIB);
    ASSERT_NE(symbols.find("memtool_record_alloc"), std::string::npos) << "nm failed";
    for (const char* banned : {"StreamDecoder", "ProtocolError", "__cxa_throw",
                               "__cxa_allocate_exception", "__throw_", "typeinfo for std::"}) {
        EXPECT_EQ(symbols.find(banned), std::string::npos) << banned;
    }
}

// Its exported surface is collectors/CollectorApi.h's declarations, and the
// interposed libc functions (dlopen, _exit, kill, the exec and wait families,
// __libc_start_main): nothing else leaks into the program's symbol scope.
TEST(CollectorLibrary, ExportsOnlyItsCSurface) {
    std::ifstream header(COLLECTOR_API_HEADER);
    std::stringstream text;
    text << header.rdbuf();
    std::set<std::string> declared{
        "_exit",  "close",  "close_range", "closefrom",         "dlopen",        "dlclose",
        "execve", "execv",  "execvp",      "execvpe",           "fexecve",       "execl",
        "execlp", "execle", "kill",        "posix_spawn",       "posix_spawnp",  "waitpid",
        "wait4",  "wait",   "waitid",      "__libc_start_main", "pthread_create"};
    static const std::regex declaration(R"(\n[a-z][a-z0-9_ ]*\*? ?(memtool_[a-z0-9_]+)\()");
    const std::string h = text.str();
    for (std::sregex_iterator it(h.begin(), h.end(), declaration), end; it != end; ++it)
        declared.insert((*it)[1]);
    ASSERT_GT(declared.size(), 10u) << "the header's declarations were not found";
    std::set<std::string> exported;
    std::stringstream names(
        output(std::string("nm -D --defined-only ") + COLLECTOR_LIB + " | awk '{print $3}'"));
    for (std::string name; std::getline(names, name);) exported.insert(name);
    EXPECT_EQ(exported, declared);
}

// A library that loads a sibling by bare name through its own run path (pip's
// torch, cuDNN, triton do) finds it under memtool as it does without.
TEST(CollectorLibrary, DlopenSearchesTheCallersRunPaths) {
    const std::string dir =
        std::string(DLOPEN_USER_BIN).substr(0, std::string(DLOPEN_USER_BIN).rfind('/'));
    Outcome bare = run({DLOPEN_USER_BIN, dir});
    ASSERT_EQ(bare.out, "runpath 42 rpath 42\n") << bare.err;
    const std::string trace = tempDir() + "/t.json";
    Outcome profiled = run({MEMTOOL_BIN, "run", "-q", "-o", trace, "--", DLOPEN_USER_BIN, dir});
    EXPECT_EQ(profiled.exitCode, 0) << profiled.err;
    EXPECT_EQ(profiled.out, "runpath 42 rpath 42\n");
}

// Every dlopen looks at the loaded objects again, skipping those checked before
// while nothing was unloaded. Here one was: the libc10 loaded where it was must
// be checked, hooked and its 3,000,000 bytes recorded.
TEST(CollectorLibrary, AnObjectLoadedWhereAnUnloadedOneWasIsHooked) {
    const std::string bin = RELOAD_USER_BIN;
    const std::string dir = bin.substr(0, bin.rfind('/'));
    Outcome bare = run({bin, dir});
    ASSERT_EQ(bare.exitCode, 0) << bare.out << bare.err;
    // Without the reuse this test would check nothing it means to.
    ASSERT_EQ(bare.out, "reused 1\n");
    Profiled p = profile({bin, dir});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    ASSERT_EQ(p.outcome.out, "reused 1\n");
    const auto& cpu = p.process().at("devices").at("cpu");
    EXPECT_EQ(cpu.at("alloc_count"), 1);
    EXPECT_EQ(cpu.at("allocated_bytes"), 3000000);
    EXPECT_EQ(cpu.at("current_bytes"), 0);
}

// A torch memtool has never seen (3.0.0, tests/fakes/nexttorch): where its libc10
// allocates as every known one does, its figures are exact; where it does not call
// posix_memalign, the trace says so in one warning that names the torch, and the
// program runs on as it does bare.
namespace {
const char kBlocks[] =
    "import ctypes, sys\n"
    "c10 = ctypes.CDLL(sys.argv[1])\n"
    "c10.block_alloc.restype = ctypes.c_void_p\n"
    "c10.block_alloc.argtypes = [ctypes.c_size_t]\n"
    "c10.block_free.argtypes = [ctypes.c_void_p]\n"
    "c10.block_free(c10.block_alloc(3000000))\n"
    "print('ok')\n";
std::string nextTorchC10(const std::string& kind) {
    return E2E_PATH(NEXT_TORCH_DIR) + "/" + kind + "/torch/lib/libc10.so";
}
}  // namespace

TEST(CollectorLibrary, ATorchNeverSeenThatAllocatesAsTheKnownOnesIsCountedExactly) {
    Profiled p = profile({PYTHON_BIN, "-c", kBlocks, nextTorchC10("hooked")});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(p.outcome.out, "ok\n");
    EXPECT_EQ(p.process().at("warnings"), nlohmann::json::array());
    const auto& cpu = p.process().at("devices").at("cpu");
    EXPECT_EQ(cpu.at("alloc_count"), 1);
    EXPECT_EQ(cpu.at("allocated_bytes"), 3000000);
    EXPECT_EQ(cpu.at("current_bytes"), 0);
}

TEST(CollectorLibrary, ATorchNeverSeenThatAllocatesOtherwiseIsNamedInOneWarning) {
    const std::string c10 = nextTorchC10("unhooked");
    Profiled p = profile({PYTHON_BIN, "-c", kBlocks, c10});
    ASSERT_EQ(p.outcome.exitCode, 0) << p.outcome.err;
    EXPECT_EQ(p.outcome.out, "ok\n");
    EXPECT_EQ(p.outcome.err, "");
    EXPECT_EQ(p.process().at("warnings"),
              nlohmann::json::array(
                  {c10 + " (torch 3.0.0) does not call posix_memalign through its imports, as the "
                         "libc10 of every torch memtool knows (1.13 to 2.14) does: its CPU "
                         "storages are not counted"}));
    EXPECT_EQ(p.process().at("devices"), nlohmann::json::object()) << p.process().dump(1);
}
