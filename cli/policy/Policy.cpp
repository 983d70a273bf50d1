#include "cli/policy/Policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <regex>
#include <set>
#include <sstream>

#include "core/Error.h"
#include "core/Files.h"
#include "core/Units.h"

namespace memtool::cli::policy {

using nlohmann::json;

namespace {

constexpr uint64_t kMaxPolicyBytes = 1 << 20;

[[noreturn]] void refuse(const std::string& why) {
    throw core::Error(core::kExitBadInput, "policy: " + why);
}
// Rule 0: a key of the document itself.
[[noreturn]] void refuseRule(size_t number, const std::string& why) {
    refuse(number ? fmt::format("rule {}: {}", number, why) : why);
}

std::string percentText(double p) {
    std::string s = fmt::format("{:.2f}", p);
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
    return s + "%";
}

// "85%", "200MiB", 1048576, {"bytes": N, "percent": P}.
Threshold thresholdOf(const json& v, size_t rule, const char* key) {
    Threshold t;
    auto percent = [&](double p) {
        if (!std::isfinite(p) || p <= 0 || p > 100)
            refuseRule(rule, fmt::format("{}: a percent is above 0 and at most 100", key));
        t.percent = p;
    };
    if (v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0)) {
        t.bytes = v.get<uint64_t>();
    } else if (v.is_string()) {
        const std::string s = v.get<std::string>();
        if (!s.empty() && s.back() == '%') {
            char* end = nullptr;
            const double p = std::strtod(s.c_str(), &end);
            if (end != s.c_str() + s.size() - 1)
                refuseRule(rule, fmt::format("{}: '{}' is not a percent", key, s));
            percent(p);
        } else if (const auto bytes = core::parseSize(s)) {
            t.bytes = *bytes;
        } else {
            refuseRule(rule, fmt::format("{}: '{}' is not a size (200MiB, 85%, 1048576)", key, s));
        }
    } else if (v.is_object()) {
        for (const auto& [k, x] : v.items()) {
            if (k == "bytes" && (x.is_number_unsigned() || x.is_number_integer()) &&
                x.get<int64_t>() >= 0)
                t.bytes = x.get<uint64_t>();
            else if (k == "percent" && x.is_number())
                percent(x.get<double>());
            else
                refuseRule(rule, fmt::format("{}: '{}' is not bytes or percent", key, k));
        }
        if (!t.bytes && !t.percent)
            refuseRule(rule, fmt::format("{}: no bytes and no percent", key));
    } else {
        refuseRule(rule, fmt::format("{}: a size (\"200MiB\", \"85%\", 1048576)", key));
    }
    return t;
}

DeviceSelector deviceOf(const json& v, size_t rule) {
    if (!v.is_string()) refuseRule(rule, "device: \"cpu\", \"cuda\" or \"cuda:N\"");
    const std::string s = v.get<std::string>();
    DeviceSelector d;
    static const std::regex indexed("cuda:([0-9]{1,2})");
    std::smatch m;
    if (s == "cpu") return d;
    d.cuda = true;
    if (s == "cuda") return d;
    if (std::regex_match(s, m, indexed)) {
        d.index = std::stoi(m[1]);
        if (*d.index > 63) refuseRule(rule, fmt::format("device: no CUDA device {}", s));
        return d;
    }
    refuseRule(rule, fmt::format("device: '{}' is not \"cpu\", \"cuda\" or \"cuda:N\"", s));
}

Metric metricOf(const json& v, size_t rule) {
    const std::string s = v.is_string() ? v.get<std::string>() : "";
    for (Metric m : {Metric::Used, Metric::Process, Metric::Allocated, Metric::Freed, Metric::Max})
        if (s == metricName(m)) return m;
    refuseRule(rule, "metric: \"used\", \"process\", \"allocated\", \"freed\" or \"max\"");
}

std::vector<std::string> wordsOf(const std::string& s) {
    std::istringstream in(s);
    std::vector<std::string> words;
    for (std::string w; in >> w;) words.push_back(w);
    return words;
}

bool backupWord(const std::string& w, core::BackupKind* to) {
    if (w == "host") *to = core::BackupKind::Host;
    if (w == "disk") *to = core::BackupKind::Disk;
    return w == "host" || w == "disk";
}

// "gc", "pause TAG [to host|disk]", "resume TAG", "spill host backups to disk",
// "yield [to host|disk]", "restore".
Action actionOf(const json& v, size_t rule) {
    const std::vector<std::string> w = wordsOf(v.is_string() ? v.get<std::string>() : "");
    Action a;
    const size_t n = w.size();
    if (n == 1 && w[0] == "gc") return a;
    if (n == 1 && w[0] == "restore") {
        a.kind = ActionKind::Restore;
        return a;
    }
    if (n == 5 && w[0] == "spill" && w[1] == "host" && w[2] == "backups" && w[3] == "to" &&
        w[4] == "disk") {
        a.kind = ActionKind::Spill;
        return a;
    }
    if (w.size() >= 1 && w[0] == "yield" && (n == 1 || (n == 3 && w[1] == "to"))) {
        a.kind = ActionKind::Yield;
        if (n == 1 || backupWord(w[2], &a.to)) return a;
    }
    if (n >= 2 && (w[0] == "pause" || w[0] == "resume")) {
        a.kind = w[0] == "pause" ? ActionKind::Pause : ActionKind::Resume;
        a.tag = w[1];
        if (a.tag.size() > core::kMaxTagBytes)
            refuseRule(rule, fmt::format("do: a tag is at most {} bytes", core::kMaxTagBytes));
        if (n == 2) return a;
        if (a.kind == ActionKind::Pause && n == 4 && w[2] == "to" && backupWord(w[3], &a.to))
            return a;
    }
    refuseRule(rule,
               "do: \"gc\", \"pause TAG [to host|disk]\", \"resume TAG\", \"spill host backups "
               "to disk\", \"yield [to host|disk]\" or \"restore\"");
}

std::pair<double, double> bandOf(const json& v, size_t rule) {
    if (!v.is_array() || v.size() != 2 || !v[0].is_number() || !v[1].is_number())
        refuseRule(rule, "band: [LOW, HIGH], percents of the device's used memory");
    const double lo = v[0].get<double>(), hi = v[1].get<double>();
    // MemLord writes its top band (75, 101): 100% itself is in it.
    if (!(lo >= 0 && lo < hi && hi <= 101)) refuseRule(rule, "band: 0 <= LOW < HIGH <= 101");
    return {lo, hi};
}

Rule ruleOf(const json& r, size_t number) {
    if (!r.is_object()) refuseRule(number, "not an object");
    Rule rule;
    rule.number = number;
    for (const auto& [k, v] : r.items()) {
        if (k == "device")
            rule.device = deviceOf(v, number);
        else if (k == "metric")
            rule.metric = metricOf(v, number);
        else if (k == "above" || k == "below") {
            if (r.contains("above") && r.contains("below"))
                refuseRule(number, "\"above\" or \"below\", not both");
            rule.above = k == "above";
            rule.threshold = thresholdOf(v, number, k.c_str());
        } else if (k == "band")
            rule.band = bandOf(v, number);
        else if (k == "do")
            rule.action = actionOf(v, number);
        else if (k == "cooldown_s") {
            if (!v.is_number() || !(v.get<double>() >= 0) || v.get<double>() > 86400)
                refuseRule(number, "cooldown_s: seconds from 0 to 86400");
            rule.cooldownS = v.get<double>();
        } else
            refuseRule(number, fmt::format("unknown key '{}'", k));
    }
    for (const char* needed : {"device", "do"})
        if (!r.contains(needed)) refuseRule(number, fmt::format("no \"{}\"", needed));
    if (!r.contains("above") && !r.contains("below"))
        refuseRule(number, "no \"above\" or \"below\"");
    if (!r.contains("metric")) rule.metric = Metric::Used;
    if (!rule.above && rule.metric != Metric::Used && rule.metric != Metric::Process)
        refuseRule(number, "\"below\" reads \"used\" or \"process\"; counters only rise");
    return rule;
}

// The same kind of threshold on both: comparable without the device's capacity.
std::optional<std::pair<double, double>> comparable(const Threshold& a, const Threshold& b) {
    if (a.percent && b.percent && !a.bytes && !b.bytes) return std::pair{*a.percent, *b.percent};
    if (a.bytes && b.bytes && !a.percent && !b.percent)
        return std::pair{static_cast<double>(*a.bytes), static_cast<double>(*b.bytes)};
    return std::nullopt;
}

bool bandsOverlap(const Rule& a, const Rule& b) {
    if (!a.band || !b.band) return true;
    return a.band->first < b.band->second && b.band->first < a.band->second;
}

// Two rules whose actions undo each other, on the same readings: one of them
// must be "above", the other "below" a lower threshold, else both can hold at
// once and the pair would flap; and a reload must wait below its offload.
void checkPair(const Rule& a, const Rule& b) {
    if (!a.action.undoes(b.action) || !a.device.overlaps(b.device) || a.metric != b.metric ||
        !bandsOverlap(a, b))
        return;
    if (a.above == b.above)
        refuse(fmt::format("rules {} and {} undo each other ({}, {}) on the same readings, both {}",
                           a.number, b.number, a.action.text(), b.action.text(),
                           a.above ? "above" : "below"));
    const Rule& up = a.above ? a : b;
    const Rule& down = a.above ? b : a;
    const auto both = comparable(down.threshold, up.threshold);
    if (both && both->first >= both->second)
        refuse(
            fmt::format("rule {} ({} below {}) must read below rule {}'s threshold ({} above "
                        "{}): they would flap",
                        down.number, down.action.text(), down.threshold.text(), up.number,
                        up.action.text(), up.threshold.text()));
}

Policy memlordStrategy(const json& doc) {
    // {"0-50": {"metric": "max", "threshold": {"bytes": B, "percent": P}}, ...}:
    // every band a gc rule for each CUDA device.
    Policy p;
    static const std::regex band(R"(\(?\s*([0-9.]+)\s*[-,]\s*([0-9.]+)\s*\)?)");
    size_t number = 0;
    for (const auto& [key, v] : doc.items()) {
        ++number;
        std::smatch m;
        if (!std::regex_match(key, m, band))
            refuse(fmt::format("'{}' is neither a policy key nor a MemLord band (\"0-50\")", key));
        if (!v.is_object()) refuseRule(number, "a MemLord band's value is an object");
        Rule r;
        r.number = number;
        r.device.cuda = true;
        r.band = bandOf(json::array({std::stod(m[1]), std::stod(m[2])}), number);
        for (const auto& [k, x] : v.items()) {
            if (k == "metric")
                r.metric = metricOf(x, number);
            else if (k == "threshold")
                r.threshold = thresholdOf(x, number, "threshold");
            else
                refuseRule(number, fmt::format("unknown key '{}' in a MemLord band", k));
        }
        if (!v.contains("threshold")) refuseRule(number, "no \"threshold\"");
        if (!v.contains("metric")) r.metric = Metric::Max;
        if (r.metric == Metric::Used || r.metric == Metric::Process)
            refuseRule(number, "a MemLord band's metric is \"allocated\", \"freed\" or \"max\"");
        p.rules.push_back(r);
    }
    // A JSON object keeps its keys sorted as text ("(50, 75)" before "0-50"): the
    // bands are numbered from the lowest.
    std::sort(p.rules.begin(), p.rules.end(),
              [](const Rule& a, const Rule& b) { return a.band->first < b.band->first; });
    for (size_t i = 0; i < p.rules.size(); ++i) p.rules[i].number = i + 1;
    return p;
}

}  // namespace

const char* metricName(Metric m) {
    switch (m) {
        case Metric::Used:
            return "used";
        case Metric::Process:
            return "process";
        case Metric::Allocated:
            return "allocated";
        case Metric::Freed:
            return "freed";
        case Metric::Max:
            return "max";
    }
    return "used";
}

std::optional<uint64_t> Threshold::resolve(std::optional<uint64_t> capacity) const {
    std::optional<uint64_t> out = bytes;
    if (percent && capacity) {
        const auto p = static_cast<uint64_t>(std::llround(*percent / 100.0 * *capacity));
        out = std::max(out.value_or(0), p);
    }
    if (percent && !capacity && !bytes) return std::nullopt;
    return out;
}

std::string Threshold::text() const {
    if (bytes && percent)
        return fmt::format("max({}, {})", core::formatBytes(*bytes), percentText(*percent));
    if (percent) return percentText(*percent);
    return core::formatBytes(bytes.value_or(0));
}

bool DeviceSelector::matches(const std::string& device) const {
    if (!cuda) return device == "cpu";
    if (index) return device == fmt::format("cuda:{}", *index);
    return device.rfind("cuda:", 0) == 0;
}

bool DeviceSelector::overlaps(const DeviceSelector& other) const {
    if (cuda != other.cuda) return false;
    return !index || !other.index || *index == *other.index;
}

std::string DeviceSelector::text() const {
    if (!cuda) return "cpu";
    return index ? fmt::format("cuda:{}", *index) : "cuda";
}

std::string Action::text() const {
    switch (kind) {
        case ActionKind::Gc:
            return "gc";
        case ActionKind::Pause:
            return to == core::BackupKind::None
                       ? "pause " + tag
                       : fmt::format("pause {} to {}", tag, core::backupName(to));
        case ActionKind::Resume:
            return "resume " + tag;
        case ActionKind::Spill:
            return "spill host backups to disk";
        case ActionKind::Yield:
            return to == core::BackupKind::None ? "yield"
                                                : fmt::format("yield to {}", core::backupName(to));
        case ActionKind::Restore:
            return "restore";
    }
    return "gc";
}

std::vector<std::string> Action::command(bool anyTime) const {
    switch (kind) {
        case ActionKind::Gc:
            return {"gc"};
        case ActionKind::Pause: {
            std::vector<std::string> c{"pause", tag, "--policy"};
            if (to != core::BackupKind::None) c.insert(c.end(), {"--to", core::backupName(to)});
            if (!anyTime) c.push_back("--park");
            return c;
        }
        case ActionKind::Resume:
            return {"resume", tag, "--policy"};
        case ActionKind::Spill:
            return {"spill"};
        case ActionKind::Yield: {
            std::vector<std::string> c{"yield"};
            if (to != core::BackupKind::None) c.insert(c.end(), {"--to", core::backupName(to)});
            return c;
        }
        case ActionKind::Restore:
            return {"restore"};
    }
    return {"gc"};
}

bool Action::undoes(const Action& other) const {
    auto pair = [](ActionKind a, ActionKind b) {
        return (a == ActionKind::Pause && b == ActionKind::Resume) ||
               (a == ActionKind::Yield && b == ActionKind::Restore);
    };
    if (pair(kind, other.kind) || pair(other.kind, kind))
        return kind == ActionKind::Yield || kind == ActionKind::Restore || tag == other.tag;
    return false;
}

std::string Rule::text() const {
    std::string s = fmt::format("{} {} {} {}", device.text(), metricName(metric),
                                above ? "above" : "below", threshold.text());
    if (band)
        s += fmt::format(" in band {}-{}", percentText(band->first), percentText(band->second));
    return s + ": " + action.text();
}

bool Policy::anyTime(const std::string& tag) const {
    return std::find(anyTimeTags.begin(), anyTimeTags.end(), tag) != anyTimeTags.end();
}

Policy parsePolicy(const json& doc) {
    if (!doc.is_object()) refuse("the document is a JSON object");
    if (!doc.contains("rules")) {
        if (doc.empty()) refuse("no rules");
        return memlordStrategy(doc);
    }
    Policy p;
    for (const auto& [k, v] : doc.items()) {
        if (k == "interval_ms") {
            if (!v.is_number_integer() || v.get<int64_t>() < 10 || v.get<int64_t>() > 60000)
                refuse("interval_ms: milliseconds from 10 to 60000");
            p.intervalMs = v.get<uint32_t>();
        } else if (k == "max_disk") {
            p.maxDiskBytes = thresholdOf(v, 0, "max_disk").bytes;
            if (!p.maxDiskBytes) refuse("max_disk: a size (\"50GiB\"), not a percent");
        } else if (k == "any_time") {
            if (!v.is_array()) refuse("any_time: a list of tags");
            for (const auto& t : v) {
                if (!t.is_string()) refuse("any_time: a list of tags");
                p.anyTimeTags.push_back(t.get<std::string>());
            }
        } else if (k == "rules") {
            if (!v.is_array() || v.empty()) refuse("rules: a list of one rule or more");
            for (const auto& r : v) p.rules.push_back(ruleOf(r, p.rules.size() + 1));
        } else {
            refuse(fmt::format("unknown key '{}'", k));
        }
    }
    for (size_t i = 0; i < p.rules.size(); ++i)
        for (size_t j = i + 1; j < p.rules.size(); ++j) checkPair(p.rules[i], p.rules[j]);
    return p;
}

json readPolicyDocument(const std::string& path) {
    // A regular file (or a shell's pipe, <(...)), never a FIFO that could block.
    std::string why;
    const std::optional<std::string> text =
        core::readRegularFile(path, kMaxPolicyBytes, &why, /*anonymousPipes=*/true);
    if (!text) throw core::Error(core::kExitBadInput, "policy: cannot read " + path + ": " + why);
    json doc = json::parse(*text, nullptr, false);
    if (doc.is_discarded())
        throw core::Error(core::kExitBadInput, "policy: " + path + " is not valid JSON");
    return doc;
}

Policy readPolicyFile(const std::string& path) { return parsePolicy(readPolicyDocument(path)); }

void checkTags(const Policy& policy, const std::vector<std::string>& knownTags) {
    const std::set<std::string> known(knownTags.begin(), knownTags.end());
    for (const Rule& r : policy.rules)
        if (!r.action.tag.empty() && !known.count(r.action.tag))
            refuseRule(r.number,
                       fmt::format("the process has no region tagged '{}'", r.action.tag));
}

json policyJson(const Policy& policy) {
    json rules = json::array();
    for (const Rule& r : policy.rules) {
        json j{{"device", r.device.text()},
               {"metric", metricName(r.metric)},
               {r.above ? "above" : "below", r.threshold.text()},
               {"do", r.action.text()},
               {"cooldown_s", r.cooldownS}};
        if (r.threshold.bytes && r.threshold.percent)
            j[r.above ? "above" : "below"] = {{"bytes", *r.threshold.bytes},
                                              {"percent", *r.threshold.percent}};
        else if (r.threshold.bytes)
            j[r.above ? "above" : "below"] = *r.threshold.bytes;
        if (r.band) j["band"] = {r.band->first, r.band->second};
        rules.push_back(std::move(j));
    }
    json out{{"interval_ms", policy.intervalMs}, {"rules", std::move(rules)}};
    if (policy.maxDiskBytes) out["max_disk"] = *policy.maxDiskBytes;
    if (!policy.anyTimeTags.empty()) out["any_time"] = policy.anyTimeTags;
    return out;
}

}  // namespace memtool::cli::policy
