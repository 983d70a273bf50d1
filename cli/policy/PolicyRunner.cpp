#include "cli/policy/PolicyRunner.h"

#include <fmt/format.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

#include "cli/ctl/ControlServer.h"
#include "cli/run/EventLoop.h"
#include "cli/stream/CollectorConnection.h"
#include "cli/stream/CollectorListener.h"
#include "core/Error.h"
#include "core/Units.h"
#include "trace/TraceBuilder.h"

namespace memtool::cli::policy {

using nlohmann::json;

namespace {

json ruleLines(const Policy& p) {
    json lines = json::array();
    for (const Rule& r : p.rules) lines.push_back(fmt::format("rule {}: {}", r.number, r.text()));
    return lines;
}

}  // namespace

PolicyRunner::PolicyRunner(CollectorListener& listener, ControlServer& control,
                           std::unique_ptr<UsageSource> source)
    : listener_(listener), control_(control), source_(std::move(source)) {}

PolicyRunner::~PolicyRunner() {
    if (timer_ < 0) return;
    if (loop_) loop_->unwatch(timer_);
    close(timer_);
}

void PolicyRunner::setPollInterval(uint32_t ms) {
    pollMs_ = ms;
    arm();
}

void PolicyRunner::setRunPolicy(Policy policy) {
    runPolicy_ = std::move(policy);
    arm();
}

void PolicyRunner::attach(EventLoop& loop) {
    loop_ = &loop;
    timer_ = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (timer_ < 0) throw core::Error(core::kExitRunFailed, "run: cannot make the policy's timer");
    loop.watch(timer_, [this] {
        uint64_t expirations = 0;
        if (read(timer_, &expirations, sizeof expirations) == sizeof expirations) tick();
    });
    arm();
}

// The clock runs at the shortest interval anything asks for; stopped when nothing does.
void PolicyRunner::arm() {
    if (timer_ < 0) return;
    uint32_t ms = pollMs_;
    auto shorter = [&ms](uint32_t m) { ms = ms == 0 ? m : std::min(ms, m); };
    if (runPolicy_) shorter(runPolicy_->intervalMs);
    for (const auto& [pid, p] : processes_)
        if (p.engine) shorter(p.engine->policy().intervalMs);
    if (ms == armedMs_) return;
    armedMs_ = ms;
    itimerspec when{};
    when.it_interval.tv_sec = ms / 1000;
    when.it_interval.tv_nsec = static_cast<long>(ms % 1000) * 1'000'000;
    when.it_value = when.it_interval;
    timerfd_settime(timer_, 0, &when, nullptr);
}

void PolicyRunner::tick() {
    std::vector<pid_t> pids;
    for (const auto& c : listener_.connections())
        if (c->open() && c->isStream()) {
            const core::Handshake& h = *c->aggregator().handshake();
            pids.push_back(static_cast<pid_t>(h.pid));
            streamStarts_[static_cast<pid_t>(h.pid)] = h.startUnixNs;
        }
    const UsageSample sample = source_->poll(pids);
    record(sample);
    for (pid_t pid : pids) {
        Process& p = processes_[pid];
        if (!p.engine && runPolicy_) p.engine.emplace(*runPolicy_);
        if (!p.engine || p.inFlight || !p.queue.empty()) continue;
        for (Decision& d : p.engine->evaluate(readingsOf(pid, sample), sample.unixNs))
            p.queue.push_back(std::move(d));
        runNext(pid);
    }
}

std::vector<std::string> PolicyRunner::liveLines() const {
    std::vector<std::string> out;
    if (rounds_ == 0) return out;
    std::string line = "polled ";
    for (const DeviceUsage& d : last_.devices)
        line += fmt::format("{}{} {} of {} ({:.0f}%)", line.size() > 7 ? " · " : "", d.device,
                            core::formatBytes(d.used), core::formatBytes(d.total),
                            d.total ? 100.0 * static_cast<double>(d.used) / d.total : 0.0);
    out.push_back(std::move(line));
    if (!actions_.empty()) {
        const ActionRecord& a = actions_.back();
        out.push_back(fmt::format("policy {} action{}, last: pid {} rule {}: {} {}",
                                  actions_.size(), actions_.size() == 1 ? "" : "s", a.pid,
                                  a.decision.rule, a.decision.action.text(),
                                  a.ok ? "ok" : "FAILED: " + a.message));
    }
    return out;
}

void PolicyRunner::record(const UsageSample& s) {
    last_ = s;
    if (rounds_++ == 0) firstUnixNs_ = s.unixNs;
    const uint64_t t = s.unixNs - std::min(s.unixNs, firstUnixNs_);
    for (const DeviceUsage& d : s.devices) {
        series_[d.device + ".used"].record(t, d.used);
        series_[d.device + ".total"].record(t, d.total);
        if (d.processes) series_[d.device + ".processes"].record(t, *d.processes);
    }
    for (const auto& [pid, bytes] : s.rss) series_[fmt::format("rss:{}", pid)].record(t, bytes);
    if (s.backupFreeBytes) series_["backup_dir.free"].record(t, *s.backupFreeBytes);
}

std::vector<DeviceReading> PolicyRunner::readingsOf(pid_t pid, const UsageSample& s) const {
    std::map<std::string, DeviceReading> byName;
    for (const DeviceUsage& d : s.devices) {
        DeviceReading& r = byName[d.device];
        r.device = d.device;
        r.used = d.used;
        r.total = d.total;
    }
    if (const CollectorConnection* c = streamOf(pid))
        for (const auto& [code, d] : c->aggregator().devices()) {
            if (core::devicePool(code) != core::DevicePool::Device) continue;
            const std::string name = core::deviceName(code);
            // Pinned and shared host memory count as the host's.
            DeviceReading& r = byName[core::cudaOrdinal(code) >= 0 ? name : "cpu"];
            r.device = core::cudaOrdinal(code) >= 0 ? name : "cpu";
            r.process += d.currentBytes;
            r.allocated += d.allocatedBytes;
            r.freed += d.freedBytes;
        }
    std::vector<DeviceReading> out;
    for (auto& [name, r] : byName) out.push_back(std::move(r));
    return out;
}

void PolicyRunner::runNext(pid_t pid) {
    Process& p = processes_[pid];
    if (p.inFlight || p.queue.empty() || !p.engine) return;
    const Decision d = p.queue.front();
    p.queue.pop_front();
    const bool anyTime = p.engine->policy().anyTime(d.action.tag);
    p.diskBytes = diskBytesFor(pid, d);
    if (const std::string why = overDiskLimit(pid, p.engine->policy(), p.diskBytes); !why.empty())
        return refuse(pid, d, why);
    const uint64_t start = unixNowNs();
    p.inFlight = true;
    if (!control_.ask(pid, d.action.command(anyTime),
                      [this, pid, d, start](const json& reply) { answered(pid, d, start, reply); }))
        answered(pid, d, start, {{"status", "no_such_process"}});
}

// What a disk backup of the decision would write: the resident bytes of the
// tag's regions (every region for a yield) whose content would go to disk.
uint64_t PolicyRunner::diskBytesFor(pid_t pid, const Decision& d) const {
    const bool pause = d.action.kind == ActionKind::Pause;
    const bool yield = d.action.kind == ActionKind::Yield;
    const bool spill = d.action.kind == ActionKind::Spill;
    if (!pause && !yield && !spill) return 0;
    uint64_t bytes = 0;
    if (const CollectorConnection* c = streamOf(pid))
        for (const auto& [id, r] : c->aggregator().regions()) {
            if (pause && r.record.tag != d.action.tag) continue;
            const bool cuda = core::cudaOrdinal(r.record.device) >= 0;
            // A spill moves what is paused in host memory: CUDA regions' host backups.
            if (spill) {
                if (cuda && r.record.backup == core::BackupKind::Host) bytes += r.pausedBytes;
                continue;
            }
            // Asked for a place, CPU memory goes to disk, CUDA memory where asked;
            // else each region to its own backup (a yield: disk unless told host).
            const core::BackupKind asked = d.action.to;
            const bool toDisk = yield ? (!cuda || asked != core::BackupKind::Host)
                                : asked != core::BackupKind::None
                                    ? (!cuda || asked == core::BackupKind::Disk)
                                    : r.record.backup == core::BackupKind::Disk;
            if (toDisk) bytes += r.liveBytes - std::min(r.liveBytes, r.pausedBytes);
        }
    return bytes;
}

std::string PolicyRunner::overDiskLimit(pid_t pid, const Policy& policy, uint64_t more) const {
    if (!policy.maxDiskBytes || more == 0) return "";
    uint64_t held = 0;
    if (const auto it = onDisk_.find(pid); it != onDisk_.end())
        for (const auto& [tag, bytes] : it->second) held += bytes;
    if (held + more <= *policy.maxDiskBytes) return "";
    return fmt::format("max_disk {}: the policy's disk backups hold {} and this one would add {}",
                       core::formatBytes(*policy.maxDiskBytes), core::formatBytes(held),
                       core::formatBytes(more));
}

// A decision not sent: kept as a failed action (the rule backs off).
void PolicyRunner::refuse(pid_t pid, const Decision& d, const std::string& why) {
    const uint64_t now = unixNowNs();
    answered(pid, d, now, {{"status", "failed"}, {"body", {{"ok", false}, {"message", why}}}});
}

void PolicyRunner::answered(pid_t pid, const Decision& d, uint64_t startNs, const json& reply) {
    ActionRecord a;
    a.pid = pid;
    a.unixNs = startNs;
    a.timeS = processClock(pid, startNs);
    a.decision = d;
    const json body = reply.contains("body") ? reply["body"] : json::object();
    a.ok = reply.value("status", "") == "ok" && body.is_object() && body.value("ok", true);
    if (body.is_object()) {
        if (body.contains("bytes") && body["bytes"].is_number_unsigned())
            a.bytes = body["bytes"].get<uint64_t>();
        if (body.contains("seconds") && body["seconds"].is_number())
            a.seconds = body["seconds"].get<double>();
        a.message = body.value("message", body.value("error", ""));
    }
    const std::string status = reply.value("status", "?");
    if (!a.ok && a.message.empty())
        a.message = status == "gone" || status == "no_such_process"
                        ? "the process ended before it answered"
                        : "the process answered " + status;
    actions_.push_back(a);
    if (a.ok) {
        const ActionKind k = d.action.kind;
        if (k == ActionKind::Pause || k == ActionKind::Yield)
            onDisk_[pid][k == ActionKind::Yield ? "" : d.action.tag] = processes_[pid].diskBytes;
        // What a spill moved counts until the run ends: its regions' resumes are
        // not told apart from others'.
        if (k == ActionKind::Spill) onDisk_[pid]["(spilled)"] += a.bytes;
        if (k == ActionKind::Resume) onDisk_[pid].erase(d.action.tag);
        if (k == ActionKind::Restore) onDisk_[pid].erase("");
    }
    auto it = processes_.find(pid);
    if (it == processes_.end()) return;
    it->second.inFlight = false;
    if (it->second.engine) it->second.engine->done(d, a.ok, unixNowNs());
    runNext(pid);
}

const CollectorConnection* PolicyRunner::streamOf(pid_t pid) const {
    for (const auto& c : listener_.connections())
        if (c->open() && c->isStream() && c->aggregator().handshake()->pid == pid) return c.get();
    return nullptr;
}

double PolicyRunner::processClock(pid_t pid, uint64_t unixNs) const {
    const auto it = streamStarts_.find(pid);
    if (it == streamStarts_.end() || unixNs <= it->second) return 0;
    return static_cast<double>(unixNs - it->second) / 1e9;
}

json PolicyRunner::command(pid_t pid, const json& request, const std::vector<std::string>& tags) {
    const json& what = request.contains("policy") ? request["policy"] : json();
    Process& p = processes_[pid];
    if (!p.engine && runPolicy_) p.engine.emplace(*runPolicy_);
    if (what == "show") {
        if (!p.engine) return {{"ok", true}, {"policy", nullptr}, {"lines", json::array()}};
        return {{"ok", true},
                {"policy", policyJson(p.engine->policy())},
                {"from", p.own ? "process" : "run"},
                {"lines", ruleLines(p.engine->policy())}};
    }
    if (what == "off") {
        p.engine.reset();
        p.queue.clear();
        p.own = true;
        arm();
        return {{"ok", true}, {"policy", nullptr}, {"lines", json::array()}};
    }
    try {
        Policy policy = parsePolicy(what);
        checkTags(policy, tags);
        p.engine.emplace(std::move(policy));
        p.queue.clear();
        p.own = true;
        arm();
        return {{"ok", true},
                {"policy", policyJson(p.engine->policy())},
                {"lines", ruleLines(p.engine->policy())}};
    } catch (const core::Error& e) {
        return {{"ok", false}, {"error", e.what()}};
    }
}

void PolicyRunner::describe(core::Trace& trace) const {
    if (rounds_ == 0 && actions_.empty()) return;
    core::PollSeries polls;
    polls.intervalMs = armedMs_;
    polls.rounds = rounds_;
    polls.startUnixS = static_cast<double>(firstUnixNs_) / 1e9;
    polls.hostSource = source_->hostSource();
    polls.cudaSource = source_->cudaSource();
    for (const auto& [name, timeline] : series_) polls.series[name] = timelineSeries(timeline);
    trace.polls = std::move(polls);
    for (core::ProcessTrace& p : trace.processes)
        if (const auto it = streamStarts_.find(static_cast<pid_t>(p.pid));
            it != streamStarts_.end())
            p.startUnixS = static_cast<double>(it->second) / 1e9;
    for (const ActionRecord& a : actions_) {
        core::PolicyAction out;
        out.pid = a.pid;
        out.timeS = a.timeS;
        out.rule = a.decision.rule;
        out.ruleText = a.decision.ruleText;
        out.device = a.decision.device;
        out.metric = metricName(a.decision.metric);
        out.readingBytes = a.decision.reading;
        out.thresholdBytes = a.decision.threshold;
        out.usedPercent = a.decision.usedPercent;
        out.action = a.decision.action.text();
        out.ok = a.ok;
        out.message = a.message;
        out.bytes = a.bytes;
        out.seconds = a.seconds;
        trace.policyActions.push_back(std::move(out));
    }
}

}  // namespace memtool::cli::policy
