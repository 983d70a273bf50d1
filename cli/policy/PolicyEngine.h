#pragma once
// Decides, from one round of readings, which rules of a policy act now. Pure:
// the clock and the readings come in, decisions go out, and the outcome of each
// decision comes back (done()), so that a scripted usage curve gives an exact
// sequence of actions (tests/cli/PolicyEngineTest.cpp).
//
// Rules act on each device they select on its own. Each (rule, device) has a
// cool-down after it acted (the rule's cooldown_s); one that failed backs off,
// doubling its cool-down up to a minute. A pause acts only on a tag the policy
// has not paused (and a resume only on one it paused), a yield only when not
// yielded, a restore only after its yield: an offload/reload pair keeps its
// hysteresis, whatever the readings do between the thresholds. Where several
// rules would act on the same thing in one round (a pause to host at 85% and to
// disk at 95%), the last one in the document does: tiers are listed from mild to
// severe. `gc` resets the device's allocated and freed counters (MemLord).

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli/policy/Policy.h"

namespace memtool::cli::policy {

// One device's figures for one round.
struct DeviceReading {
    std::string device;             // "cpu", "cuda:0", ...
    std::optional<uint64_t> used;   // as polled: the whole device's (host: its cgroup's)
    std::optional<uint64_t> total;  // its capacity (host: the cgroup's limit or MemTotal)
    uint64_t process = 0;           // memtool's exact resident bytes of the program there
    uint64_t allocated = 0;         // since the program started, cumulative
    uint64_t freed = 0;
};

struct Decision {
    size_t rule = 0;  // Rule::number
    std::string device;
    Metric metric = Metric::Used;
    uint64_t reading = 0;    // the metric's value that crossed
    uint64_t threshold = 0;  // the threshold in bytes
    std::optional<double> usedPercent;
    Action action;
    std::string ruleText;
    // The device's cumulative counters then: a gc counts from them on.
    uint64_t allocatedThen = 0;
    uint64_t freedThen = 0;
};

class PolicyEngine {
public:
    explicit PolicyEngine(Policy policy) : policy_(std::move(policy)) {}
    const Policy& policy() const { return policy_; }

    // The rules that act now, in the order to run them (at most one per target).
    std::vector<Decision> evaluate(const std::vector<DeviceReading>& readings, uint64_t nowNs);
    // What came of a decision: its state changes (a tag paused, counters reset)
    // when it succeeded, a back-off when it failed.
    void done(const Decision& d, bool ok, uint64_t nowNs);
    // The tags the policy holds paused, and whether it yielded.
    const std::set<std::string>& pausedTags() const { return paused_; }
    bool yielded() const { return yielded_; }

private:
    struct Clock {
        uint64_t notBeforeNs = 0;
        int failures = 0;
    };
    // The reading a rule compares, on `r`; nullopt when it cannot be read there.
    std::optional<uint64_t> readingOf(const Rule& rule, const DeviceReading& r) const;
    bool applies(const Action& a) const;
    std::string targetOf(const Decision& d) const;

    Policy policy_;
    std::map<std::pair<size_t, std::string>, Clock> clocks_;  // (rule, device)
    // Per device, the counters at its last gc.
    std::map<std::string, std::pair<uint64_t, uint64_t>> atGc_;
    std::set<std::string> paused_;
    bool yielded_ = false;
};

}  // namespace memtool::cli::policy
