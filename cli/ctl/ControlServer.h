#pragma once
// The run's end of `memtool ctl`: a socket in the user's control directory
// (ControlDirectory.h) on which ctl asks, one JSON object per line,
//
//   {"op":"list"}                            -> this run and its processes, with
//                                               their regions as the streams tell
//                                               and their rank where a launcher
//                                               set one (core/LauncherRanks.h)
//   {"op":"request","pid":P,"argv":[...]}    -> forwarded down P's stream to its
//                                               collector; its reply comes back as
//                                               {"status":..., "body":...}
//       argv "tensors [--device D] [--verbose]": the collector lists the Python-
//       visible tensors; the answer is the whole report, {"status", "body", "text"}
//       argv "snapshot": a trace.json of P as of now, {"status", "trace": TEXT}
//   {"op":"tensors","pid":P,"tensors":[...],"device":D,"verbose":B}
//   {"op":"policy","pid":P,"policy":DOC|"off"|"show"}
//                                            -> P's memory policy set, ended or shown
//                                               (cli/policy/PolicyRunner), {"status", "body"}
//   {"op":"snapshot","pid":P}                -> the same, asked by the process itself
//                                               (memtool.report_tensors, memtool.snapshot),
//                                               which sent its records first
//
// and gets one JSON line back. Requests to one process are answered in order
// (its collector runs them one at a time). The program the run launched is listed
// ("starting": true) before its stream connects, and a request for it then waits
// for the stream, 5 s at most ({"status": "not_ready"} after that).

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/live/LiveReports.h"
#include "trace/TraceBuilder.h"

namespace memtool::cli {

class CollectorListener;
class CollectorConnection;
class EventLoop;

class ControlServer {
public:
    // Throws core::Error (125) when the control directory is not private or the
    // socket cannot be made.
    ControlServer(CollectorListener& listener, std::vector<std::string> command,
                  SiteMode siteMode = SiteMode::User);
    ~ControlServer();  // removes the socket
    ControlServer(const ControlServer&) = delete;
    ControlServer& operator=(const ControlServer&) = delete;

    const std::string& socketPath() const { return path_; }
    void attach(EventLoop& loop);
    // The program the run launched: until its stream connects (its first tracked
    // allocation, a moment after it starts), it is listed as starting, and a
    // request for it waits for its stream (within ctl's --timeout).
    void expectProgram(pid_t pid) { program_ = pid; }
    // The program is one memtool attach came into: listed as attached; a yield's
    // answer says what it could not take: the bytes of the storages from before
    // the attach Python could see (none: they were not listed).
    void markAttached() { attached_ = true; }
    void setBeforeAttach(std::optional<uint64_t> bytes) { beforeAttachBytes_ = bytes; }
    // memtool's own request to process `pid`'s collector (memtool attach asks for
    // the tensors live at the attach): the answer, as ctl would get it
    // ({"status", "body", ...}), goes to `done`. False when `pid` has no open stream.
    using Answered = std::function<void(const nlohmann::json&)>;
    bool ask(pid_t pid, std::vector<std::string> argv, Answered done);
    // Who answers {"op":"policy"}: the process, the request, the tags its regions have.
    using PolicyHandler = std::function<nlohmann::json(pid_t, const nlohmann::json&,
                                                       const std::vector<std::string>&)>;
    void setPolicyHandler(PolicyHandler handler) { policyHandler_ = std::move(handler); }
    // Before the listener forgets the ended streams (CollectorListener::forgetEnded):
    // requests still waiting on one of them are answered as for a process gone.
    void forgetEndedStreams();

private:
    struct Client {
        int fd;
        std::string input;
        bool waiting = false;  // a forwarded request is out
    };
    void acceptClients(EventLoop& loop);
    void readClient(EventLoop& loop, std::list<Client>::iterator client);
    void handle(std::list<Client>::iterator client, const std::string& line);
    nlohmann::json list() const;
    CollectorConnection* connectionOf(int64_t pid) const;
    bool programStarting() const;  // launched, and no stream of its own seen yet
    // A request for the program before its stream: it waits (retryWaiting), 5 s at most.
    void waitForProgram(std::list<Client>::iterator client, const std::string& line);
    void retryWaiting();  // the requests that wait for the program's stream, once it came
    // The waiting requests, their clients free to be answered; the timer stopped.
    std::vector<std::pair<std::list<Client>::iterator, std::string>> takeWaitingForProgram();
    void stopProgramTimer();
    void answer(std::list<Client>::iterator client, const nlohmann::json& reply);
    void dropClient(std::list<Client>::iterator client);
    // A request for P's collector; its reply goes to `kind`'s handling.
    enum class Kind { Forward, Tensors, Snapshot };
    struct Pending {
        std::list<Client>::iterator client;
        Kind kind = Kind::Forward;
        TensorsQuery query;
        CollectorConnection* connection = nullptr;
        bool yield = false;  // undone (restore) when its client goes before the answer
        Answered internal;   // memtool's own request (ask): no client
    };
    // `c` is the stream of the program memtool attach came into.
    bool isAttachedProgram(const CollectorConnection& c) const;
    // The answer to `p`: to its client, or to memtool's own asker.
    void deliver(const Pending& p, const nlohmann::json& reply);
    void forward(std::list<Client>::iterator client, CollectorConnection& c,
                 std::vector<std::string> argv, Kind kind, TensorsQuery query);
    void onReply(CollectorConnection& c, const core::ReplyRecord& r);
    nlohmann::json tensorsAnswer(CollectorConnection& c, const nlohmann::json& visible,
                                 const TensorsQuery& query);
    nlohmann::json snapshotAnswer(CollectorConnection& c);

    CollectorListener& listener_;
    PolicyHandler policyHandler_;
    std::vector<std::string> command_;
    SiteMode siteMode_;
    EventLoop* loop_ = nullptr;
    std::string path_;
    int fd_ = -1;
    std::list<Client> clients_;
    uint64_t nextRequest_ = 1;
    std::map<uint64_t, Pending> pending_;  // request id -> who asked, and for what
    pid_t program_ = 0;
    bool attached_ = false;
    std::optional<uint64_t> beforeAttachBytes_;
    int programTimer_ = -1;  // a timerfd: how long a request waits for the program's stream
    // Requests for the program before its stream connected: who asked, and the line.
    std::vector<std::pair<std::list<Client>::iterator, std::string>> waitingForProgram_;
};

}  // namespace memtool::cli
