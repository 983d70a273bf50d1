#include "cli/ctl/CtlCommand.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <tuple>

#include "cli/ctl/ControlDirectory.h"
#include "cli/ctl/CtlSelection.h"
#include "cli/policy/Policy.h"
#include "core/CtlArgs.h"
#include "core/Error.h"
#include "core/Files.h"
#include "core/Units.h"
#include "reporters/Markup.h"
#include "reporters/ProcessSelection.h"
#include "trace/TraceReader.h"

namespace memtool::cli {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(int code, const std::string& message) { throw core::Error(code, message); }

// A connection to the run socket at `path` (non-blocking where asked), or -1 with
// errno saying why there is none (ENAMETOOLONG: a path no socket address holds).
int connectToRun(const std::string& path, bool nonblocking) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof addr.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    const int fd =
        socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0) fail(1, "cannot create a socket");
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return fd;
    const int err = errno;
    close(fd);
    errno = err;
    return -1;
}

// One question to one run, one JSON line back. Empty when the run is gone (a
// stale socket: unlinked, since our private directory holds only our runs').
json exchange(const std::string& socketPath, const json& request, double timeoutS, bool* stale) {
    *stale = false;
    const int fd = connectToRun(socketPath, /*nonblocking=*/false);
    if (fd < 0) {
        const int err = errno;
        if (err == ENAMETOOLONG) fail(1, "cannot create a socket");
        if (err == ECONNREFUSED || err == ENOENT) {
            *stale = true;
            if (err == ECONNREFUSED) unlink(socketPath.c_str());
            return nullptr;
        }
        fail(1, fmt::format("cannot reach {}: {}", socketPath, std::strerror(err)));
    }
    const std::string text = request.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    if (send(fd, text.data(), text.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(text.size())) {
        close(fd);
        *stale = true;
        return nullptr;
    }
    std::string reply;
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeoutS);
    while (reply.find('\n') == std::string::npos) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        pollfd p{fd, POLLIN, 0};
        if (left <= 0 || poll(&p, 1, static_cast<int>(std::min<int64_t>(left, INT_MAX))) == 0) {
            close(fd);
            fail(1, fmt::format(
                        "no answer within {:g} s (the command may still be running in the process; "
                        "--timeout waits longer)",
                        timeoutS));
        }
        char buf[65536];
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        reply.append(buf, static_cast<size_t>(n));
    }
    close(fd);
    if (reply.find('\n') == std::string::npos) {
        *stale = true;  // the run ended while we asked
        return nullptr;
    }
    json j = json::parse(reply.substr(0, reply.find('\n')), nullptr, false);
    if (j.is_discarded() || !j.is_object())
        fail(1, "memtool run answered something that is not JSON");
    return j;
}

// ---- a run's answer is another program's data ----------------------------------
// Every field ctl reads of it is checked for its type and range: one that is wrong
// ends ctl with one line naming it (exit 1), never an exception of the JSON
// library's (exit 70) or a figure made of a negative number. Text is shown
// through escapeTerminal(): a tag or message cannot drive the terminal.

[[noreturn]] void malformed(const std::string& what) {
    fail(1, "memtool run answered something malformed: " + what);
}

const json& member(const json& o, const char* key) {
    static const json absent;
    if (!o.is_object()) malformed(fmt::format("not an object where '{}' was expected", key));
    const auto it = o.find(key);
    return it == o.end() ? absent : *it;
}

std::string textOf(const json& o, const char* key, const std::string& otherwise = "") {
    const json& v = member(o, key);
    if (v.is_null()) return otherwise;
    if (!v.is_string()) malformed(fmt::format("'{}' is not text", key));
    return reporters::escapeTerminal(v.get<std::string>());
}

uint64_t countOf(const json& o, const char* key) {
    const json& v = member(o, key);
    if (v.is_null()) return 0;
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
        malformed(fmt::format("'{}' is not a count of bytes or things", key));
    return v.get<uint64_t>();
}

double secondsOf(const json& o, const char* key) {
    const json& v = member(o, key);
    if (v.is_null()) return 0;
    if (!v.is_number() || !(v.get<double>() >= 0 && v.get<double>() <= 1e9))
        malformed(fmt::format("'{}' is not a number of seconds", key));
    return v.get<double>();
}

bool flagOf(const json& o, const char* key) {
    const json& v = member(o, key);
    if (v.is_null()) return false;
    if (!v.is_boolean()) malformed(fmt::format("'{}' is not true or false", key));
    return v.get<bool>();
}

const json& listOf(const json& o, const char* key) {
    static const json none = json::array();
    const json& v = member(o, key);
    if (v.is_null()) return none;
    if (!v.is_array()) malformed(fmt::format("'{}' is not a list", key));
    return v;
}

int64_t pidOf(const json& o) {
    const json& v = member(o, "pid");
    if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > INT32_MAX)
        malformed("'pid' is not a process id");
    return v.get<int64_t>();
}

// ---- every run of this user, asked at once ---------------------------------------

struct Run {
    std::string socket;
    json listing;
};

// How long a run may take to say what it runs: an event loop answers at once, so
// one that does not within this is stopped (Ctrl-Z, a debugger) or wedged.
constexpr double kListDeadlineS = 5;

// The run's pid, from its socket's name (run-PID.sock).
std::string runPidOf(const std::string& socket) {
    const size_t slash = socket.rfind('/');
    const std::string name = socket.substr(slash + 1);
    return name.substr(4, name.size() - 9);
}

// Every live run of this user, each asked {"op":"list"} at once, with a deadline
// for all of them together; a run that does not answer in time is named on stderr
// and left out (its pid in `silent`).
std::vector<Run> discoverRuns(double timeoutS, std::vector<std::string>* silent = nullptr) {
    const std::string dir = controlDirectory(/*create=*/false, 1);
    DIR* d = opendir(dir.c_str());
    if (!d) return {};
    std::vector<std::string> sockets;
    while (dirent* e = readdir(d)) {
        const std::string name = e->d_name;
        if (name.rfind("run-", 0) == 0 && name.size() > 9 &&
            name.compare(name.size() - 5, 5, ".sock") == 0)
            sockets.push_back(dir + "/" + name);
    }
    closedir(d);
    std::sort(sockets.begin(), sockets.end());
    struct Asked {
        std::string socket;
        int fd;
        std::string reply;
        bool done;
    };
    std::vector<Asked> asked;
    const std::string question = json{{"op", "list"}}.dump() + "\n";
    for (const auto& path : sockets) {
        // A stopped run's backlog still takes the connection (and, when full,
        // refuses it with EAGAIN: no answer either).
        const int fd = connectToRun(path, /*nonblocking=*/true);
        if (fd < 0) {
            const int err = errno;
            if (err == ECONNREFUSED)
                unlink(path.c_str());  // a dead run's leftover
            else if (err == EAGAIN && silent)
                silent->push_back(runPidOf(path));
            continue;
        }
        if (send(fd, question.data(), question.size(), MSG_NOSIGNAL) !=
            static_cast<ssize_t>(question.size())) {
            close(fd);
            continue;
        }
        asked.push_back(Asked{path, fd, {}, false});
    }
    const auto deadline =
        Clock::now() + std::chrono::duration<double>(std::min(timeoutS, kListDeadlineS));
    for (;;) {
        std::vector<pollfd> waiting;
        for (const auto& a : asked)
            if (!a.done) waiting.push_back(pollfd{a.fd, POLLIN, 0});
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (waiting.empty() || left <= 0) break;
        if (poll(waiting.data(), waiting.size(), static_cast<int>(left)) <= 0) continue;
        for (auto& a : asked) {
            if (a.done) continue;
            char buf[65536];
            const ssize_t n = read(a.fd, buf, sizeof buf);
            if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            if (n <= 0) {  // the run ended as we asked
                a.done = true;
                a.reply.clear();
                continue;
            }
            a.reply.append(buf, static_cast<size_t>(n));
            a.done = a.reply.find('\n') != std::string::npos || a.reply.size() > (64u << 20);
        }
    }
    std::vector<Run> runs;
    for (auto& a : asked) {
        close(a.fd);
        const size_t newline = a.reply.find('\n');
        if (!a.done || (newline == std::string::npos && !a.reply.empty())) {
            if (silent) silent->push_back(runPidOf(a.socket));
            std::cerr << fmt::format(
                "memtool: memtool run {} did not answer within {:g} s (stopped, or busy); its "
                "processes are left out\n",
                runPidOf(a.socket), std::min(timeoutS, kListDeadlineS));
            continue;
        }
        if (newline == std::string::npos) continue;  // gone
        json listing = json::parse(a.reply.substr(0, newline), nullptr, false);
        if (listing.is_discarded() || !listing.is_object()) malformed("a listing that is not JSON");
        for (const auto& p : listOf(listing, "processes")) pidOf(p);
        runs.push_back(Run{a.socket, std::move(listing)});
    }
    return runs;
}

// A process's rank where its launcher set one (the run lists it from the handshake).
std::optional<int64_t> rankOf(const json& process) {
    if (member(process, "rank").is_null()) return std::nullopt;
    return static_cast<int64_t>(countOf(process, "rank"));
}

std::string regionSummary(const json& regions) {
    std::string s;
    for (const auto& r : regions)
        s += fmt::format("{}{} {} {} {}", s.empty() ? "" : ", ", textOf(r, "tag"),
                         textOf(r, "device"), core::formatBytes(countOf(r, "bytes")),
                         textOf(r, "state"));
    return s.empty() ? "-" : s;
}

int listCommand(const CtlOptions& o) {
    const std::vector<Run> runs = discoverRuns(o.timeoutS);
    json all = json::array();
    for (const auto& run : runs) {
        // Its memtool run's pid: what `--run ID` selects by.
        const int64_t runPid = std::stoll(runPidOf(run.socket));
        for (const auto& p : listOf(run.listing, "processes")) {
            if (o.selection && !selects(*o.selection, runPid, p)) continue;
            all.push_back(p);
            all.back()["run"] = runPid;
        }
    }
    if (o.format == "json") {
        std::cout << json{{"processes", all}}.dump(2, ' ', true, json::error_handler_t::replace)
                  << '\n';
        return 0;
    }
    if (all.empty()) {
        std::cout << (o.selection ? fmt::format("No process of yours under memtool is selected "
                                                "by {}.\n",
                                                selectionText(*o.selection))
                                  : std::string("No process of yours runs under memtool.\n"));
        return 0;
    }
    // The whole command, last; a fork child's parent marked, its regions below it.
    std::string table =
        fmt::format("{:<8} {:<14} {:<8} {:<5} {}\n", "PID", "PARENT", "RUN", "RANK", "COMMAND");
    for (const auto& p : all) {
        std::vector<std::string> command;
        for (const auto& word : listOf(p, "command")) {
            if (!word.is_string()) malformed("'command' is not a list of words");
            command.push_back(word.get<std::string>());
        }
        const uint64_t ppid = countOf(p, "ppid");
        std::string parent = ppid ? std::to_string(ppid) : "-";
        if (flagOf(p, "forked")) parent += " (fork)";
        if (flagOf(p, "attached")) parent += " (attached)";
        // commandLine quotes control characters as a shell reads them back.
        const std::optional<int64_t> rank = rankOf(p);
        table += fmt::format("{:<8} {:<14} {:<8} {:<5} {}\n", pidOf(p), parent, countOf(p, "run"),
                             rank ? std::to_string(*rank) : "-",
                             reporters::escapeTerminal(reporters::commandLine(command)));
        const json& regions = listOf(p, "regions");
        if (!regions.empty())
            table += fmt::format("{:<8} regions: {}\n", "", regionSummary(regions));
    }
    std::cout << table;  // checked whole before anything is printed
    return 0;
}

// Why `pid` is not among the user's memtool processes, as an exit code and a line.
// `silent`: runs that did not answer, where it may be.
[[noreturn]] void noSuchProcess(long pid, const std::vector<std::string>& silent) {
    if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == EPERM)
        fail(kExitOtherUser,
             fmt::format("process {} belongs to another user; memtool ctl reaches only your own "
                         "processes",
                         pid));
    if (kill(static_cast<pid_t>(pid), 0) != 0)
        fail(kExitNoSuchProcess, fmt::format("there is no process {}", pid));
    // root may signal anyone: whose the process is says it apart.
    struct stat st {};
    if (stat(fmt::format("/proc/{}", pid).c_str(), &st) == 0 && st.st_uid != geteuid())
        fail(kExitOtherUser,
             fmt::format("process {} belongs to another user (uid {}); memtool ctl reaches only "
                         "your own processes",
                         pid, st.st_uid));
    if (!silent.empty())
        fail(kExitNoSuchProcess,
             fmt::format("process {} is not among the processes of the runs that answered; "
                         "memtool run {} did not answer",
                         pid, fmt::join(silent, ", ")));
    fail(kExitNoSuchProcess,
         fmt::format("process {} does not run under memtool (see `memtool ctl list`)", pid));
}

std::string bytesText(uint64_t bytes) {
    return fmt::format("{} ({} bytes)", core::formatBytes(bytes), bytes);
}

// `status`: the regions' table, then what the process keeps beside them.
void printStatus(const json& body, std::ostream& out) {
    const json& regions = listOf(body, "regions");
    std::string table;
    for (const auto& r : regions)
        table += fmt::format("{:<24} {:<8} {:<6} {:>12} {:>12} {:>12}  {}\n", textOf(r, "tag"),
                             textOf(r, "device"), textOf(r, "backup"),
                             core::formatBytes(countOf(r, "bytes")),
                             core::formatBytes(countOf(r, "resident_bytes")),
                             core::formatBytes(countOf(r, "paused_bytes")), textOf(r, "state"));
    const uint64_t pool = countOf(body, "host_pool_bytes");
    const uint64_t margin = countOf(body, "memory_margin_bytes");
    const uint64_t waiting = countOf(body, "threads_waiting");
    // Checked whole before anything is printed: a bad answer prints nothing but its line.
    if (regions.empty())
        out << "No pausable regions.\n";
    else
        out << fmt::format("{:<24} {:<8} {:<6} {:>12} {:>12} {:>12}  {}\n", "Region", "Device",
                           "Backup", "Bytes", "Resident", "Paused", "State")
            << table;
    if (pool)
        out << fmt::format(
            "Pinned host memory kept for the next pause: {} (memtool run --host-pool caps it)\n",
            bytesText(pool));
    if (!member(body, "host_budget_bytes").is_null())
        out << fmt::format(
            "Host budget: host backups and the pool hold at most {} (memtool run --host-budget)\n",
            bytesText(countOf(body, "host_budget_bytes")));
    if (margin)
        out << fmt::format("Memory margin: a new CUDA region allocation leaves {} free\n",
                           bytesText(margin));
    if (waiting)
        out << fmt::format("Yielded: {} thread{} touched yielded memory and wait{} for `restore`\n",
                           waiting, waiting == 1 ? "" : "s", waiting == 1 ? "s" : "");
}

// A pause's or yield's backups: where the content went ("" when it had none).
std::string placesText(const json& r) {
    const uint64_t host = countOf(r, "to_host_bytes"), disk = countOf(r, "to_disk_bytes");
    const uint64_t over = countOf(r, "over_budget_bytes");
    std::string text;
    if (host) text = bytesText(host) + " to host memory";
    if (disk) text += (text.empty() ? "" : ", ") + bytesText(disk) + " to disk";
    if (over) text += fmt::format(" ({} of it past the host budget)", bytesText(over));
    return text;
}

void printOperation(const json& body, std::ostream& out) {
    const std::string action = textOf(body, "action");
    std::string lines;
    for (const auto& r : listOf(body, "results")) {
        const std::string tagName = textOf(r, "tag", "*");
        const std::string tag = tagName == "*" ? "every region" : "'" + tagName + "'";
        const uint64_t allocations = countOf(r, "allocations");
        if (!flagOf(r, "ok"))
            lines += fmt::format("{} {} FAILED: {}\n", action, tag, textOf(r, "message"));
        else if (!flagOf(r, "changed"))
            lines += fmt::format("{} {}: {}\n", action, tag, textOf(r, "message"));
        else {
            const std::string places = action == "pause" ? placesText(r) : "";
            lines += fmt::format("{} {}: {} {} from {} allocation{} in {:.3f} s{}\n", action, tag,
                                 bytesText(countOf(r, "bytes")),
                                 action == "pause" ? "released" : "restored", allocations,
                                 allocations == 1 ? "" : "s", secondsOf(r, "seconds"),
                                 places.empty() ? "" : "; " + places);
        }
    }
    out << lines;
}

// A process memtool attach came into: what its yield could not take.
std::string beforeAttachText(const json& body) {
    if (!member(body, "before_attach_bytes").is_null())
        return fmt::format(
            "  not yielded: {} in storages from before memtool attached (as listed then; memtool "
            "does not serve them)\n",
            bytesText(countOf(body, "before_attach_bytes")));
    if (flagOf(body, "before_attach_unlisted"))
        return "  not yielded: what the program allocated before memtool attached (memtool does "
               "not serve it; it could not be listed)\n";
    return "";
}

// yield / restore: what moved, by device, and what each still holds.
void printCourtesy(const json& body, bool ok, std::ostream& out, std::ostream& err) {
    const std::string action = textOf(body, "action");
    const std::string message = textOf(body, "message");
    if (!ok) {
        err << fmt::format("memtool: {} failed: {}\n", action.empty() ? "the command" : action,
                           message);
        return;
    }
    if (!flagOf(body, "changed")) {
        out << fmt::format("{}: {}\n", action, message) << beforeAttachText(body);
        return;
    }
    std::string lines = fmt::format("{}: {} in {:.3f} s", action, bytesText(countOf(body, "bytes")),
                                    secondsOf(body, "seconds"));
    if (action == "yield")
        lines += fmt::format(" (the program stopped at a safe point in {:.3f} s)",
                             secondsOf(body, "park_seconds"));
    lines += '\n';
    for (const auto& d : listOf(body, "devices")) {
        std::string holds;
        if (!member(d, "process_resident_bytes").is_null())
            holds = fmt::format("the process holds {} resident",
                                core::formatBytes(countOf(d, "process_resident_bytes")));
        else if (const auto& left = member(d, "left"); !left.is_null())
            holds = fmt::format(
                "the device holds {} of {}: {} in regions, {} of allocations no region holds, {} "
                "memtool never saw (the CUDA context, libraries' own memory, other processes)",
                core::formatBytes(countOf(d, "device_used_bytes")),
                core::formatBytes(countOf(d, "device_total_bytes")),
                core::formatBytes(countOf(left, "in_regions_bytes")),
                core::formatBytes(countOf(left, "outside_regions_bytes")),
                core::formatBytes(countOf(left, "unseen_bytes")));
        else if (!member(d, "device_used_bytes").is_null())
            holds = fmt::format(
                "the device holds {} of {} (all its users: the CUDA context, memory memtool does "
                "not serve)",
                core::formatBytes(countOf(d, "device_used_bytes")),
                core::formatBytes(countOf(d, "device_total_bytes")));
        lines += fmt::format("  {:<8} {:>12} {}; {}\n", textOf(d, "device"),
                             core::formatBytes(countOf(d, "bytes")),
                             action == "yield" ? "yielded" : "restored", holds);
    }
    if (action == "yield") {
        if (const std::string places = placesText(body); !places.empty())
            lines += "  backups: " + places + '\n';
        if (!member(body, "cublas_workspaces_released").is_null())
            lines += flagOf(body, "cublas_workspaces_released")
                         ? "  cuBLAS's workspaces were let go (the next cuBLAS call makes them)\n"
                         : "  cuBLAS's workspaces stayed (this torch has no way to let them go)\n";
        if (const std::string nccl = textOf(body, "nccl");
            !nccl.empty() && nccl != "no NCCL in this process")
            lines += "  " + nccl + '\n';
    }
    if (!message.empty()) lines += "  " + message + '\n';
    lines += beforeAttachText(body);
    out << lines;
}

// The run answers with the trace's text; it is read back as any trace is (a run
// is another program: what it sends is checked) and written by the trace writer.
int writeSnapshot(const json& reply, const std::string& output, std::ostream& out,
                  std::ostream& err) {
    const json text = reply.value("trace", json(nullptr));
    if (!text.is_string()) fail(1, "memtool run sent no snapshot");
    const json trace = json::parse(text.get<std::string>(), nullptr, false);
    if (trace.is_discarded()) fail(1, "memtool run sent a snapshot that is not JSON");
    const core::Trace parsed = reporters::traceFromJson(trace, "the snapshot");
    if (output.empty() || output == "-") {
        out << reporters::traceToJson(parsed).dump(2, ' ', false,
                                                   nlohmann::json::error_handler_t::replace)
            << '\n';
        return 0;
    }
    // A place no file can be made was refused before the command was sent, but
    // the directory may have changed since: still the caller's error (2).
    core::replaceFile(output, reporters::traceToText(parsed), core::kExitBadInput);
    err << fmt::format("memtool: snapshot of process {} written to {}\n",
                       parsed.processes.empty() ? 0 : parsed.processes[0].pid, output);
    return 0;
}

// A process id (processIdOf), or a usage error.
long parsePid(const std::string& word) {
    const std::optional<int64_t> pid = processIdOf(word);
    if (!pid)
        fail(core::kExitBadInput,
             "ctl: '" + reporters::escapeTerminal(word) + "' is not a process id (or list)");
    return static_cast<long>(*pid);
}

[[noreturn]] void usage(const std::string& message) {
    fail(core::kExitBadInput, "ctl: " + message);
}

// The words of a command, checked as the collector will check them, before
// anything is sent: what is wrong is a usage error (2) here, not a refusal from
// the program, an unknown command included. (A program under an older memtool
// may still not know a command: its answer says so, exit 1.)
void checkCommandWords(const std::vector<std::string>& argv) {
    const std::string& command = argv[0];
    const auto noArguments = [&] {
        if (argv.size() > 1)
            usage(fmt::format("{} takes no arguments, not '{}'", command,
                              reporters::escapeTerminal(argv[1])));
    };
    // An option with a value (`valid` accepts it), or a flag (`valid` null).
    struct Option {
        const char* name;
        bool (*valid)(const std::string&);
        const char* takes;
    };
    const auto checkOptions = [&](std::initializer_list<Option> options, const char* synopsis) {
        for (size_t i = 1; i < argv.size(); ++i) {
            const Option* o = nullptr;
            for (const Option& candidate : options)
                if (argv[i] == candidate.name) o = &candidate;
            if (!o)
                usage(fmt::format("{} takes {}, not '{}'", command, synopsis,
                                  reporters::escapeTerminal(argv[i])));
            if (!o->valid) continue;
            if (i + 1 >= argv.size() || !o->valid(argv[i + 1]))
                usage(
                    fmt::format("{} {} {}, not '{}'", command, o->name, o->takes,
                                i + 1 < argv.size() ? reporters::escapeTerminal(argv[i + 1]) : ""));
            ++i;
        }
    };
    const auto seconds = [](const std::string& v) {
        double s = 0;
        return core::parseWaitSeconds(v.c_str(), &s);
    };
    const Option wait{"--wait", seconds, kCtlTimeoutRule};
    if (command == "status" || command == "restore" || command == "snapshot") {
        noArguments();
    } else if (command == "pause" || command == "resume") {
        if (argv.size() - 1 > core::kMaxRequestTags)
            usage(fmt::format("{} takes {} tags at most in one command, not {}", command,
                              core::kMaxRequestTags, argv.size() - 1));
        for (size_t i = 1; i < argv.size(); ++i)
            if (argv[i].size() > core::kMaxWordBytes || argv[i].find('\0') != std::string::npos)
                usage(
                    fmt::format("a tag is at most {} bytes, without NUL bytes; tag {} is {} bytes",
                                core::kMaxWordBytes, i, argv[i].size()));
    } else if (command == "yield") {
        checkOptions({{"--to", [](const std::string& v) { return v == "host" || v == "disk"; },
                       "takes host or disk"},
                      wait},
                     "[--to host|disk] [--wait SECONDS]");
    } else if (command == "policy") {
        if (argv.size() != 2) usage("policy takes FILE, off or show");
    } else if (command == "tensors") {
        checkOptions(
            {{"--device", [](const std::string& v) { return core::isTensorDevice(v.c_str()); },
              "takes cpu, cuda:N or npu:N"},
             {"--verbose", nullptr, ""},
             wait},
            "[--device cpu|cuda:N|npu:N] [--verbose] [--wait SECONDS]");
    } else {
        usage(fmt::format(
            "unknown command '{}' (status, pause, resume, yield, restore, tensors, snapshot, "
            "policy)",
            reporters::escapeTerminal(command)));
    }
}

// `policy FILE|off|show`: the file read and checked here first (its errors are
// the user's, exit 2, before anything is sent); memtool run checks it again
// against the process's regions.
json policyRequest(long pid, const std::string& what) {
    if (what == "off" || what == "show") return {{"op", "policy"}, {"pid", pid}, {"policy", what}};
    json document = policy::readPolicyDocument(what);
    policy::parsePolicy(document);
    return {{"op", "policy"}, {"pid", pid}, {"policy", std::move(document)}};
}

int printPolicy(long pid, const std::string& status, const json& body, const std::string& format,
                std::ostream& out, std::ostream& err) {
    if (format == "json") {
        out << json{{"pid", pid}, {"status", status}, {"body", body}}.dump(
                   2, ' ', true, json::error_handler_t::replace)
            << '\n';
    } else if (status == "ok") {
        const json& lines = member(body, "lines");
        if (!lines.is_array() || lines.empty())
            out << fmt::format("process {}: no policy\n", pid);
        else
            for (const auto& line : lines)
                if (line.is_string())
                    out << reporters::escapeTerminal(line.get<std::string>()) << '\n';
    }
    if (status == "ok") return 0;
    const std::string why = textOf(body, "error", "memtool run refused the policy");
    if (format != "json") err << "memtool: " << reporters::escapeTerminal(why) << '\n';
    return why.rfind("policy: ", 0) == 0 ? core::kExitBadInput : 1;
}

// A request is one line to memtool run, which reads 64 KiB of it at most.
constexpr size_t kMaxRequestLine = 64 * 1024;

// The request for process `pid` (the policy file read and checked here: exit 2
// before anything is sent); over memtool run's limit: a usage error.
json requestFor(long pid, const std::vector<std::string>& argv) {
    return argv[0] == "policy" ? policyRequest(pid, argv[1])
                               : json{{"op", "request"}, {"pid", pid}, {"argv", argv}};
}

void checkRequestSize(const json& request) {
    const size_t requestBytes =
        request.dump(-1, ' ', false, json::error_handler_t::replace).size() + 1;
    if (requestBytes > kMaxRequestLine)
        usage(fmt::format("the command is {} bytes; memtool run takes {} at most", requestBytes,
                          kMaxRequestLine));
}

// What process `pid` answered (`reply`; `stale`: it ended first), shown on `out`
// and `err` as one process's answer is, in `format`; a snapshot written to
// `output`. Returns the exit code; throws core::Error for what ends a ctl of one
// process with a line of its own (the process gone or not connected yet, the
// request refused, an answer malformed).
int showAnswer(long pid, const std::vector<std::string>& argv, const std::string& format,
               const std::string& output, const json& reply, bool stale, std::ostream& out,
               std::ostream& err) {
    const std::string status = stale ? "gone" : textOf(reply, "status", "failed");
    if (status == "no_such_process" || status == "gone")
        fail(kExitNoSuchProcess, fmt::format("process {} ended before it answered", pid));
    if (status == "not_ready")
        fail(kExitNoSuchProcess,
             fmt::format("process {} has not connected to memtool run yet (it has allocated "
                         "nothing memtool tracks); ask again once it has",
                         pid));
    if (status == "bad_request")
        fail(1, "memtool run refused the request: " +
                    textOf(reply, "error", "it could not read it (memtool versions apart?)"));
    const json body = member(reply, "body");
    if (argv[0] == "policy") return printPolicy(pid, status, body, format, out, err);
    if (argv[0] == "snapshot" && status == "ok") return writeSnapshot(reply, output, out, err);
    if (argv[0] == "tensors" && status == "ok" && format == "text") {
        out << reporters::escapeTerminal(
            member(reply, "text").is_string() ? member(reply, "text").get<std::string>() : "",
            /*keepNewlines=*/true);
        return 0;
    }
    if (format == "json") {
        out << json{{"pid", pid}, {"status", status}, {"body", body}}.dump(
                   2, ' ', true, json::error_handler_t::replace)
            << '\n';
    } else if (status != "ok" && body.is_object() && member(body, "error").is_string()) {
        err << fmt::format("memtool: {} failed: {}\n", argv[0], textOf(body, "error"));
    } else if (status == "unknown") {
        err << fmt::format("memtool: process {} does not know the command '{}'\n", pid,
                           reporters::escapeTerminal(argv[0]));
    } else if (argv[0] == "status" && body.is_object()) {
        printStatus(body, out);
    } else if ((argv[0] == "yield" || argv[0] == "restore") && body.is_object()) {
        printCourtesy(body, status == "ok", out, err);
    } else if ((argv[0] == "pause" || argv[0] == "resume") && body.is_object()) {
        printOperation(body, out);
    } else {
        out << reporters::escapeTerminal(body.dump(2, ' ', true, json::error_handler_t::replace),
                                         true)
            << '\n';
    }
    return status == "ok" ? 0 : 1;
}

int processCommand(const CtlOptions& o) {
    const long pid = parsePid(o.words[0]);
    if (o.words.size() < 2)
        usage("what should process " + o.words[0] + " do? (status, pause, resume)");
    const std::vector<std::string> argv(o.words.begin() + 1, o.words.end());
    if (!o.output.empty() && argv[0] != "snapshot") usage("-o is for snapshot only");
    checkCommandWords(argv);
    const json request = requestFor(pid, argv);
    checkRequestSize(request);
    // Before the process does the work: as `memtool run -o` is checked before it starts.
    if (!o.output.empty() && o.output != "-") core::checkReplaceable(o.output, core::kExitBadInput);
    std::vector<std::string> silent;
    for (const Run& run : discoverRuns(o.timeoutS, &silent)) {
        bool owns = false;
        for (const auto& p : listOf(run.listing, "processes")) owns |= pidOf(p) == pid;
        if (!owns) continue;
        bool stale = false;
        const json reply = exchange(run.socket, request, o.timeoutS, &stale);
        return showAnswer(pid, argv, o.format, o.output, reply, stale, std::cout, std::cerr);
    }
    noSuchProcess(pid, silent);
}

// ---- one command to a selection of processes, all at once ------------------------

// A selected process, and what came of asking it.
struct Target {
    long pid = 0;
    std::optional<int64_t> rank;
    int64_t run = 0;  // the pid of its memtool run
    std::string socket;
    json reply;
    bool stale = false;
    int failedCode = 0;   // asking it failed (no answer in time, ...): the exit code
    std::string failure;  // and the line
};

// The processes of `runs` that `selection` selects. The program of a run that is
// still starting (its stream not connected: nothing of it memtool serves yet, a
// launcher like torchrun's agent that allocates nothing memtool tracks) is left
// out, its pid in `leftOut`: a command for it would wait 5 s and fail.
std::vector<Target> selectTargets(const std::vector<Run>& runs, const CtlSelection& selection,
                                  std::vector<long>* leftOut) {
    std::vector<Target> targets;
    for (const Run& run : runs) {
        const int64_t runPid = std::stoll(runPidOf(run.socket));
        for (const auto& p : listOf(run.listing, "processes")) {
            if (!selects(selection, runPid, p)) continue;
            if (flagOf(p, "starting")) {
                leftOut->push_back(pidOf(p));
                continue;
            }
            targets.push_back(Target{pidOf(p), rankOf(p), runPid, run.socket, {}, false, 0, {}});
        }
    }
    // Answers in an order that does not depend on which rank connected first: by
    // run, then rank (a process without one after those with), then pid.
    const auto key = [](const Target& t) {
        return std::tuple(t.run, !t.rank, t.rank.value_or(0), t.pid);
    };
    std::sort(targets.begin(), targets.end(),
              [&](const Target& a, const Target& b) { return key(a) < key(b); });
    return targets;
}

[[noreturn]] void noneSelected(const CtlSelection& selection, const std::vector<long>& leftOut,
                               const std::vector<std::string>& silent) {
    std::string why = fmt::format("no process of yours under memtool is selected by {}",
                                  selectionText(selection));
    if (!leftOut.empty())
        why += fmt::format(" but {}, not connected to {} run yet", fmt::join(leftOut, ", "),
                           leftOut.size() == 1 ? "its" : "their");
    if (!silent.empty())
        why += fmt::format("; memtool run {} did not answer", fmt::join(silent, ", "));
    fail(kExitNoSuchProcess, why + " (see `memtool ctl list`)");
}

// Every target asked at once, each on a thread of its own with the same timeout:
// a job's ranks are yielded together, not one after another. What goes wrong on
// the way is kept with its target.
void askAll(std::vector<Target>& targets, const json& request, double timeoutS) {
    std::vector<std::thread> threads;
    threads.reserve(targets.size());
    for (Target& t : targets)
        threads.emplace_back([&t, &request, timeoutS] {
            try {
                json mine = request;
                mine["pid"] = t.pid;
                t.reply = exchange(t.socket, mine, timeoutS, &t.stale);
            } catch (const core::Error& e) {
                t.failedCode = e.exitCode();
                t.failure = e.what();
            } catch (const std::exception& e) {
                t.failedCode = core::kExitInternal;
                t.failure = e.what();
            }
        });
    for (std::thread& thread : threads) thread.join();
}

// One process's part of the JSON answer: who it is, its exit code, the answer's
// status and body (a snapshot: the file written), or the line that says what failed.
json targetJson(const Target& t, const std::string& command, const std::string& file, int code,
                const std::string& failure) {
    json j{{"pid", t.pid},
           {"rank", t.rank ? json(*t.rank) : json(nullptr)},
           {"run", t.run},
           {"exit", code}};
    const bool answered = !t.failedCode && !t.stale && t.reply.is_object();
    const auto status = answered ? t.reply.find("status") : t.reply.end();
    j["status"] = answered && status != t.reply.end() && status->is_string()
                      ? *status
                      : json(t.stale ? "gone" : "failed");
    if (answered && command == "snapshot" && code == 0)
        j["file"] = file;
    else if (answered && t.reply.contains("body"))
        j["body"] = t.reply["body"];
    if (!failure.empty()) j["error"] = failure;
    return j;
}

// One target's answer shown as `ctl PID` shows it, into `out` and `err` (a
// snapshot written to `file`); its exit code. What ends a ctl of one process
// with a line of its own (gone, refused, malformed) is that line, in `failure`.
int answerOf(const Target& t, const std::vector<std::string>& argv, const std::string& file,
             std::ostream& out, std::ostream& err, std::string* failure) {
    *failure = t.failure;
    if (t.failedCode) return t.failedCode;
    try {
        return showAnswer(t.pid, argv, "text", file, t.reply, t.stale, out, err);
    } catch (const core::Error& e) {
        *failure = e.what();
        return e.exitCode();
    }
}

// Each target's answer as ctl shows one process's: in text, its lines headed by
// its pid and rank (answerPrefix), what it said on stdout, its errors on stderr;
// in JSON one object each, in selectTargets' order. Exit 0 when every one
// succeeded, else 1, and a last line on stderr names those that did not.
int showAll(const std::vector<Target>& targets, const std::vector<std::string>& argv,
            const std::vector<std::string>& files, const CtlOptions& o,
            const std::vector<long>& leftOut) {
    json results = json::array();
    std::string text, errors;
    std::vector<std::string> failed;
    for (size_t i = 0; i < targets.size(); ++i) {
        const Target& t = targets[i];
        std::ostringstream out, err;
        std::string failure;
        const int code = answerOf(t, argv, files[i], out, err, &failure);
        if (code) failed.push_back(fmt::format("{} (exit {})", t.pid, code));
        results.push_back(targetJson(t, argv[0], files[i], code, failure));
        if (!failure.empty()) err << "memtool: " << reporters::escapeTerminal(failure) << '\n';
        const std::string prefix = answerPrefix({t.pid, t.rank});
        text += prefixLines(out.str(), prefix);
        errors += prefixLines(err.str(), prefix);
    }
    if (o.format == "json")
        std::cout << json{{"processes", results}, {"left_out", leftOut}}.dump(
                         2, ' ', true, json::error_handler_t::replace)
                  << '\n';
    else
        std::cout << text << std::flush;
    std::cerr << (o.format == "json" ? "" : errors);
    if (!leftOut.empty())
        std::cerr << fmt::format(
            "memtool: left out {}: not connected to its run yet (nothing memtool serves)\n",
            fmt::join(leftOut, ", "));
    if (failed.empty()) return 0;
    std::cerr << fmt::format("memtool: {} of {} processes did not succeed: {}\n", failed.size(),
                             targets.size(), fmt::join(failed, ", "));
    return kExitSomeFailed;
}

// The files of a snapshot, one a target (snapshotFiles), each checked as `memtool
// run -o` is before the program starts; none for another command.
std::vector<std::string> filesFor(const std::vector<Target>& targets,
                                  const std::vector<std::string>& argv, const CtlOptions& o) {
    if (argv[0] != "snapshot") return std::vector<std::string>(targets.size());
    std::vector<SelectedProcess> processes;
    for (const Target& t : targets) processes.push_back({t.pid, t.rank});
    std::vector<std::string> files = snapshotFiles(o.output, processes, *o.selection);
    for (const std::string& file : files) core::checkReplaceable(file, core::kExitBadInput);
    return files;
}

int selectionCommand(const CtlOptions& o) {
    const CtlSelection& selection = *o.selection;
    if (o.words.empty())
        usage(
            fmt::format("what should the processes of {} do? (status, pause, resume, yield, "
                        "restore, tensors, snapshot, policy)",
                        selectionText(selection)));
    const std::vector<std::string>& argv = o.words;
    if (!o.output.empty() && argv[0] != "snapshot") usage("-o is for snapshot only");
    checkCommandWords(argv);
    // What is wrong with -o whatever runs, said before the runs are asked.
    if (argv[0] == "snapshot") snapshotFiles(o.output, {}, selection);
    const json request = requestFor(0, argv);  // a policy file read once, for all
    std::vector<std::string> silent;
    std::vector<long> leftOut;
    std::vector<Target> targets =
        selectTargets(discoverRuns(o.timeoutS, &silent), selection, &leftOut);
    if (targets.empty()) noneSelected(selection, leftOut, silent);
    for (const Target& t : targets) {
        json mine = request;
        mine["pid"] = t.pid;
        checkRequestSize(mine);
    }
    const std::vector<std::string> files = filesFor(targets, argv, o);
    askAll(targets, request, o.timeoutS);
    return showAll(targets, argv, files, o, leftOut);
}

}  // namespace

std::optional<double> ctlTimeoutSeconds(const std::string& text) {
    double seconds = 0;
    if (!core::parseWaitSeconds(text.c_str(), &seconds)) return std::nullopt;
    return seconds;
}

// ctl's own options may come after the PID too (`memtool ctl 42 status --format
// json`); CLI11 stops at the first word, so they are taken out of the words here.
// Every other word is the process's command's own.
CtlOptions withTrailingOptions(CtlOptions o) {
    if (std::optional<CtlSelection> selection = takeSelection(o.words)) o.selection = selection;
    std::vector<std::string> words;
    for (size_t i = 0; i < o.words.size(); ++i) {
        std::string name = o.words[i], value;
        const size_t eq = name.find('=');
        if (eq != std::string::npos) {
            value = name.substr(eq + 1);
            name.resize(eq);
        }
        if (name != "--format" && name != "--timeout" && name != "-o" && name != "--output") {
            words.push_back(o.words[i]);
            continue;
        }
        if (eq == std::string::npos) {
            if (i + 1 >= o.words.size())
                fail(core::kExitBadInput, "ctl: " + name + " needs a value");
            value = o.words[++i];
        }
        if (name == "-o" || name == "--output") {
            if (value.empty()) fail(core::kExitBadInput, "ctl: " + name + " needs a file name");
            o.output = value;
        } else if (name == "--format") {
            if (value != "text" && value != "json")
                fail(core::kExitBadInput, "ctl: --format is text or json, not '" + value + "'");
            o.format = value;
        } else {
            const std::optional<double> seconds = ctlTimeoutSeconds(value);
            if (!seconds)
                fail(core::kExitBadInput,
                     std::string("ctl: --timeout ") + kCtlTimeoutRule + ", not '" + value + "'");
            o.timeoutS = *seconds;
        }
    }
    o.words = std::move(words);
    return o;
}

int ctlCommand(const CtlOptions& given) {
    const CtlOptions options = withTrailingOptions(given);
    if (!options.words.empty() && options.words[0] == "list") {
        if (options.words.size() > 1) fail(core::kExitBadInput, "ctl list takes no arguments");
        return listCommand(options);
    }
    if (options.selection) {
        // A word of digits first: a process id, which names one process itself.
        const std::string first = options.words.empty() ? "" : options.words[0];
        if (!first.empty() && first.find_first_not_of("0123456789") == std::string::npos)
            usage(
                fmt::format("process {} and {} cannot go together: give a process id or a "
                            "selection (--all, --rank N, --run ID)",
                            first, selectionText(*options.selection)));
        return selectionCommand(options);
    }
    if (options.words.empty())
        fail(core::kExitBadInput,
             "ctl: say `list`, or a process id (or --all, --rank N, --run ID) and a command");
    return processCommand(options);
}

}  // namespace memtool::cli
