#include "reporters/Check.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "core/Error.h"
#include "core/Units.h"
#include "reporters/Markup.h"

namespace memtool::reporters {

namespace {

[[noreturn]] void usage(const std::string& message) {
    throw core::Error(core::kExitBadInput, message);
}

const core::ProcessTrace& launched(const core::Trace& t, const std::string& what) {
    if (t.processes.empty()) usage(what + " holds no process");
    return t.processes[0];
}

// The devices a selector names in this process. "cuda" names every cuda:N present;
// a named device that never allocated is there with zero bytes.
std::vector<std::string> devicesFor(const DeviceSelector& s, const core::ProcessTrace& p) {
    std::vector<std::string> out;
    if (s.device == "cuda") {
        for (const auto& [name, d] : p.devices)
            if (name.rfind("cuda:", 0) == 0) out.push_back(name);
    } else {
        out.push_back(s.device);
    }
    return out;
}

uint64_t measure(const core::ProcessTrace& p, const std::string& device, const std::string& pool,
                 Metric m) {
    auto it = p.devices.find(device);
    if (!pool.empty()) {
        if (it == p.devices.end() || !it->second.pools.count(pool))
            usage(fmt::format(
                "the trace has no {} figures for {} (the torch bridge was not attached)", pool,
                device));
        return metricTotal(it->second.pools.at(pool), m);
    }
    return it == p.devices.end() ? 0 : metricTotal(it->second, m);
}

}  // namespace

Metric parseMetric(const std::string& text) {
    if (text == "peak") return Metric::Peak;
    if (text == "allocated") return Metric::Allocated;
    if (text == "leaked") return Metric::Leaked;
    usage("unknown metric '" + text + "' (use peak, allocated or leaked)");
}

const char* metricName(Metric m) {
    switch (m) {
        case Metric::Peak:
            return "peak";
        case Metric::Allocated:
            return "allocated";
        case Metric::Leaked:
            return "leaked";
    }
    return "peak";
}

// std::regex recurses per character: a long argument overflowed the stack. No
// device, percentage or size is longer than this.
constexpr size_t kMaxArgumentBytes = 64;

DeviceSelector parseDeviceSelector(const std::string& text) {
    static const std::regex form(R"((cpu|pinned|cuda|cuda:\d+)(\.(active|reserved))?)");
    std::smatch m;
    if (text.size() > kMaxArgumentBytes || !std::regex_match(text, m, form) ||
        (m[1] == "cpu" && m[3].matched) || (m[1] == "pinned" && m[3].matched) ||
        (m[1] == "cuda" && m[3].matched)) {
        usage("bad device '" + text +
              "' (use cpu, pinned, cuda, cuda:N, cuda:N.active or cuda:N.reserved)");
    }
    return DeviceSelector{m[1], m[3].matched ? m[3].str() : "", text};
}

PeakLimit parsePeakLimit(const std::string& text) {
    size_t eq = text.find('=');
    if (eq == std::string::npos)
        usage("bad limit '" + text + "' (use DEVICE=SIZE, e.g. cpu=512MiB)");
    PeakLimit l;
    l.selector = parseDeviceSelector(text.substr(0, eq));
    std::string size = text.substr(eq + 1);
    auto bytes = core::parseSize(size);
    if (!bytes) usage("bad size '" + size + "' (use bytes or a unit: 123456, 512MiB, 2GB, 1.5GiB)");
    l.bytes = *bytes;
    return l;
}

Increase parseIncrease(const std::string& text) {
    Increase inc;
    inc.text = text;
    if (!text.empty() && text.back() == '%') {
        std::string num = text.substr(0, text.size() - 1);
        static const std::regex decimal(R"(\d+(\.\d+)?)");
        if (num.size() > kMaxArgumentBytes || !std::regex_match(num, decimal))
            usage("bad increase '" + text + "' (use a percentage like 5% or a size)");
        inc.percent = true;
        // strtod, not stod: a percentage past double's range is bad input, not an exception.
        inc.value = std::strtod(num.c_str(), nullptr);
        if (!std::isfinite(inc.value))
            usage("bad increase '" + text + "' (use a percentage like 5% or a size)");
        return inc;
    }
    auto bytes = core::parseSize(text);
    if (!bytes)
        usage("bad increase '" + text + "' (use a percentage like 5% or a size like 64MiB)");
    inc.value = static_cast<double>(*bytes);
    return inc;
}

std::vector<CheckResult> runChecks(const core::Trace& trace, const CheckOptions& options) {
    std::vector<CheckResult> results;
    const core::ProcessTrace& p = launched(trace, "the trace");
    const char* metric = metricName(options.metric);

    if (!p.complete) {
        CheckResult r;
        r.kind = "complete";
        r.name = "trace complete";
        r.passed = options.allowIncomplete;
        r.message = fmt::format("the trace is incomplete: {}{}", p.incompleteReason,
                                options.allowIncomplete ? " (allowed by --allow-incomplete)" : "");
        results.push_back(r);
    }

    // A run that hit out-of-memory failed, whatever its peaks say (any process's).
    for (const core::ProcessTrace& q : trace.processes) {
        if (q.oom.empty()) continue;
        const core::OomEvent& e = q.oom.front();
        CheckResult r;
        r.kind = "oom";
        r.name = "no out-of-memory";
        r.device = e.device;
        r.value = e.requestedBytes;
        r.passed = options.allowOom;
        r.message = fmt::format(
            "process {} ran out of memory on {}: {} requested at {} while {} were held{}{}", q.pid,
            e.device, core::formatBytes(e.requestedBytes),
            e.site.empty() ? core::kNoStackSite : e.site, core::formatBytes(e.liveBytes),
            q.oomCount > 1 ? fmt::format(" ({} out-of-memory events)", q.oomCount) : "",
            options.allowOom ? " (allowed by --allow-oom)" : "");
        results.push_back(r);
    }

    // Asked for nothing else, check says that these two held.
    if (options.limits.empty() && !options.baseline) {
        bool oom = false;
        for (const core::ProcessTrace& q : trace.processes) oom |= !q.oom.empty();
        auto held = [&](const char* kind, const char* name, const char* message) {
            CheckResult r;
            r.kind = kind;
            r.name = name;
            r.passed = true;
            r.message = message;
            results.push_back(r);
        };
        if (p.complete) held("complete", "trace complete", "the trace is complete");
        if (!oom) held("oom", "no out-of-memory", "no process ran out of memory");
    }

    for (const PeakLimit& l : options.limits) {
        std::vector<std::string> devices = devicesFor(l.selector, p);
        if (devices.empty()) {  // "cuda" with no CUDA device: say so, it holds
            CheckResult r;
            r.kind = "limit";
            r.device = l.selector.text;
            r.limit = l.bytes;
            r.name =
                fmt::format("{} {} <= {}", l.selector.text, metric, core::formatBytes(l.bytes));
            r.message =
                fmt::format("{} {}: no CUDA device in the trace (0 bytes), within {} ({} bytes)",
                            l.selector.text, metric, core::formatBytes(l.bytes), l.bytes);
            results.push_back(r);
        }
        for (const std::string& device : devices) {
            std::string shown = l.selector.pool.empty() ? device : device + "." + l.selector.pool;
            CheckResult r;
            r.kind = "limit";
            r.device = shown;
            r.value = measure(p, device, l.selector.pool, options.metric);
            r.limit = l.bytes;
            r.passed = r.value <= r.limit;
            r.name = fmt::format("{} {} <= {}", shown, metric, core::formatBytes(l.bytes));
            r.message =
                r.passed ? fmt::format("{} {} {} ({} bytes) is within {} ({} bytes)", shown, metric,
                                       core::formatBytes(r.value), r.value,
                                       core::formatBytes(r.limit), r.limit)
                         : fmt::format("{} {} {} ({} bytes) exceeds {} ({} bytes) by {} ({} bytes)",
                                       shown, metric, core::formatBytes(r.value), r.value,
                                       core::formatBytes(r.limit), r.limit,
                                       core::formatBytes(r.value - r.limit), r.value - r.limit);
            results.push_back(r);
        }
    }

    if (options.baseline && options.maxIncrease) {
        const core::ProcessTrace& base = launched(*options.baseline, options.baselinePath);
        // Every device of either trace, and each caching-allocator pool that both have.
        std::map<std::string, std::pair<std::string, std::string>>
            devices;  // shown -> (device, pool)
        for (const auto* trace : {&base, &p})
            for (const auto& [name, d] : trace->devices) devices[name] = {name, ""};
        for (const auto& [name, d] : p.devices) {
            auto b = base.devices.find(name);
            for (const auto& [pool, totals] : d.pools)
                if (b != base.devices.end() && b->second.pools.count(pool))
                    devices[name + "." + pool] = {name, pool};
        }
        for (const auto& [device, which] : devices) {
            uint64_t was = measure(base, which.first, which.second, options.metric);
            uint64_t now = measure(p, which.first, which.second, options.metric);
            const Increase& inc = *options.maxIncrease;
            // Allowed growth in whole bytes, rounded down: 0% allows none at all.
            long double grow = std::floor(
                inc.percent ? static_cast<long double>(was) * inc.value / 100.0L : inc.value);
            // A growth past 64 bits allows everything.
            uint64_t allowed = grow >= static_cast<long double>(UINT64_MAX - was)
                                   ? UINT64_MAX
                                   : was + static_cast<uint64_t>(grow);
            CheckResult r;
            r.kind = "baseline";
            r.device = device;
            r.value = now;
            r.limit = allowed;
            r.passed = now <= allowed;
            r.name = fmt::format("{} {} grows at most {} over baseline", device, metric, inc.text);
            double pct = was ? 100.0 * (static_cast<double>(now) - static_cast<double>(was)) /
                                   static_cast<double>(was)
                             : (now ? INFINITY : 0.0);
            std::string change = fmt::format(
                "{} ({:+.2f}%)", core::formatBytesDelta(static_cast<int64_t>(now - was)), pct);
            r.message =
                r.passed
                    ? fmt::format("{} {} {} ({} bytes), baseline {} ({} bytes): {} within +{}",
                                  device, metric, core::formatBytes(now), now,
                                  core::formatBytes(was), was, change, inc.text)
                    : fmt::format(
                          "{} {} {} ({} bytes), baseline {} ({} bytes): {} exceeds the allowed "
                          "{} ({} bytes) by {} ({} bytes)",
                          device, metric, core::formatBytes(now), now, core::formatBytes(was), was,
                          change, core::formatBytes(allowed), allowed,
                          core::formatBytes(now - allowed), now - allowed);
            results.push_back(r);
        }
    }
    return results;
}

void renderCheckText(const std::vector<CheckResult>& results, std::ostream& out) {
    size_t failed = 0;
    for (const auto& r : results) {
        failed += !r.passed;
        out << (r.passed ? "PASS  " : "FAIL  ") << r.message << '\n';
    }
    out << fmt::format("memtool check: {} check{}, {} failed\n", results.size(),
                       results.size() == 1 ? "" : "s", failed);
}

void renderCheckJson(const std::vector<CheckResult>& results, std::ostream& out) {
    nlohmann::json checks = nlohmann::json::array();
    bool passed = true;
    for (const auto& r : results) {
        passed &= r.passed;
        nlohmann::json c = {
            {"name", r.name}, {"kind", r.kind}, {"passed", r.passed}, {"message", r.message}};
        if (r.kind == "oom") {
            if (!r.device.empty()) {  // one happened (and may be allowed)
                c["device"] = r.device;
                c["requested_bytes"] = r.value;
            }
        } else if (r.kind != "complete") {
            c["device"] = r.device;
            c["value_bytes"] = r.value;
            c["limit_bytes"] = r.limit;
            c["excess_bytes"] = r.value > r.limit ? r.value - r.limit : 0;
        }
        checks.push_back(c);
    }
    out << nlohmann::json{{"passed", passed}, {"checks", checks}}.dump(2) << '\n';
}

void renderCheckJunit(const std::vector<CheckResult>& results, const std::string& tracePath,
                      std::ostream& out) {
    size_t failures = 0;
    for (const auto& r : results) failures += !r.passed;
    out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    out << fmt::format("<testsuites name=\"memtool check\" tests=\"{}\" failures=\"{}\">\n",
                       results.size(), failures);
    out << fmt::format(
        "  <testsuite name=\"memtool check {}\" tests=\"{}\" failures=\"{}\" errors=\"0\">\n",
        escapeMarkup(tracePath), results.size(), failures);
    for (const auto& r : results) {
        out << fmt::format("    <testcase classname=\"memtool.check\" name=\"{}\"",
                           escapeMarkup(r.name));
        if (r.passed) {
            out << fmt::format(">\n      <system-out>{}</system-out>\n    </testcase>\n",
                               escapeMarkup(r.message));
        } else {
            out << fmt::format(
                ">\n      <failure message=\"{}\" type=\"{}\">{}</failure>\n    </testcase>\n",
                escapeMarkup(r.message), r.kind, escapeMarkup(r.message));
        }
    }
    out << "  </testsuite>\n</testsuites>\n";
}

}  // namespace memtool::reporters
