#pragma once
// memtool run's policy clock: every interval_ms it reads the machine
// (UsagePoller), keeps the readings as series for trace.json, and for each
// process that has a policy (the run's --policy, or its own from `memtool ctl
// PID policy FILE` / memtool.set_policy) asks its PolicyEngine what to do, then
// runs each decision as a command to that process's collector, one at a time.
// Every action is kept with the reading that triggered it and what came of it.
//
// The process's own figures (the `process`, `allocated` and `freed` metrics)
// are memtool's exact ones, from its stream as folded so far.

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/policy/PolicyEngine.h"
#include "cli/policy/UsagePoller.h"
#include "core/Timeline.h"
#include "trace/TraceModel.h"

namespace memtool::cli {
class CollectorConnection;
class CollectorListener;
class ControlServer;
class EventLoop;
}  // namespace memtool::cli

namespace memtool::cli::policy {

class PolicyRunner {
public:
    PolicyRunner(CollectorListener& listener, ControlServer& control,
                 std::unique_ptr<UsageSource> source);
    ~PolicyRunner();
    PolicyRunner(const PolicyRunner&) = delete;
    PolicyRunner& operator=(const PolicyRunner&) = delete;

    // --poll MS: readings kept without a policy; --policy: every process's policy.
    void setPollInterval(uint32_t ms);
    void setRunPolicy(Policy policy);
    // `memtool ctl PID policy FILE|off|show` and memtool.set_policy/policy():
    // {"policy": DOCUMENT} sets process `pid`'s, {"policy": "off"} ends it,
    // {"policy": "show"} asks; `tags` are its declared regions'. The answer's body.
    nlohmann::json command(pid_t pid, const nlohmann::json& request,
                           const std::vector<std::string>& tags);
    void attach(EventLoop& loop);
    // One round: readings, decisions, the first command of each process's queue.
    void tick();
    // For the live view: the devices as last polled ("polled  cpu 4.10 GiB of
    // 24.00 GiB (17%) · cuda:0 ..."), and the last action; none before a poll.
    std::vector<std::string> liveLines() const;
    // The readings and actions so far, into the trace (its processes by pid).
    void describe(core::Trace& trace) const;

private:
    struct Process {
        std::optional<PolicyEngine> engine;
        bool own = false;  // set by ctl or the program, not the run's --policy
        std::deque<Decision> queue;
        bool inFlight = false;
        uint64_t diskBytes = 0;  // what the decision in flight puts on disk
    };
    struct ActionRecord {
        pid_t pid = 0;
        uint64_t unixNs = 0;
        double timeS = 0;  // on the process's clock
        Decision decision;
        bool ok = false;
        std::string message;
        uint64_t bytes = 0;
        double seconds = 0;
    };
    void arm();
    void record(const UsageSample& s);
    std::vector<DeviceReading> readingsOf(pid_t pid, const UsageSample& s) const;
    void runNext(pid_t pid);
    // The bytes `d` would back up on disk, and why `more` such bytes would pass the
    // policy's max_disk ("" when they would not).
    uint64_t diskBytesFor(pid_t pid, const Decision& d) const;
    std::string overDiskLimit(pid_t pid, const Policy& policy, uint64_t more) const;
    void refuse(pid_t pid, const Decision& d, const std::string& why);
    void answered(pid_t pid, const Decision& d, uint64_t startNs, const nlohmann::json& reply);
    // Process `pid`'s open stream, or null.
    const CollectorConnection* streamOf(pid_t pid) const;
    // Seconds on `pid`'s clock (its stream's start, as the rounds saw it).
    double processClock(pid_t pid, uint64_t unixNs) const;

    CollectorListener& listener_;
    ControlServer& control_;
    std::unique_ptr<UsageSource> source_;
    EventLoop* loop_ = nullptr;
    int timer_ = -1;
    uint32_t pollMs_ = 0;  // 0: no polling of its own
    std::optional<Policy> runPolicy_;
    std::map<pid_t, Process> processes_;
    uint32_t armedMs_ = 0;
    uint64_t firstUnixNs_ = 0;
    uint64_t rounds_ = 0;
    std::map<std::string, core::Timeline> series_;
    UsageSample last_;
    std::map<pid_t, uint64_t> streamStarts_;  // Unix ns: each process's clock's zero
    // Bytes the policy's own pauses and yields put on disk, per process and tag
    // ("" for a yield), until their resume or restore.
    std::map<pid_t, std::map<std::string, uint64_t>> onDisk_;
    std::vector<ActionRecord> actions_;
};

}  // namespace memtool::cli::policy
