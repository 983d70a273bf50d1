#include "cli/ctl/ControlServer.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cli/ctl/ControlDirectory.h"
#include "cli/run/EventLoop.h"
#include "cli/stream/CollectorListener.h"
#include "core/Error.h"
#include "core/LauncherRanks.h"
#include "core/Protocol.h"
#include "reporters/TensorsReporter.h"
#include "trace/RecordedSources.h"
#include "trace/TraceReader.h"

namespace memtool::cli {

namespace {

constexpr size_t kMaxRequestBytes = 64 * 1024;

const char* statusName(core::ReplyStatus s) {
    switch (s) {
        case core::ReplyStatus::Ok:
            return "ok";
        case core::ReplyStatus::Failed:
            return "failed";
        case core::ReplyStatus::Unknown:
            return "unknown";
        case core::ReplyStatus::Refused:
            return "refused";
    }
    return "failed";
}

// "cpu", "cuda:0": a wire device code as the trace names it.
std::string deviceText(uint8_t device) {
    const int ordinal = core::cudaOrdinal(device);
    return ordinal >= 0 ? fmt::format("cuda:{}", ordinal) : core::deviceName(device);
}

}  // namespace

ControlServer::ControlServer(CollectorListener& listener, std::vector<std::string> command,
                             SiteMode siteMode)
    : listener_(listener), command_(std::move(command)), siteMode_(siteMode) {
    const std::string dir = controlDirectory(/*create=*/true, core::kExitRunFailed);
    path_ = fmt::format("{}/run-{}.sock", dir, getpid());
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path_.size() >= sizeof addr.sun_path)
        throw core::Error(core::kExitRunFailed, "the control socket path is too long: " + path_);
    std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    unlink(
        path_
            .c_str());  // ours by name (our pid) in our private directory: a leftover of a dead run
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        chmod(path_.c_str(), 0600) != 0 || listen(fd_, 16) != 0) {
        const std::string why = std::strerror(errno);
        if (fd_ >= 0) close(fd_);
        unlink(path_.c_str());
        throw core::Error(core::kExitRunFailed,
                          "cannot listen for memtool ctl on " + path_ + ": " + why);
    }
}

ControlServer::~ControlServer() {
    if (programTimer_ >= 0) close(programTimer_);  // the loop has gone already
    for (auto& c : clients_) close(c.fd);
    if (fd_ >= 0) close(fd_);
    unlink(path_.c_str());
}

void ControlServer::attach(EventLoop& loop) {
    loop_ = &loop;
    loop.watch(fd_, [this, &loop] { acceptClients(loop); });
    listener_.onStreamRead([this] { retryWaiting(); });
}

bool ControlServer::programStarting() const {
    if (program_ <= 0) return false;
    for (const auto& c : listener_.connections()) {
        const auto& h = c->aggregator().handshake();
        if (h && h->pid == program_) return false;  // connected (open or since closed)
    }
    return true;
}

namespace {
// How long a request for the program waits for its stream: it connects at its first
// tracked allocation, a fraction of a second after it starts, or never (a program
// that allocates nothing memtool tracks).
constexpr int kProgramStreamWaitS = 5;
}  // namespace

void ControlServer::waitForProgram(std::list<Client>::iterator client, const std::string& line) {
    client->waiting = true;  // until its stream connects (retryWaiting), or the timer
    waitingForProgram_.emplace_back(client, line);
    if (programTimer_ >= 0 || !loop_) return;
    programTimer_ = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    itimerspec when{};
    when.it_value.tv_sec = kProgramStreamWaitS;
    if (programTimer_ < 0 || timerfd_settime(programTimer_, 0, &when, nullptr) != 0) {
        stopProgramTimer();  // no timer: they wait within ctl's --timeout
        return;
    }
    loop_->watch(programTimer_, [this] {
        for (auto& [waiting, line] : takeWaitingForProgram())
            answer(waiting, {{"status", "not_ready"}});
    });
}

std::vector<std::pair<std::list<ControlServer::Client>::iterator, std::string>>
ControlServer::takeWaitingForProgram() {
    stopProgramTimer();
    auto waiting = std::move(waitingForProgram_);
    waitingForProgram_.clear();
    for (auto& w : waiting) w.first->waiting = false;
    return waiting;
}

void ControlServer::retryWaiting() {
    if (waitingForProgram_.empty() || !connectionOf(program_)) return;
    for (auto& [client, line] : takeWaitingForProgram()) handle(client, line);
}

void ControlServer::stopProgramTimer() {
    if (programTimer_ < 0) return;
    if (loop_) loop_->unwatch(programTimer_);
    close(programTimer_);
    programTimer_ = -1;
}

void ControlServer::acceptClients(EventLoop& loop) {
    for (;;) {
        const int fd = acceptPeer(fd_);
        if (fd == kRefusedPeer) continue;  // another user: closed unheard
        if (fd < 0) return;
        auto it = clients_.insert(clients_.end(), Client{fd, {}, false});
        loop.watch(fd, [this, &loop, it] { readClient(loop, it); });
    }
}

void ControlServer::readClient(EventLoop& loop, std::list<Client>::iterator client) {
    char buf[4096];
    ssize_t n = read(client->fd, buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) return dropClient(client);
    client->input.append(buf, static_cast<size_t>(n));
    if (client->input.size() > kMaxRequestBytes && client->input.find('\n') > kMaxRequestBytes) {
        // Said before the client goes: a request of ctl's own is checked first.
        if (!client->waiting)
            answer(client,
                   {{"status", "bad_request"},
                    {"error", fmt::format("a request of more than {} bytes", kMaxRequestBytes)}});
        return dropClient(client);
    }
    const size_t newline = client->input.find('\n');
    if (newline == std::string::npos || client->waiting) return;
    const std::string line = client->input.substr(0, newline);
    client->input.erase(0, newline + 1);
    handle(client, line);
}

CollectorConnection* ControlServer::connectionOf(int64_t pid) const {
    for (const auto& c : listener_.connections())
        if (c->open() && c->isStream() && c->aggregator().handshake()->pid == pid) return c.get();
    return nullptr;
}

nlohmann::json ControlServer::list() const {
    nlohmann::json processes = nlohmann::json::array();
    for (const auto& c : listener_.connections()) {
        if (!c->open() || !c->isStream()) continue;
        const core::Handshake& h = *c->aggregator().handshake();
        nlohmann::json regions = nlohmann::json::array();
        for (const auto& [id, r] : c->aggregator().regions()) {
            const char* state = r.pausedBytes == 0             ? "resident"
                                : r.pausedBytes == r.liveBytes ? "paused"
                                                               : "partly paused";
            regions.push_back({{"tag", r.record.tag},
                               {"device", deviceText(r.record.device)},
                               {"backup", core::backupName(r.record.backup)},
                               {"bytes", r.liveBytes},
                               {"paused_bytes", r.pausedBytes},
                               {"state", state}});
        }
        processes.push_back({{"pid", h.pid},
                             {"ppid", h.ppid},
                             {"forked", h.forked},
                             {"command", h.command},
                             {"regions", regions}});
        // What `ctl --rank N` selects by; none where no launcher set one.
        if (const auto rank = core::launcherRanks(h.environment).rank)
            processes.back()["rank"] = *rank;
        if (isAttachedProgram(*c)) processes.back()["attached"] = true;
    }
    // Launched, its stream not connected yet: it is ours all the same. One object
    // (json::insert of a bare braced list inserts each of its pairs instead).
    if (programStarting())
        processes.insert(processes.begin(), nlohmann::json{{"pid", program_},
                                                           {"ppid", getpid()},
                                                           {"forked", false},
                                                           {"starting", true},
                                                           {"command", command_},
                                                           {"regions", nlohmann::json::array()}});
    return {{"run", {{"pid", getpid()}, {"command", command_}}}, {"processes", processes}};
}

void ControlServer::handle(std::list<Client>::iterator client, const std::string& line) {
    const nlohmann::json request = nlohmann::json::parse(line, nullptr, false);
    const std::string op = request.is_object() ? request.value("op", "") : "";
    if (op == "list") return answer(client, list());
    if (!request.is_object() || !request.contains("pid") || !request["pid"].is_number_integer())
        return answer(client, {{"status", "bad_request"}, {"error", "no process id"}});
    CollectorConnection* c = connectionOf(request["pid"].get<int64_t>());
    if (op == "policy") {
        if (!c) return answer(client, {{"status", "no_such_process"}});
        if (!policyHandler_)
            return answer(client, {{"status", "refused"},
                                   {"body", {{"error", "this run takes no policies"}}}});
        std::vector<std::string> tags;
        for (const auto& [id, r] : c->aggregator().regions()) tags.push_back(r.record.tag);
        const nlohmann::json body =
            policyHandler_(static_cast<pid_t>(request["pid"].get<int64_t>()), request, tags);
        nlohmann::json reply{{"status", body.value("ok", false) ? "ok" : "failed"}, {"body", body}};
        if (body.contains("error")) reply["error"] = body["error"];
        return answer(client, reply);
    }
    if (op == "tensors" || op == "snapshot" || op == "counters") {
        // Asked by the process about itself: the records it sent before asking are
        // in the socket already; fold them first.
        if (!c) return answer(client, {{"status", "no_such_process"}});
        ReadBuffer buffer(64 * 1024);
        c->drain(buffer);
        if (op == "snapshot") return answer(client, snapshotAnswer(*c));
        if (op == "counters")
            return answer(
                client,
                {{"status", "ok"},
                 {"body", countersReport(c->aggregator(), c->symbolizer(), siteMode_,
                                         request.contains("sites") && request["sites"] == true)}});
        TensorsQuery query;
        if (request.contains("device") && request["device"].is_string())
            query.device = request["device"].get<std::string>();
        query.verbose = request.contains("verbose") && request["verbose"] == true;
        return answer(client, tensorsAnswer(*c, request, query));
    }
    if (op != "request" || !request.contains("argv") || !request["argv"].is_array() ||
        request["argv"].empty())
        return answer(client, {{"status", "bad_request"}, {"error", "no command"}});
    std::vector<std::string> argv;
    for (const auto& a : request["argv"]) {
        if (!a.is_string())
            return answer(
                client, {{"status", "bad_request"}, {"error", "a command word that is not text"}});
        argv.push_back(a.get<std::string>());
    }
    if (!c && request["pid"].get<int64_t>() == program_ && programStarting())
        return waitForProgram(client, line);
    if (!c) return answer(client, {{"status", "no_such_process"}});
    TensorsQuery query;
    Kind kind = Kind::Forward;
    if (argv[0] == "tensors") {
        // --verbose is memtool run's to honour; --device is both sides'.
        kind = Kind::Tensors;
        std::vector<std::string> collectorArgv;
        for (size_t i = 0; i < argv.size(); ++i) {
            if (argv[i] == "--verbose") {
                query.verbose = true;
                continue;
            }
            if (argv[i] == "--device" && i + 1 < argv.size()) query.device = argv[i + 1];
            collectorArgv.push_back(argv[i]);
        }
        argv = std::move(collectorArgv);
    } else if (argv[0] == "snapshot") {
        if (argv.size() != 1)
            return answer(client,
                          {{"status", "bad_request"}, {"error", "snapshot takes no arguments"}});
        kind = Kind::Snapshot;
        argv = {"ping"};  // its reply follows every record the process sent before it
    }
    forward(client, *c, std::move(argv), kind, std::move(query));
}

void ControlServer::forward(std::list<Client>::iterator client, CollectorConnection& c,
                            std::vector<std::string> argv, Kind kind, TensorsQuery query) {
    const uint64_t id = nextRequest_++;
    c.onReply([this, &c](const core::ReplyRecord& r) { onReply(c, r); });
    client->waiting = true;
    const bool yield = !argv.empty() && argv[0] == "yield";
    pending_[id] = Pending{client, kind, std::move(query), &c, yield, nullptr};
    if (!c.sendRequest(id, argv)) {
        pending_.erase(id);
        client->waiting = false;
        answer(client, {{"status", "gone"}});
    }
}

bool ControlServer::isAttachedProgram(const CollectorConnection& c) const {
    const auto& h = c.aggregator().handshake();
    return attached_ && h && h->pid == program_;
}

bool ControlServer::ask(pid_t pid, std::vector<std::string> argv, Answered done) {
    CollectorConnection* c = connectionOf(pid);
    if (!c || !c->open() || argv.empty()) return false;
    const uint64_t id = nextRequest_++;
    c->onReply([this, c](const core::ReplyRecord& r) { onReply(*c, r); });
    Pending p;
    p.client = clients_.end();
    p.kind = argv[0] == "tensors" ? Kind::Tensors : Kind::Forward;
    p.connection = c;
    p.internal = std::move(done);
    pending_[id] = std::move(p);
    if (c->sendRequest(id, argv)) return true;
    pending_.erase(id);
    return false;
}

void ControlServer::deliver(const Pending& p, const nlohmann::json& reply) {
    if (p.internal) return p.internal(reply);
    p.client->waiting = false;
    answer(p.client, reply);
}

void ControlServer::onReply(CollectorConnection& c, const core::ReplyRecord& r) {
    auto it = pending_.find(r.id);
    if (it == pending_.end()) return;  // its client went away
    const Pending p = it->second;
    pending_.erase(it);
    // The process's stream ended first (CollectorConnection::close): it is gone,
    // which ctl says as such (exit 3), not as a command that failed.
    if (!c.open() && r.status == core::ReplyStatus::Failed &&
        r.body == CollectorConnection::kEndedBeforeAnswer)
        return deliver(p, {{"status", "gone"}});
    // A collector's answer is data, not trusted JSON: what does not parse, or nests
    // deep enough to overflow the stack when dumped, goes on as text.
    nlohmann::json body = r.body;
    if (reporters::nestingWithin(r.body, reporters::kMaxTraceNesting)) {
        nlohmann::json parsed = nlohmann::json::parse(r.body, nullptr, false);
        if (!parsed.is_discarded()) body = std::move(parsed);
    }
    // An attached program's yield leaves what was there before memtool came.
    if (p.yield && isAttachedProgram(c) && body.is_object()) {
        if (beforeAttachBytes_)
            body["before_attach_bytes"] = *beforeAttachBytes_;
        else
            body["before_attach_unlisted"] = true;
    }
    if (r.status == core::ReplyStatus::Ok && p.kind == Kind::Tensors)
        return deliver(p, tensorsAnswer(c, body, p.query));
    if (r.status == core::ReplyStatus::Ok && p.kind == Kind::Snapshot)
        return deliver(p, snapshotAnswer(c));
    deliver(p, {{"status", statusName(r.status)}, {"body", body}});
}

nlohmann::json ControlServer::tensorsAnswer(CollectorConnection& c, const nlohmann::json& visible,
                                            const TensorsQuery& query) {
    nlohmann::json report =
        tensorsReport(c.aggregator(), c.symbolizer(), visible, query, siteMode_);
    // What it allocated before memtool attach came is not among the live blocks.
    if (isAttachedProgram(c)) report["attached"] = true;
    const std::string text = reporters::renderTensors(report);
    return {{"status", "ok"}, {"body", std::move(report)}, {"text", text}};
}

nlohmann::json ControlServer::snapshotAnswer(CollectorConnection& c) {
    ProcessOutcome outcome;
    outcome.durationS = c.connectedS();
    outcome.snapshot = true;
    core::Trace trace;
    trace.memtoolVersion = MEMTOOL_VERSION;
    trace.processes.push_back(
        buildProcessTrace(c.aggregator(), c.symbolizer(), outcome, siteMode_));
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd)) trace.processes.back().cwd = cwd;
    reporters::recordSources(trace);  // as memtool run does at the end
    return {{"status", "ok"},
            {"trace", reporters::traceToJson(trace).dump(
                          2, ' ', false, nlohmann::json::error_handler_t::replace)}};
}

void ControlServer::answer(std::list<Client>::iterator client, const nlohmann::json& reply) {
    const std::string text =
        reply.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    // ctl waits for this line; a client that stopped reading loses it.
    size_t sent = 0;
    for (int waits = 0; sent < text.size();) {
        ssize_t n = send(client->fd, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
        if (n > 0) {
            sent += static_cast<size_t>(n);
        } else if (n < 0 && (errno == EAGAIN || errno == EINTR) && waits++ < 500) {
            pollfd w{client->fd, POLLOUT, 0};
            poll(&w, 1, 10);
        } else {
            break;
        }
    }
}

void ControlServer::forgetEndedStreams() {
    for (auto it = pending_.begin(); it != pending_.end();) {
        if (it->second.connection->open()) {
            ++it;
            continue;
        }
        const Pending p = it->second;
        it = pending_.erase(it);
        deliver(p, {{"status", "no_such_process"}});
    }
}

void ControlServer::dropClient(std::list<Client>::iterator client) {
    std::erase_if(waitingForProgram_, [&](const auto& w) { return w.first == client; });
    std::vector<CollectorConnection*> undo;
    for (auto it = pending_.begin(); it != pending_.end();) {
        if (it->second.client != client) {
            ++it;
            continue;
        }
        if (it->second.yield) undo.push_back(it->second.connection);
        it = pending_.erase(it);
    }
    // A yield whose asker gave up (ctl's --timeout) must not leave the program
    // parked with no one told: a restore follows it down the same stream, so the
    // collector, which runs requests in order, undoes it as soon as it is done
    // (or finds nothing to restore where it failed). Its answer has no one to go to.
    // (The listener keeps every connection for the run, closed or not.)
    for (CollectorConnection* c : undo)
        if (c->open()) c->sendRequest(nextRequest_++, {"restore"});
    if (loop_) loop_->unwatch(client->fd);
    close(client->fd);
    clients_.erase(client);
}

}  // namespace memtool::cli
