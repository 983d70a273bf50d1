#pragma once
// Helpers for end-to-end tests: run a command with pipes (no shell), read traces.

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace memtool::e2e {

inline constexpr uint64_t MiB = uint64_t{1} << 20;

// The value of environment variable `envName` when set, else `compiledDefault`.
std::string configured(const char* envName, const char* compiledDefault);

// The Python (with torch) the tests run their programs on: E2E_PYTHON_BIN, else the
// tree's MEMTOOL_TEST_PYTHON (scripts/setup.sh: the test venv's torch 2.x; a plain
// cmake: /usr/bin/python3). Compiled into E2eSupport.cpp alone, so a tree set to
// another Python rebuilds one file. A run whose E2E_PYTHON_BIN names no interpreter
// here (the python3.12 twins on a machine without it) skips every test, saying so.
std::string pythonBin();

}  // namespace memtool::e2e

// Where the programs under test are (std::string; empty: not built). Compiled in by
// tests/CMakeLists.txt (E2E_DEFAULT_<NAME>); each is replaced at run time by the
// environment variable E2E_<NAME>, so this binary runs where its build tree is not
// (scripts/gpu-check.sh sets them).
#define E2E_PATH(name) ::memtool::e2e::configured("E2E_" #name, E2E_DEFAULT_##name)
#define MEMTOOL_BIN E2E_PATH(MEMTOOL_BIN)
#define COLLECTOR_LIB E2E_PATH(COLLECTOR_LIB)
#define COLLECTOR_API_HEADER E2E_PATH(COLLECTOR_API_HEADER)
#define SCRIPTS_DIR E2E_PATH(SCRIPTS_DIR)
#define PYTHON_BIN ::memtool::e2e::pythonBin()
#define CUDA_RUNTIME_USER_BIN E2E_PATH(CUDA_RUNTIME_USER_BIN)
#define CUDA_LOCAL_USER_BIN E2E_PATH(CUDA_LOCAL_USER_BIN)
#define CUDA_LOCAL_LIB E2E_PATH(CUDA_LOCAL_LIB)
#define FAKE_TORCH_BRIDGE E2E_PATH(FAKE_TORCH_BRIDGE)
#define FAKE_NVML E2E_PATH(FAKE_NVML)
#define DLOPEN_USER_BIN E2E_PATH(DLOPEN_USER_BIN)
#define FORK_UNDER_LOCKS_BIN E2E_PATH(FORK_UNDER_LOCKS_BIN)
#define RELOAD_USER_BIN E2E_PATH(RELOAD_USER_BIN)
#define STATIC_PROGRAM_BIN E2E_PATH(STATIC_PROGRAM_BIN)
#define CUDA_REGION_USER_BIN E2E_PATH(CUDA_REGION_USER_BIN)  // empty without the CUDA parts
#define FAKE_CUDA_DRIVER E2E_PATH(FAKE_CUDA_DRIVER)
#define NPU_REGION_USER_BIN E2E_PATH(NPU_REGION_USER_BIN)
#define FAKE_ASCEND_CL E2E_PATH(FAKE_ASCEND_CL)
#define COURTESY_USER_BIN E2E_PATH(COURTESY_USER_BIN)      // empty without LibTorch
#define LEAK_AT_EXIT_BIN E2E_PATH(LEAK_AT_EXIT_BIN)        // empty without LibTorch
#define INLINED_USER_BIN E2E_PATH(INLINED_USER_BIN)        // empty without LibTorch
#define ATTACH_TARGET_BIN E2E_PATH(ATTACH_TARGET_BIN)      // empty without LibTorch
#define REGISTER_KEEPER_BIN E2E_PATH(REGISTER_KEEPER_BIN)  // empty without LibTorch
#define CHROMIUM_BIN E2E_PATH(CHROMIUM_BIN)
#define TMUX_BIN E2E_PATH(TMUX_BIN)
#define HTML_PROBE E2E_PATH(HTML_PROBE)
#define GOLDEN_DIR E2E_PATH(GOLDEN_DIR)
#ifdef E2E_DEFAULT_LIBTORCH_SAMPLE_BIN
#define LIBTORCH_SAMPLE_BIN E2E_PATH(LIBTORCH_SAMPLE_BIN)
#endif
#define CUDA_SAMPLE_BIN E2E_PATH(CUDA_SAMPLE_BIN)
#define TORCH_PYTHON_BIN \
    E2E_PATH(TORCH_PYTHON_BIN)  // the python whose torch the bridge was built against
#define TORCH_BRIDGE_BUILT (E2E_PATH(TORCH_BRIDGE_BUILT) == "1")

namespace memtool::e2e {

struct Outcome {
    int exitCode = -1;  // when it exited
    int signal = 0;     // when a signal ended it
    std::string out, err;
};

// Runs argv with `input` on stdin; `extraEnv` entries are NAME=VALUE. `onStart`
// (if given) gets the pid and the first line the program printed, before the rest
// is read: tests use it to signal the program at a known point without sleeping.
// `cwd`: the directory it runs in (empty: this one).
Outcome run(const std::vector<std::string>& argv, const std::string& input = "",
            const std::vector<std::string>& extraEnv = {},
            const std::function<void(pid_t, const std::string&)>& onStart = nullptr,
            const std::string& cwd = "");

// A program run in the background, for tests that drive two at once (memtool
// attach and its target): its stdout read a line at a time, which is how the test
// knows where the program is; stdin a pipe kept open until closeInput().
class Spawned {
public:
    explicit Spawned(const std::vector<std::string>& argv,
                     const std::vector<std::string>& extraEnv = {});
    ~Spawned();  // one still running is killed (SIGKILL) and reaped
    Spawned(const Spawned&) = delete;
    Spawned& operator=(const Spawned&) = delete;

    pid_t pid() const { return pid_; }
    bool reaped() const { return reaped_; }  // waited for: its pid is no longer its own
    // Its next line of stdout, without the newline; "" at the end of its output.
    std::string readLine();
    void closeInput();
    // Reads what is left (stdout and stderr), waits for it to end. `out` holds all
    // of its stdout, the lines readLine() gave included. Again: the same outcome.
    Outcome wait();

private:
    pid_t pid_ = -1;
    int in_ = -1, out_ = -1, err_ = -1;
    std::string outText_, pending_;
    bool reaped_ = false;
    bool waited_ = false;
    Outcome outcome_;
};

// A fresh directory for one test's files.
std::string tempDir();
// A file's whole content ("" when it cannot be read); readJson throws instead.
std::string readFile(const std::string& path);
nlohmann::json readJson(const std::string& path);

// memtool run -q -o <dir>/trace.json [flags] -- argv, with `extraEnv` entries
// NAME=VALUE; returns the outcome and the trace.
struct Profiled {
    Outcome outcome;
    nlohmann::json trace;
    const nlohmann::json& process() const { return trace.at("processes").at(0); }
};
// `cwd`: the directory memtool runs in (empty: this one); `extraEnv`: NAME=VALUE
// entries added to its environment.
Profiled profile(const std::vector<std::string>& argv, const std::vector<std::string>& flags = {},
                 const std::string& cwd = "", const std::vector<std::string>& extraEnv = {});

std::string script(const std::string& name);  // path of tests/e2e/scripts/<name>
// The first line of `text` that begins with `head` ("" when none does).
std::string lineStarting(const std::string& text, const std::string& head);
// The folder of the torch package PYTHON_BIN imports (/usr/lib/python3/dist-packages/torch
// for Debian's), for the frames of torch's own Python code.
std::string torchPackageDir();
// The major version of that torch (1 for Debian's 1.13), where the tests say why a
// figure differs between torches.
int torchMajorVersion();

// Pausable memory and courtesy tests: the resident set of `pid` from /proc, and
// `memtool ctl WORDS` with `env` entries NAME=VALUE.
uint64_t rssOf(pid_t pid);
// The resident bytes of the one mapping of `pid` that holds `address`: what a
// yield releases of a storage, apart from pages elsewhere that the yield's own
// code touches as it runs.
uint64_t mappingRssOf(pid_t pid, uint64_t address);
Outcome ctl(const std::vector<std::string>& words, const std::vector<std::string>& env = {});
// A control directory private to this test binary (inside a fresh tempDir() that
// others may look up, not list), and the environment that points memtool at it.
std::string controlDir();
std::vector<std::string> controlEnv();
// A program that imports memtool as an installed package would, without memtool run:
// the package beside the collector on PYTHONPATH, the CLI named in MEMTOOL_BIN
// (memtool.track's companion), and controlEnv().
std::vector<std::string> packageEnv();
// The first of `modules` the tests' Python cannot import ("" when it has them all):
// a plain cmake tree's Debian python3 has no pytest, nbclient or ipykernel, which
// scripts/setup.sh's venv has. SKIP_WITHOUT("nbclient", ...) skips a test, saying so.
std::string missingModule(const std::vector<std::string>& modules);
// tests/e2e/scripts/notebook_run.py in `dir`: a notebook using memtool's magics,
// executed headless, written to dir/executed.ipynb (and the first cell's report page
// to dir/executed.ipynb.cell.html); its output cells' text on stdout.
Outcome runNotebook(const std::string& dir);
#define SKIP_WITHOUT(...)                                                         \
    if (const std::string missing = ::memtool::e2e::missingModule({__VA_ARGS__}); \
        !missing.empty())                                                         \
    GTEST_SKIP() << PYTHON_BIN << " has no " << missing << " (scripts/setup.sh's venv has it)"

// The hotspot of `device` whose site contains `needle`; null JSON when none.
nlohmann::json hotspotWithSite(const nlohmann::json& process, const std::string& needle,
                               const std::string& device = "cpu");
// The line row for (file ending with `file`, line); null JSON when none.
nlohmann::json lineRow(const nlohmann::json& process, const std::string& file, int line);

}  // namespace memtool::e2e
