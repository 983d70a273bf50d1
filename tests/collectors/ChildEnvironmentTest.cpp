// A child's environment completed with memtool's variables: what it lacks is
// added as the parent had it, memtool's entries go first in the child's own
// LD_PRELOAD and PYTHONPATH, and nothing the child has is taken away.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "collectors/preload/ChildEnvironment.h"
#include "tests/TempDir.h"

using memtool::collectors::ChildEnvironment;

namespace {

const char* kCollector = "/opt/memtool/lib/libmemtool_collector.so";

// NAME=value strings, null-terminated, as exec takes them.
struct Env {
    std::vector<std::string> text;
    std::vector<char*> pointers;
    explicit Env(std::vector<std::string> entries) : text(std::move(entries)) {
        for (std::string& s : text) pointers.push_back(s.data());
        pointers.push_back(nullptr);
    }
    char* const* get() { return pointers.data(); }
};

// What `capture` took from `start`, applied to `child`: the child's list, or
// the child's own pointer when nothing was missing.
std::vector<std::string> completed(ChildEnvironment& c, char* const* child, bool* same = nullptr) {
    const size_t room = c.roomFor(child);
    std::vector<std::string> out;
    char* const* env = child;
    std::vector<void*> storage;  // pointer-aligned room
    if (room > 0) {
        storage.resize(room / sizeof(void*) + 1);
        env = c.complete(child, storage.data());
        // Every byte it wrote was inside the room it asked for.
        size_t entries = 0;
        while (env[entries]) ++entries;
        const char* begin = reinterpret_cast<const char*>(storage.data());
        for (size_t i = 0; i < entries; ++i) {
            bool own = false;
            for (char* const* e = child; e && *e; ++e) own |= env[i] == *e;
            if (env[i] >= begin && env[i] < begin + room) {
                EXPECT_LE(env[i] + std::strlen(env[i]) + 1, begin + room) << env[i];
            } else if (!own) {
                EXPECT_EQ(std::string(env[i]).rfind("MEMTOOL_", 0) == 0 ||
                              std::string(env[i]).rfind("LD_PRELOAD=", 0) == 0 ||
                              std::string(env[i]).rfind("CUDA_INJECTION64_PATH=", 0) == 0 ||
                              std::string(env[i]).rfind("PYTHONPATH=", 0) == 0,
                          true)
                    << env[i];
            }
        }
        EXPECT_LE(reinterpret_cast<const char*>(env + entries + 1), begin + room);
    }
    if (same) *same = env == child;
    for (char* const* e = env; *e; ++e) out.emplace_back(*e);
    return out;
}

Env memtoolStart(const std::string& pythonPath = "") {
    std::vector<std::string> e{"HOME=/root",
                               "MEMTOOL_SOCKET=/tmp/memtool-1/s",
                               "MEMTOOL_OPTIONS=native=1,python=1,cudahooks=0,pausable=0",
                               "MEMTOOL_BACKUP_DIR=/tmp",
                               "MEMTOOL_CONTROL_SOCKET=/tmp/memtool-1/c",
                               "CUDA_INJECTION64_PATH=/opt/memtool/lib/libmemtool_cupti.so",
                               std::string("LD_PRELOAD=") + kCollector + ":/usr/lib/libuser.so"};
    if (!pythonPath.empty()) e.push_back("PYTHONPATH=" + pythonPath);
    return Env(e);
}

}  // namespace

TEST(ChildEnvironment, AnEnvironmentThatHasItAllGoesAsItIs) {
    Env start = memtoolStart();
    ChildEnvironment c;
    c.capture(start.get(), kCollector);
    ASSERT_TRUE(c.captured());
    EXPECT_EQ(c.roomFor(start.get()), 0u);
    bool same = false;
    EXPECT_EQ(completed(c, start.get(), &same).size(), 7u);
    EXPECT_TRUE(same);
}

TEST(ChildEnvironment, AnEmptyOneGetsEveryVariable) {
    Env start = memtoolStart();
    ChildEnvironment c;
    c.capture(start.get(), kCollector);
    Env child({"PATH=/usr/bin"});
    EXPECT_EQ(completed(c, child.get()),
              (std::vector<std::string>{
                  "PATH=/usr/bin", "MEMTOOL_SOCKET=/tmp/memtool-1/s",
                  "MEMTOOL_OPTIONS=native=1,python=1,cudahooks=0,pausable=0",
                  "MEMTOOL_BACKUP_DIR=/tmp", "MEMTOOL_CONTROL_SOCKET=/tmp/memtool-1/c",
                  "CUDA_INJECTION64_PATH=/opt/memtool/lib/libmemtool_cupti.so",
                  // The collector alone: the parent's other preloads were its own.
                  std::string("LD_PRELOAD=") + kCollector}));
    // exec accepts a null environment as an empty one.
    EXPECT_EQ(completed(c, nullptr).size(), 6u);
}

TEST(ChildEnvironment, TheChildsOwnValuesStayAndItsListsGetTheCollectorFirst) {
    Env start = memtoolStart();
    ChildEnvironment c;
    c.capture(start.get(), kCollector);
    Env child({"LD_PRELOAD=/usr/lib/libjemalloc.so other.so", "MEMTOOL_SOCKET=/tmp/elsewhere",
               "MEMTOOL_OPTIONS=native=0", "MEMTOOL_BACKUP_DIR=/var/tmp",
               "MEMTOOL_CONTROL_SOCKET=/tmp/c2", "CUDA_INJECTION64_PATH=/x/libmemtool_cupti.so",
               "LD_PRELOAD=/second/one.so"});
    EXPECT_EQ(completed(c, child.get()),
              (std::vector<std::string>{
                  std::string("LD_PRELOAD=") + kCollector + ":/usr/lib/libjemalloc.so other.so",
                  "MEMTOOL_SOCKET=/tmp/elsewhere", "MEMTOOL_OPTIONS=native=0",
                  "MEMTOOL_BACKUP_DIR=/var/tmp", "MEMTOOL_CONTROL_SOCKET=/tmp/c2",
                  "CUDA_INJECTION64_PATH=/x/libmemtool_cupti.so", "LD_PRELOAD=/second/one.so"}));
    // The collector anywhere in the list (split at colons or spaces, as the loader
    // does) is enough; an empty list gets it alone.
    Env holds({std::string("LD_PRELOAD=a.so ") + kCollector + ":b.so"});
    EXPECT_EQ(completed(c, holds.get()).at(0), holds.text.at(0));
    Env empty({"LD_PRELOAD="});
    EXPECT_EQ(completed(c, empty.get()).at(0), std::string("LD_PRELOAD=") + kCollector);
    // A name that only begins like one of memtool's is another variable.
    Env lookalike({"MEMTOOL_SOCKETS=x", "LD_PRELOADED=y"});
    const auto got = completed(c, lookalike.get());
    EXPECT_EQ(got.at(0), "MEMTOOL_SOCKETS=x");
    EXPECT_EQ(got.at(1), "LD_PRELOADED=y");
    EXPECT_EQ(got.size(), 8u);
}

TEST(ChildEnvironment, ThePackageEntryOfPythonPathIsCarriedWhenItIsMemtools) {
    const std::string dir = memtool::test_support::makeTempDir("child-env");
    std::filesystem::create_directories(dir + "/memtool");
    std::ofstream(dir + "/memtool/__init__.py") << "\n";
    Env start = memtoolStart(dir + ":/home/user/lib");
    ChildEnvironment c;
    c.capture(start.get(), kCollector);
    Env child({"PYTHONPATH=/srv/app", "X=1"});
    const auto got = completed(c, child.get());
    EXPECT_EQ(got.at(0), "PYTHONPATH=" + dir + ":/srv/app");
    EXPECT_EQ(got.size(), 8u);
    Env none({"X=1"});
    EXPECT_EQ(completed(c, none.get()).back(), "PYTHONPATH=" + dir);

    // A first entry without the package is the user's: not carried.
    Env userFirst = memtoolStart("/home/user/lib:" + dir);
    ChildEnvironment u;
    u.capture(userFirst.get(), kCollector);
    for (const std::string& e : completed(u, none.get())) EXPECT_NE(e.rfind("PYTHONPATH=", 0), 0u);
}

TEST(ChildEnvironment, AProgramsOwnCudaInjectionIsNotPassedOn) {
    Env start({"MEMTOOL_SOCKET=/s", "CUDA_INJECTION64_PATH=/usr/lib/libnsight_injection.so"});
    ChildEnvironment c;
    c.capture(start.get(), kCollector);
    Env child({"A=1"});
    EXPECT_EQ(completed(c, child.get()),
              (std::vector<std::string>{"A=1", "MEMTOOL_SOCKET=/s",
                                        std::string("LD_PRELOAD=") + kCollector}));
}

TEST(ChildEnvironment, NothingCapturedCompletesNothing) {
    ChildEnvironment c;
    EXPECT_FALSE(c.captured());
    Env child({"A=1"});
    EXPECT_EQ(c.roomFor(child.get()), 0u);
    EXPECT_EQ(c.roomFor(nullptr), 0u);
    // A value too long for its store is left out, the rest kept.
    const std::string huge(20000, 'x');
    Env start({"MEMTOOL_SOCKET=/s", "MEMTOOL_BACKUP_DIR=/" + huge});
    c.capture(start.get(), kCollector);
    EXPECT_EQ(completed(c, child.get()),
              (std::vector<std::string>{"A=1", "MEMTOOL_SOCKET=/s",
                                        std::string("LD_PRELOAD=") + kCollector}));
}
