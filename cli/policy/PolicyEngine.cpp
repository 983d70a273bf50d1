#include "cli/policy/PolicyEngine.h"

#include <algorithm>
#include <cmath>

namespace memtool::cli::policy {

namespace {

constexpr double kMaxBackoffS = 60;

std::optional<double> usedPercentOf(const DeviceReading& r) {
    if (!r.used || !r.total || *r.total == 0) return std::nullopt;
    return 100.0 * static_cast<double>(*r.used) / static_cast<double>(*r.total);
}

bool inBand(const Rule& rule, std::optional<double> used) {
    if (!rule.band) return true;
    if (!used) return false;
    const auto [lo, hi] = *rule.band;
    return *used >= lo && (*used < hi || (hi == 100 && *used <= hi));
}

uint64_t nanos(double s) { return static_cast<uint64_t>(std::llround(s * 1e9)); }

}  // namespace

std::optional<uint64_t> PolicyEngine::readingOf(const Rule& rule, const DeviceReading& r) const {
    const auto base = atGc_.find(r.device);
    const uint64_t allocated0 = base == atGc_.end() ? 0 : base->second.first;
    const uint64_t freed0 = base == atGc_.end() ? 0 : base->second.second;
    const uint64_t allocated = r.allocated - std::min(r.allocated, allocated0);
    const uint64_t freed = r.freed - std::min(r.freed, freed0);
    switch (rule.metric) {
        case Metric::Used:
            return r.used;
        case Metric::Process:
            return r.process;
        case Metric::Allocated:
            return allocated;
        case Metric::Freed:
            return freed;
        case Metric::Max:
            return std::max(allocated, freed);
    }
    return std::nullopt;
}

bool PolicyEngine::applies(const Action& a) const {
    switch (a.kind) {
        case ActionKind::Pause:
            return !paused_.count(a.tag) && !yielded_;
        case ActionKind::Resume:
            return paused_.count(a.tag) != 0;
        case ActionKind::Yield:
            return !yielded_;
        case ActionKind::Restore:
            return yielded_;
        default:
            return true;
    }
}

// Decisions on the same target in one round: the last one stands.
std::string PolicyEngine::targetOf(const Decision& d) const {
    switch (d.action.kind) {
        case ActionKind::Gc:
            return "gc " + d.device;
        case ActionKind::Pause:
        case ActionKind::Resume:
            return "tag " + d.action.tag;
        case ActionKind::Yield:
        case ActionKind::Restore:
            return "yield";
        case ActionKind::Spill:
            return "spill";
    }
    return "";
}

std::vector<Decision> PolicyEngine::evaluate(const std::vector<DeviceReading>& readings,
                                             uint64_t nowNs) {
    std::vector<Decision> out;
    for (const Rule& rule : policy_.rules) {
        if (!applies(rule.action)) continue;
        for (const DeviceReading& r : readings) {
            if (!rule.device.matches(r.device)) continue;
            const std::optional<double> used = usedPercentOf(r);
            if (!inBand(rule, used)) continue;
            const std::optional<uint64_t> value = readingOf(rule, r);
            const std::optional<uint64_t> threshold = rule.threshold.resolve(r.total);
            if (!value || !threshold) continue;
            if (rule.above ? *value <= *threshold : *value >= *threshold) continue;
            const auto clock = clocks_.find({rule.number, r.device});
            if (clock != clocks_.end() && nowNs < clock->second.notBeforeNs) continue;
            Decision d{rule.number, r.device,    rule.metric, *value,      *threshold,
                       used,        rule.action, rule.text(), r.allocated, r.freed};
            // A later rule on the same target takes the earlier one's place.
            const std::string target = targetOf(d);
            out.erase(std::remove_if(out.begin(), out.end(),
                                     [&](const Decision& e) { return targetOf(e) == target; }),
                      out.end());
            out.push_back(std::move(d));
            // A tag, a yield: one device's reading is enough to act on all of it.
            if (rule.action.kind != ActionKind::Gc) break;
        }
    }
    return out;
}

void PolicyEngine::done(const Decision& d, bool ok, uint64_t nowNs) {
    const Rule* rule = nullptr;
    for (const Rule& r : policy_.rules)
        if (r.number == d.rule) rule = &r;
    if (!rule) return;
    Clock& clock = clocks_[{d.rule, d.device}];
    if (!ok) {
        ++clock.failures;
        const double backoff =
            std::min(kMaxBackoffS, std::max(rule->cooldownS, 1.0) * std::pow(2.0, clock.failures));
        clock.notBeforeNs = nowNs + nanos(backoff);
        return;
    }
    clock.failures = 0;
    clock.notBeforeNs = nowNs + nanos(rule->cooldownS);
    switch (d.action.kind) {
        case ActionKind::Pause:
            paused_.insert(d.action.tag);
            break;
        case ActionKind::Resume:
            paused_.erase(d.action.tag);
            break;
        case ActionKind::Yield:
            yielded_ = true;
            break;
        case ActionKind::Restore:
            yielded_ = false;
            break;
        case ActionKind::Gc:
            atGc_[d.device] = {d.allocatedThen, d.freedThen};
            break;
        case ActionKind::Spill:
            break;
    }
}

}  // namespace memtool::cli::policy
