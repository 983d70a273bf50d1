#include "cli/ctl/CtlCommand.h"

#include <dirent.h>
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
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/ctl/ControlDirectory.h"
#include "core/Error.h"
#include "core/Files.h"
#include "core/Units.h"
#include "core/WaitSeconds.h"
#include "reporters/ProcessSelection.h"
#include "trace/TraceReader.h"

namespace memtool::cli {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(int code, const std::string& message) { throw core::Error(code, message); }

// One question to one run, one JSON line back. Empty when the run is gone (a
// stale socket: unlinked, since our private directory holds only our runs').
json exchange(const std::string& socketPath, const json& request, double timeoutS, bool* stale) {
    *stale = false;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (fd < 0 || socketPath.size() >= sizeof addr.sun_path) fail(1, "cannot create a socket");
    std::memcpy(addr.sun_path, socketPath.c_str(), socketPath.size() + 1);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        const int err = errno;
        close(fd);
        if (err == ECONNREFUSED || err == ENOENT) {
            *stale = true;
            if (err == ECONNREFUSED) unlink(socketPath.c_str());
            return nullptr;
        }
        fail(1, fmt::format("cannot reach {}: {}", socketPath, std::strerror(err)));
    }
    const std::string text = request.dump() + "\n";
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

struct Run {
    std::string socket;
    json listing;
};

// Every live run of this user, with what it says of its processes.
std::vector<Run> discoverRuns(double timeoutS) {
    const std::string dir = controlDirectory(/*create=*/false, 1);
    std::vector<Run> runs;
    DIR* d = opendir(dir.c_str());
    if (!d) return runs;
    std::vector<std::string> sockets;
    while (dirent* e = readdir(d)) {
        const std::string name = e->d_name;
        if (name.rfind("run-", 0) == 0 && name.size() > 9 &&
            name.compare(name.size() - 5, 5, ".sock") == 0)
            sockets.push_back(dir + "/" + name);
    }
    closedir(d);
    for (const auto& s : sockets) {
        bool stale = false;
        json listing = exchange(s, {{"op", "list"}}, timeoutS, &stale);
        if (!stale) runs.push_back(Run{s, std::move(listing)});
    }
    return runs;
}

std::string regionSummary(const json& regions) {
    std::string s;
    for (const auto& r : regions)
        s += fmt::format("{}{} {} {} {}", s.empty() ? "" : ", ", r.at("tag").get<std::string>(),
                         r.at("device").get<std::string>(),
                         core::formatBytes(r.at("bytes").get<uint64_t>()),
                         r.at("state").get<std::string>());
    return s.empty() ? "-" : s;
}

int listCommand(const CtlOptions& o) {
    const std::vector<Run> runs = discoverRuns(o.timeoutS);
    json all = json::array();
    for (const auto& run : runs)
        for (const auto& p : run.listing.at("processes")) all.push_back(p);
    if (o.format == "json") {
        std::cout << json{{"processes", all}}.dump(2) << '\n';
        return 0;
    }
    if (all.empty()) {
        std::cout << "No process of yours runs under memtool.\n";
        return 0;
    }
    std::cout << fmt::format("{:<8} {:<40} {}\n", "PID", "COMMAND", "REGIONS");
    for (const auto& p : all) {
        const std::string command = reporters::shortText(
            reporters::commandLine(p.at("command").get<std::vector<std::string>>()), 40);
        std::cout << fmt::format("{:<8} {:<40} {}\n", p.at("pid").get<int64_t>(), command,
                                 regionSummary(p.at("regions")));
    }
    return 0;
}

// Why `pid` is not among the user's memtool processes, as an exit code and a line.
[[noreturn]] void noSuchProcess(long pid) {
    if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == EPERM)
        fail(kExitOtherUser,
             fmt::format("process {} belongs to another user; memtool ctl reaches only your own "
                         "processes",
                         pid));
    if (kill(static_cast<pid_t>(pid), 0) != 0)
        fail(kExitNoSuchProcess, fmt::format("there is no process {}", pid));
    fail(kExitNoSuchProcess,
         fmt::format("process {} does not run under memtool (see `memtool ctl list`)", pid));
}

std::string bytesText(uint64_t bytes) {
    return fmt::format("{} ({} bytes)", core::formatBytes(bytes), bytes);
}

// `status`: the regions' table, then what the process keeps beside them.
void printStatus(const json& body) {
    const json regions = body.value("regions", json::array());
    if (regions.empty())
        std::cout << "No pausable regions.\n";
    else
        std::cout << fmt::format("{:<24} {:<8} {:<6} {:>12} {:>12} {:>12}  {}\n", "Region",
                                 "Device", "Backup", "Bytes", "Resident", "Paused", "State");
    for (const auto& r : regions)
        std::cout << fmt::format("{:<24} {:<8} {:<6} {:>12} {:>12} {:>12}  {}\n",
                                 r.value("tag", ""), r.value("device", ""), r.value("backup", ""),
                                 core::formatBytes(r.value("bytes", uint64_t{0})),
                                 core::formatBytes(r.value("resident_bytes", uint64_t{0})),
                                 core::formatBytes(r.value("paused_bytes", uint64_t{0})),
                                 r.value("state", ""));
    if (const uint64_t pool = body.value("host_pool_bytes", uint64_t{0}))
        std::cout << fmt::format(
            "Pinned host memory kept for the next pause: {} (memtool run --host-pool caps it)\n",
            bytesText(pool));
    if (const uint64_t margin = body.value("memory_margin_bytes", uint64_t{0}))
        std::cout << fmt::format("Memory margin: a new CUDA region allocation leaves {} free\n",
                                 bytesText(margin));
}

void printOperation(const json& body) {
    const std::string action = body.value("action", "");
    for (const auto& r : body.value("results", json::array())) {
        const std::string tag =
            r.value("tag", "*") == "*" ? "every region" : "'" + r.value("tag", "") + "'";
        const double seconds = r.value("seconds", 0.0);
        if (!r.value("ok", false))
            std::cout << fmt::format("{} {} FAILED: {}\n", action, tag, r.value("message", ""));
        else if (!r.value("changed", false))
            std::cout << fmt::format("{} {}: {}\n", action, tag, r.value("message", ""));
        else
            std::cout << fmt::format("{} {}: {} {} from {} allocation{} in {:.3f} s\n", action, tag,
                                     bytesText(r.value("bytes", uint64_t{0})),
                                     action == "pause" ? "released" : "restored",
                                     r.value("allocations", 0),
                                     r.value("allocations", 0) == 1 ? "" : "s", seconds);
    }
}

// yield / restore: what moved, by device, and what each still holds.
void printCourtesy(const json& body, bool ok) {
    const std::string action = body.value("action", "");
    const std::string message = body.value("message", "");
    if (!ok) {
        std::cerr << fmt::format("memtool: {} failed: {}\n",
                                 action.empty() ? "the command" : action, message);
        return;
    }
    if (!body.value("changed", false)) {
        std::cout << fmt::format("{}: {}\n", action, message);
        return;
    }
    std::cout << fmt::format("{}: {} in {:.3f} s", action,
                             bytesText(body.value("bytes", uint64_t{0})),
                             body.value("seconds", 0.0));
    if (action == "yield")
        std::cout << fmt::format(" (the program stopped at a safe point in {:.3f} s)",
                                 body.value("park_seconds", 0.0));
    std::cout << '\n';
    for (const auto& d : body.value("devices", json::array())) {
        std::string holds;
        if (d.contains("process_resident_bytes"))
            holds = fmt::format("the process holds {} resident",
                                core::formatBytes(d.at("process_resident_bytes").get<uint64_t>()));
        else if (d.contains("device_used_bytes"))
            holds = fmt::format(
                "the device holds {} of {} (all its users: the CUDA context, memory memtool does "
                "not serve)",
                core::formatBytes(d.at("device_used_bytes").get<uint64_t>()),
                core::formatBytes(d.value("device_total_bytes", uint64_t{0})));
        std::cout << fmt::format("  {:<8} {:>12} {}; {}\n", d.value("device", ""),
                                 core::formatBytes(d.value("bytes", uint64_t{0})),
                                 action == "yield" ? "yielded" : "restored", holds);
    }
    if (!message.empty()) std::cout << "  " << message << '\n';
}

// The run answers with the trace's text; it is read back as any trace is (a run
// is another program: what it sends is checked) and written by the trace writer.
int writeSnapshot(const json& reply, const std::string& output) {
    const json text = reply.value("trace", json(nullptr));
    if (!text.is_string()) fail(1, "memtool run sent no snapshot");
    const json trace = json::parse(text.get<std::string>(), nullptr, false);
    if (trace.is_discarded()) fail(1, "memtool run sent a snapshot that is not JSON");
    const core::Trace parsed = reporters::traceFromJson(trace, "the snapshot");
    if (output.empty() || output == "-") {
        std::cout << reporters::traceToJson(parsed).dump(2, ' ', false,
                                                         nlohmann::json::error_handler_t::replace)
                  << '\n';
        return 0;
    }
    // A place no file can be made was refused before the command was sent, but
    // the directory may have changed since: still the caller's error (2).
    core::replaceFile(output, reporters::traceToText(parsed), core::kExitBadInput);
    std::cerr << fmt::format("memtool: snapshot of process {} written to {}\n",
                             parsed.processes.empty() ? 0 : parsed.processes[0].pid, output);
    return 0;
}

int processCommand(const CtlOptions& o) {
    char* end = nullptr;
    const long pid = std::strtol(o.words[0].c_str(), &end, 10);
    if (!end || *end || pid <= 0)
        fail(core::kExitBadInput, "ctl: '" + o.words[0] + "' is not a process id (or list)");
    if (o.words.size() < 2)
        fail(core::kExitBadInput,
             "ctl: what should process " + o.words[0] + " do? (status, pause, resume)");
    const std::vector<std::string> argv(o.words.begin() + 1, o.words.end());
    if (!o.output.empty() && argv[0] != "snapshot")
        fail(core::kExitBadInput, "ctl: -o is for snapshot only");
    // Before the process does the work: as `memtool run -o` is checked before it starts.
    if (!o.output.empty() && o.output != "-") core::checkReplaceable(o.output, core::kExitBadInput);
    for (const Run& run : discoverRuns(o.timeoutS)) {
        bool owns = false;
        for (const auto& p : run.listing.at("processes")) owns |= p.at("pid").get<long>() == pid;
        if (!owns) continue;
        bool stale = false;
        json reply = exchange(run.socket, {{"op", "request"}, {"pid", pid}, {"argv", argv}},
                              o.timeoutS, &stale);
        const std::string status = stale ? "gone" : reply.value("status", "failed");
        if (status == "no_such_process" || status == "gone")
            fail(kExitNoSuchProcess, fmt::format("process {} ended before it answered", pid));
        const json body = stale ? json(nullptr) : reply.value("body", json(nullptr));
        if (argv[0] == "snapshot" && status == "ok") return writeSnapshot(reply, o.output);
        if (argv[0] == "tensors" && status == "ok" && o.format == "text") {
            std::cout << reply.value("text", "");
            return 0;
        }
        if (o.format == "json") {
            std::cout << json{{"pid", pid}, {"status", status}, {"body", body}}.dump(2) << '\n';
        } else if (status != "ok" && body.is_object() && body.contains("error") &&
                   body["error"].is_string()) {
            std::cerr << fmt::format("memtool: {} failed: {}\n", argv[0],
                                     body["error"].get<std::string>());
        } else if (status == "unknown") {
            std::cerr << fmt::format("memtool: process {} does not know the command '{}'\n", pid,
                                     argv[0]);
        } else if (argv[0] == "status" && body.is_object()) {
            printStatus(body);
        } else if ((argv[0] == "yield" || argv[0] == "restore") && body.is_object()) {
            printCourtesy(body, status == "ok");
        } else if ((argv[0] == "pause" || argv[0] == "resume") && body.is_object()) {
            printOperation(body);
        } else {
            std::cout << body.dump(2) << '\n';
        }
        return status == "ok" ? 0 : 1;
    }
    noSuchProcess(pid);
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
    if (options.words.empty())
        fail(core::kExitBadInput, "ctl: say `list`, or a process id and a command");
    if (options.words[0] == "list") {
        if (options.words.size() > 1) fail(core::kExitBadInput, "ctl list takes no arguments");
        return listCommand(options);
    }
    return processCommand(options);
}

}  // namespace memtool::cli
