#pragma once
// A fresh directory under /tmp for a test's files, removed with everything in it
// when the test process that made it exits. Test suites run thousands of
// processes, and what they leave in /tmp slows every later `memtool run`, which
// reads /tmp for the directories of runs that died.

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace memtool::test_support {

inline std::string makeTempDir(const std::string& prefix) {
    std::string dir = "/tmp/" + prefix + "-XXXXXX";
    if (!mkdtemp(dir.data())) throw std::runtime_error("mkdtemp " + dir);
    static std::mutex mu;
    static std::vector<std::string>* made = nullptr;
    static pid_t owner = 0;
    std::lock_guard<std::mutex> lock(mu);
    if (!made) {
        made = new std::vector<std::string>;
        owner = getpid();
        std::atexit([] {
            if (getpid() != owner) return;  // a forked child's exit: the parent still uses them
            for (const std::string& d : *made) {
                std::error_code ignored;
                std::filesystem::remove_all(d, ignored);
            }
        });
    }
    made->push_back(dir);
    return dir;
}

}  // namespace memtool::test_support
