#pragma once
// A memory policy: rules that act on the memory of a running program when a
// reading crosses a threshold (docs/policies.md). Read from a JSON document
// (`memtool run --policy FILE`, `memtool ctl PID policy FILE`,
// memtool.set_policy), checked whole before anything is applied: a document
// with one bad rule is refused with a one-line error naming it.
//
//   {"interval_ms": 200, "max_disk": "50GiB", "any_time": ["kv"],
//    "rules": [{"device": "cuda", "metric": "used", "above": "85%",
//               "do": "pause weights to host", "cooldown_s": 1}, ...]}
//
// MemLord's strategy dict ({"0-50": {"metric": "max", "threshold": {"percent":
// 50.0}}, ...}: a band of the device's used percent -> when to collect) is read
// as the `gc` rules it means.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/Protocol.h"

namespace memtool::cli::policy {

// What a rule reads, per device:
//   Used: the device as polled (all of its users), bytes;
//   Process: memtool's exact resident bytes of the program there (paused ones not);
//   Allocated, Freed: bytes the program allocated / freed there since that
//   device's last `gc` (MemLord's counters), Max: the larger of the two.
enum class Metric { Used, Process, Allocated, Freed, Max };
const char* metricName(Metric m);

// A size a reading is compared with: bytes, a percent of the device's capacity,
// or both (MemLord's threshold: the larger one counts).
struct Threshold {
    std::optional<uint64_t> bytes;
    std::optional<double> percent;
    // In bytes for a device of `capacity` bytes; nullopt when only a percent is
    // given and the capacity is not known.
    std::optional<uint64_t> resolve(std::optional<uint64_t> capacity) const;
    std::string text() const;  // "85%", "200.00 MiB", "max(1.00 GiB, 50%)"
};

// "cpu" (host memory), "cuda" (each CUDA device on its own), "cuda:N".
struct DeviceSelector {
    bool cuda = false;
    std::optional<int> index;                       // cuda:N
    bool matches(const std::string& device) const;  // "cpu", "cuda:0", ...
    bool overlaps(const DeviceSelector& other) const;
    std::string text() const;
};

enum class ActionKind { Gc, Pause, Resume, Spill, Yield, Restore };
struct Action {
    ActionKind kind = ActionKind::Gc;
    std::string tag;  // pause, resume
    // pause: where the content goes whatever the region's own backup says (None:
    // the region's own); yield: host or disk (None: yield's default).
    core::BackupKind to = core::BackupKind::None;
    std::string text() const;  // as the document wrote it, normalized
    // The command the program's collector runs for it (ControlChannel).
    std::vector<std::string> command(bool anyTime) const;
    // What it undoes, for hysteresis: pause <-> resume of one tag, yield <-> restore.
    bool undoes(const Action& other) const;
};

struct Rule {
    size_t number = 0;  // from 1, in the document's order
    DeviceSelector device;
    Metric metric = Metric::Used;
    bool above = true;  // false: below
    Threshold threshold;
    std::optional<std::pair<double, double>> band;  // the device's used percent, [low, high)
    Action action;
    double cooldownS = 1;
    std::string text() const;  // "cuda used above 85%: pause weights to host"
};

struct Policy {
    uint32_t intervalMs = 200;
    std::optional<uint64_t> maxDiskBytes;  // disk backups beyond it are refused
    std::vector<std::string> anyTimeTags;  // paused without waiting for a safe point
    std::vector<Rule> rules;
    bool anyTime(const std::string& tag) const;
};

// The document -> a checked policy. Throws core::Error (exit 2) with
// "policy: rule N: ..." (or "policy: ...") on the first thing wrong.
Policy parsePolicy(const nlohmann::json& document);
// A file's JSON document, unchecked (errors as parsePolicy's: unreadable, not
// JSON), and the policy it holds.
nlohmann::json readPolicyDocument(const std::string& path);
Policy readPolicyFile(const std::string& path);
// Checks the tags the rules name against the regions a process declared; throws
// as parsePolicy does for one that names none of them.
void checkTags(const Policy& policy, const std::vector<std::string>& knownTags);
// What `memtool ctl PID policy show` prints and trace.json keeps.
nlohmann::json policyJson(const Policy& policy);

}  // namespace memtool::cli::policy
