#include "tests/e2e/E2eSupport.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "tests/TempDir.h"

extern char** environ;

namespace memtool::e2e {

namespace {
// argv started with pipes for its stdin, stdout and stderr (the parent's ends in
// `in`, `out`, `err`), `extraEnv` entries NAME=VALUE added, in `cwd` (empty: here).
pid_t forkWithPipes(const std::vector<std::string>& argv, const std::vector<std::string>& extraEnv,
                    const std::string& cwd, int* in, int* out, int* err) {
    int i[2], o[2], e[2];
    if (pipe(i) || pipe(o) || pipe(e)) throw std::runtime_error("pipe");
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(i[0], 0);
        dup2(o[1], 1);
        dup2(e[1], 2);
        for (int fd : {i[0], i[1], o[0], o[1], e[0], e[1]}) close(fd);
        for (const auto& v : extraEnv) putenv(strdup(v.c_str()));
        if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
        std::vector<char*> args;
        for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        execvp(args[0], args.data());
        _exit(127);
    }
    close(i[0]);
    close(o[1]);
    close(e[1]);
    *in = i[1];
    *out = o[0];
    *err = e[0];
    return pid;
}
// Every wait below ends within E2E_DEADLINE_S seconds (300 unless set): a program
// that hangs is killed and fails its test, where it used to hold a ctest slot
// until CI's own limit ended the whole run. A guard against hangs, not a timing
// assertion: no test depends on where it lies.
using Clock = std::chrono::steady_clock;
Clock::time_point deadlineFromNow() {
    const char* set = std::getenv("E2E_DEADLINE_S");
    const long seconds = set ? std::strtol(set, nullptr, 10) : 300;
    return Clock::now() + std::chrono::seconds(seconds > 0 ? seconds : 300);
}
int msLeft(Clock::time_point deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}
void killHung(pid_t pid, const char* what) {
    ADD_FAILURE() << "process " << pid << " " << what
                  << " past the e2e deadline (E2E_DEADLINE_S): killed";
    kill(pid, SIGKILL);
}

// Reads `out` and `err` to their ends into `outText` and `errText`, closing each;
// `onOut` (where given) runs after each read of stdout. Past the deadline, `pid` is
// killed and what is left unread is dropped.
void readToEnd(pid_t pid, int out, int err, std::string& outText, std::string& errText,
               const std::function<void()>& onOut = nullptr) {
    const Clock::time_point deadline = deadlineFromNow();
    pollfd fds[2] = {{out, POLLIN, 0}, {err, POLLIN, 0}};
    int open = (out >= 0) + (err >= 0);  // poll() skips a closed one's entry
    char buf[65536];
    while (open > 0) {
        const int ready = poll(fds, 2, msLeft(deadline));
        if (ready < 0) continue;
        if (ready == 0) {
            killHung(pid, "was still writing or holding its output");
            for (pollfd& f : fds)
                if (f.fd >= 0) close(f.fd);
            return;
        }
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            const ssize_t n = read(fds[i].fd, buf, sizeof buf);
            if (n <= 0) {
                close(fds[i].fd);
                fds[i].fd = -1;
                --open;
                continue;
            }
            (i == 0 ? outText : errText).append(buf, static_cast<size_t>(n));
            if (i == 0 && onOut) onOut();
        }
    }
}

// waitpid(pid), bounded by the deadline (a pidfd tells when it ended); false when
// `pid` was not there to reap.
bool reap(pid_t pid, int* status) {
    const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (fd >= 0) {
        pollfd ended = {fd, POLLIN, 0};
        const Clock::time_point deadline = deadlineFromNow();
        while (true) {
            const int ready = poll(&ended, 1, msLeft(deadline));
            if (ready < 0 && errno == EINTR) continue;
            if (ready == 0) killHung(pid, "had closed its output but ran on");
            break;
        }
        close(fd);
    }
    return waitpid(pid, status, 0) == pid;
}

// How a waited-for process ended, into `o`.
void setEnding(Outcome& o, int status) {
    if (WIFEXITED(status)) o.exitCode = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) o.signal = WTERMSIG(status);
}

}  // namespace

Outcome run(const std::vector<std::string>& argv, const std::string& input,
            const std::vector<std::string>& extraEnv,
            const std::function<void(pid_t, const std::string&)>& onStart, const std::string& cwd) {
    int in = -1, out = -1, err = -1;
    const pid_t pid = forkWithPipes(argv, extraEnv, cwd, &in, &out, &err);
    if (!input.empty()) {
        ssize_t w = write(in, input.data(), input.size());
        (void)w;
    }
    close(in);
    Outcome o;
    bool started = !onStart;
    readToEnd(pid, out, err, o.out, o.err, [&] {
        if (!started && o.out.find('\n') != std::string::npos) {
            started = true;
            onStart(pid, o.out.substr(0, o.out.find('\n')));
        }
    });
    int status = 0;
    if (!reap(pid, &status)) return o;  // already reaped by onStart
    setEnding(o, status);
    return o;
}

Spawned::Spawned(const std::vector<std::string>& argv, const std::vector<std::string>& extraEnv) {
    pid_ = forkWithPipes(argv, extraEnv, "", &in_, &out_, &err_);
}

Spawned::~Spawned() {
    if (!reaped_ && pid_ > 0) {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
    }
    for (int fd : {in_, out_, err_})
        if (fd >= 0) close(fd);
}

std::string Spawned::readLine() {
    char buf[4096];
    const auto deadline = deadlineFromNow();
    while (pending_.find('\n') == std::string::npos) {
        pollfd readable = {out_, POLLIN, 0};
        const int ready = out_ >= 0 ? poll(&readable, 1, msLeft(deadline)) : 1;
        if (ready < 0) continue;
        if (ready == 0) {
            killHung(pid_, "printed no line");
            return "";
        }
        const ssize_t n = out_ >= 0 ? read(out_, buf, sizeof buf) : 0;
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            std::string rest = std::move(pending_);
            pending_.clear();
            return rest;
        }
        pending_.append(buf, static_cast<size_t>(n));
        outText_.append(buf, static_cast<size_t>(n));
    }
    const size_t eol = pending_.find('\n');
    std::string line = pending_.substr(0, eol);
    pending_.erase(0, eol + 1);
    return line;
}

void Spawned::closeInput() {
    if (in_ >= 0) close(in_);
    in_ = -1;
}

Outcome Spawned::wait() {
    // A second wait gives the first's outcome: the pid is reaped, the pipes closed
    // (it used to poll no descriptor at all, forever).
    if (waited_) return outcome_;
    closeInput();
    Outcome o;
    readToEnd(pid_, out_, err_, outText_, o.err);
    out_ = err_ = -1;
    int status = 0;
    if (reap(pid_, &status)) {
        reaped_ = true;
        setEnding(o, status);
    }
    o.out = outText_;
    waited_ = true;
    outcome_ = o;
    return o;
}

std::string configured(const char* envName, const char* compiledDefault) {
    const char* value = std::getenv(envName);
    return value ? value : compiledDefault;
}

std::string pythonBin() { return configured("E2E_PYTHON_BIN", E2E_DEFAULT_PYTHON_BIN); }

namespace {

// Registered before main (gtest_main): a GTEST_SKIP in a global environment's SetUp
// skips every test of the run.
class PythonPresent : public ::testing::Environment {
public:
    void SetUp() override {
        const char* asked = std::getenv("E2E_PYTHON_BIN");
        if (asked && access(asked, X_OK) != 0)
            GTEST_SKIP() << "E2E_PYTHON_BIN=" << asked << " is not installed here";
    }
};
[[maybe_unused]] ::testing::Environment* const gPythonPresent =
    ::testing::AddGlobalTestEnvironment(new PythonPresent);

}  // namespace

std::string torchPackageDir() {
    Outcome o = run({PYTHON_BIN, "-c", "import os, torch; print(os.path.dirname(torch.__file__))"});
    if (o.exitCode != 0 || o.out.empty()) throw std::runtime_error(PYTHON_BIN + " has no torch");
    return o.out.substr(0, o.out.size() - 1);
}

int torchMajorVersion() {
    Outcome o = run({PYTHON_BIN, "-c", "import torch; print(torch.__version__.split('.')[0])"});
    if (o.exitCode != 0 || o.out.empty()) throw std::runtime_error(PYTHON_BIN + " has no torch");
    return std::stoi(o.out);
}

std::string tempDir() { return memtool::test_support::makeTempDir("memtool-test"); }

std::string readFile(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

nlohmann::json readJson(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::stringstream s;
    s << in.rdbuf();
    return nlohmann::json::parse(s.str());
}

Profiled profile(const std::vector<std::string>& argv, const std::vector<std::string>& flags,
                 const std::string& cwd, const std::vector<std::string>& extraEnv) {
    std::string trace = tempDir() + "/trace.json";
    std::vector<std::string> cmd{MEMTOOL_BIN, "run", "-q", "-o", trace};
    cmd.insert(cmd.end(), flags.begin(), flags.end());
    cmd.push_back("--");
    cmd.insert(cmd.end(), argv.begin(), argv.end());
    Profiled p;
    p.outcome = run(cmd, "", extraEnv, nullptr, cwd);
    p.trace = readJson(trace);
    return p;
}

std::string script(const std::string& name) { return SCRIPTS_DIR + "/" + name; }

namespace {
uint64_t statusKiB(pid_t pid, const std::string& field) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind(field, 0) == 0) return std::stoull(line.substr(field.size())) * 1024;
    return 0;
}
}  // namespace

uint64_t rssOf(pid_t pid) { return statusKiB(pid, "VmRSS:"); }

uint64_t mappingRssOf(pid_t pid, uint64_t address) {
    std::ifstream smaps("/proc/" + std::to_string(pid) + "/smaps");
    bool inside = false;
    for (std::string line; std::getline(smaps, line);) {
        const size_t dash = line.find('-');
        if (dash != std::string::npos && dash > 0 &&
            line.find_first_not_of("0123456789abcdef") == dash) {  // a mapping's header
            const uint64_t start = std::stoull(line.substr(0, dash), nullptr, 16);
            const uint64_t end = std::stoull(line.substr(dash + 1), nullptr, 16);
            inside = start <= address && address < end;
        } else if (inside && line.rfind("Rss:", 0) == 0) {
            return std::stoull(line.substr(4)) * 1024;
        }
    }
    return 0;
}

Outcome ctl(const std::vector<std::string>& words, const std::vector<std::string>& env) {
    std::vector<std::string> argv{MEMTOOL_BIN, "ctl"};
    argv.insert(argv.end(), words.begin(), words.end());
    return run(argv, "", env);
}

std::string controlDir() {
    static const std::string dir = [] {
        const std::string parent = tempDir();
        chmod(parent.c_str(), 0711);
        return parent + "/control";
    }();
    return dir;
}

std::vector<std::string> controlEnv() { return {"MEMTOOL_CONTROL_DIR=" + controlDir()}; }

std::string missingModule(const std::vector<std::string>& modules) {
    for (const std::string& m : modules)
        if (run({PYTHON_BIN, "-c", "import " + m}).exitCode != 0) return m;
    return "";
}

Outcome runNotebook(const std::string& dir) {
    return run({PYTHON_BIN, script("notebook_run.py"), dir + "/executed.ipynb"}, "", packageEnv(),
               nullptr, dir);
}

std::vector<std::string> packageEnv() {
    const std::string lib = COLLECTOR_LIB;
    std::vector<std::string> env = controlEnv();
    env.push_back("MEMTOOL_BIN=" + std::string(MEMTOOL_BIN));
    env.push_back("PYTHONPATH=" + lib.substr(0, lib.rfind('/')) + "/python");
    return env;
}

nlohmann::json hotspotWithSite(const nlohmann::json& process, const std::string& needle,
                               const std::string& device) {
    for (const auto& h : process.at("hotspots"))
        if (h.at("device") == device &&
            h.at("site").get<std::string>().find(needle) != std::string::npos)
            return h;
    return nullptr;
}

nlohmann::json lineRow(const nlohmann::json& process, const std::string& file, int line) {
    for (const auto& l : process.at("lines")) {
        std::string f = l.at("file");
        if (l.at("line") == line && f.size() >= file.size() &&
            f.compare(f.size() - file.size(), file.size(), file) == 0)
            return l;
    }
    return nullptr;
}

std::string lineStarting(const std::string& text, const std::string& head) {
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        if (line.rfind(head, 0) == 0) return line;
    return "";
}

}  // namespace memtool::e2e
