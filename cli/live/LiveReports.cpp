#include "cli/live/LiveReports.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "core/Protocol.h"
#include "core/Units.h"
#include "trace/Symbolizer.h"

namespace memtool::cli {

namespace {

using nlohmann::json;

// One row of memtool._live's answer. Fields of the wrong type make the row
// unusable (skipped), never the report.
struct Row {
    std::string name, device, dtype, owner;
    std::vector<uint64_t> shape;
    uint64_t address = 0;
    uint64_t storageBytes = 0;
    uint64_t bytes = 0;  // counted here: 0 when another row owns the storage
};

std::vector<Row> parseRows(const json& visible) {
    std::vector<Row> rows;
    if (!visible.is_object() || !visible.contains("tensors") || !visible["tensors"].is_array())
        return rows;
    for (const json& t : visible["tensors"]) {
        if (!t.is_object()) continue;
        Row r;
        const auto str = [&](const char* key, std::string& into) {
            if (t.contains(key) && t[key].is_string()) into = t[key].get<std::string>();
        };
        const auto num = [&](const char* key, uint64_t& into) {
            if (t.contains(key) && t[key].is_number_unsigned()) into = t[key].get<uint64_t>();
        };
        str("name", r.name);
        str("device", r.device);
        str("dtype", r.dtype);
        str("owner", r.owner);
        num("address", r.address);
        num("storage_bytes", r.storageBytes);
        num("bytes", r.bytes);
        if (t.contains("shape") && t["shape"].is_array())
            for (const json& n : t["shape"])
                if (n.is_number_unsigned()) r.shape.push_back(n.get<uint64_t>());
        if (r.name.empty() || r.device.empty()) continue;
        rows.push_back(std::move(r));
    }
    return rows;
}

// Where a trace device's storages live in the stream: the wire device whose
// blocks are storages one by one (cpu; cuda:N.active with the torch bridge), and
// the key bits a storage's address carries there. Without the bridge, a CUDA
// device's blocks are whole segments: no storage can be matched.
struct Holder {
    uint8_t code = core::kDeviceCpu;
    uint64_t keyBits = 0;
    bool perStorage = true;
};

std::optional<Holder> holderOf(const core::Aggregator& agg, const std::string& device) {
    if (device == "cpu") return Holder{};
    if (device.rfind("cuda:", 0) != 0) return std::nullopt;
    const std::string digits = device.substr(5);
    if (digits.empty() || digits.size() > 2 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return std::nullopt;
    const int ordinal = std::stoi(digits);
    if (ordinal >= core::kMaxCudaDevices) return std::nullopt;
    const uint8_t active = core::cudaDevice(ordinal, core::DevicePool::Active);
    if (agg.devices().count(active)) return Holder{active, core::kKeyActivePool, true};
    return Holder{core::cudaDevice(ordinal), 0, false};
}

// Trace devices with anything to say: those of the visible tensors, and every
// device (not pool) the stream saw.
std::vector<std::string> devicesToReport(const core::Aggregator& agg, const std::vector<Row>& rows,
                                         const TensorsQuery& query) {
    std::set<std::string> names;
    for (const Row& r : rows) names.insert(r.device);
    for (const auto& [code, state] : agg.devices()) {
        if (core::poolKey(code)[0] != '\0' || code == core::kDevicePinnedHost) continue;
        names.insert(core::deviceName(code));
    }
    std::vector<std::string> out;
    // cpu first, then cuda:0, cuda:1, ... in ordinal order.
    for (const std::string& n : names)
        if (!query.device || *query.device == n) out.push_back(n);
    std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
        if ((a == "cpu") != (b == "cpu")) return a == "cpu";
        return a.size() != b.size() ? a.size() < b.size() : a < b;
    });
    return out;
}

uint64_t elements(const Row& r) {
    uint64_t n = 1;
    for (uint64_t d : r.shape) n *= d;
    return n;
}

class SiteNames {
public:
    SiteNames(const core::Aggregator& agg, Symbolizer& symbolizer, SiteMode mode)
        : agg_(agg), symbolizer_(symbolizer), mode_(mode) {}
    // The site text of stack `index`, and its frames as text.
    const std::pair<std::string, std::vector<std::string>>& of(uint32_t index) {
        auto [it, inserted] = cache_.try_emplace(index);
        if (inserted) {
            const std::vector<core::Frame> frames =
                stackFrames(agg_, symbolizer_, agg_.stacks()[index]);
            const auto site = siteOf(frames, mode_);
            it->second.first = site ? core::formatFrame(frames[*site]) : core::kNoStackSite;
            for (const core::Frame& f : frames) it->second.second.push_back(core::formatFrame(f));
        }
        return it->second;
    }

private:
    const core::Aggregator& agg_;
    Symbolizer& symbolizer_;
    SiteMode mode_;
    std::map<uint32_t, std::pair<std::string, std::vector<std::string>>> cache_;
};

constexpr size_t kMaxVerboseStorages = 1000;

json deviceReport(const core::Aggregator& agg, SiteNames& sites, const std::string& device,
                  const std::vector<Row>& rows, bool verbose) {
    json d{{"device", device}};
    json tensors = json::array();
    uint64_t visibleBytes = 0, visibleCount = 0, visibleElements = 0;
    for (const Row& r : rows) {
        if (r.device != device) continue;
        tensors.push_back({{"name", r.name},
                           {"shape", r.shape},
                           {"dtype", r.dtype},
                           {"bytes", r.bytes},
                           {"storage_bytes", r.storageBytes},
                           {"owner", r.owner.empty() ? json(nullptr) : json(r.owner)}});
        visibleBytes += r.bytes;
        visibleElements += elements(r);
        ++visibleCount;
    }
    d["tensors"] = std::move(tensors);
    d["visible_bytes"] = visibleBytes;
    d["visible_tensors"] = visibleCount;
    d["visible_elements"] = visibleElements;

    const std::optional<Holder> holder = holderOf(agg, device);
    static const core::Aggregator::LiveBlockMap kNone;
    const auto& live = holder ? agg.liveBlocks(holder->code) : kNone;
    uint64_t liveBytes = 0;
    for (const auto& [key, block] : live) liveBytes += block.size;
    d["live_bytes"] = liveBytes;
    if (!holder || !holder->perStorage) {
        d["exact"] = false;
        d["note"] =
            "without the torch bridge memtool sees this device's memory by segment, not by "
            "storage: what Python cannot see is not told apart";
        return d;
    }

    // Visible storages among the live blocks; the others came from elsewhere (numpy,
    // another allocator, memory given to torch from outside).
    std::set<uint64_t> matched;
    uint64_t matchedBytes = 0, outsideBytes = 0, sizeMismatches = 0;
    json outside = json::array();
    for (const Row& r : rows) {
        if (r.device != device || r.bytes == 0 || r.address == 0) continue;
        auto it = live.find(r.address | holder->keyBits);
        if (it == live.end()) {
            outside.push_back({{"name", r.name}, {"bytes", r.bytes}});
            outsideBytes += r.bytes;
            continue;
        }
        if (!matched.insert(it->first).second) continue;
        matchedBytes += it->second.size;
        sizeMismatches += it->second.size != r.storageBytes;
    }
    d["matched_bytes"] = matchedBytes;
    d["outside_allocator"] = std::move(outside);
    d["outside_allocator_bytes"] = outsideBytes;

    // What Python cannot see: every other live block, by site (or one by one).
    struct Group {
        uint64_t bytes = 0, storages = 0;
        const std::vector<std::string>* stack = nullptr;
    };
    std::map<std::string, Group> bySite;
    std::vector<std::pair<uint64_t, const core::Aggregator::LiveBlock*>> blocks;
    uint64_t invisibleBytes = 0, invisibleStorages = 0;
    for (const auto& [key, block] : live) {
        if (matched.count(key)) continue;
        invisibleBytes += block.size;
        ++invisibleStorages;
        const auto& site = sites.of(block.stack);
        Group& g = bySite[site.first];
        g.bytes += block.size;
        ++g.storages;
        g.stack = &site.second;
        if (verbose) blocks.emplace_back(key, &block);
    }
    json invisible = json::array();
    if (verbose) {
        std::sort(blocks.begin(), blocks.end(), [](const auto& a, const auto& b) {
            return a.second->size != b.second->size ? a.second->size > b.second->size
                                                    : a.first < b.first;
        });
        if (blocks.size() > kMaxVerboseStorages) blocks.resize(kMaxVerboseStorages);
        for (const auto& [key, block] : blocks) {
            const auto& site = sites.of(block->stack);
            invisible.push_back({{"site", site.first},
                                 {"bytes", block->size},
                                 {"storages", uint64_t{1}},
                                 {"address", key & ~holder->keyBits},
                                 {"stack", site.second}});
        }
    } else {
        std::vector<std::pair<std::string, Group>> groups(bySite.begin(), bySite.end());
        std::stable_sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
            return a.second.bytes > b.second.bytes;
        });
        for (const auto& [site, g] : groups)
            invisible.push_back({{"site", site}, {"bytes", g.bytes}, {"storages", g.storages}});
    }
    d["invisible"] = std::move(invisible);
    d["invisible_bytes"] = invisibleBytes;
    d["invisible_storages"] = invisibleStorages;
    // Visible storages found live + invisible = live, always; exact when each
    // visible storage is as large as the block the allocator handed out for it.
    d["exact"] = sizeMismatches == 0;
    return d;
}

}  // namespace

json tensorsReport(const core::Aggregator& agg, Symbolizer& symbolizer, const json& visible,
                   const TensorsQuery& query, SiteMode siteMode) {
    const std::vector<Row> rows = parseRows(visible);
    SiteNames sites(agg, symbolizer, siteMode);
    json devices = json::array();
    for (const std::string& device : devicesToReport(agg, rows, query))
        devices.push_back(deviceReport(agg, sites, device, rows, query.verbose));
    json out{{"time_s", static_cast<double>(agg.lastTimeNs()) / 1e9},
             {"devices", std::move(devices)}};
    if (const auto& h = agg.handshake()) {
        out["pid"] = h->pid;
        out["command"] = h->command;
        if (h->forked) out["forked"] = true;
    }
    return out;
}

json countersReport(const core::Aggregator& agg, Symbolizer& symbolizer, SiteMode siteMode,
                    bool withSites) {
    json devices = json::object();
    for (const auto& [code, d] : agg.devices()) {
        if (core::devicePool(code) != core::DevicePool::Device) continue;
        devices[core::deviceName(code)] = {{"allocated_bytes", d.allocatedBytes},
                                           {"freed_bytes", d.freedBytes},
                                           {"current_bytes", d.currentBytes},
                                           {"paused_bytes", d.pausedBytes},
                                           {"peak_bytes", d.peakBytes},
                                           {"alloc_count", d.allocCount},
                                           {"free_count", d.freeCount}};
    }
    if (!withSites) return {{"devices", std::move(devices)}};
    // Stacks that read as one site are one row.
    std::map<std::pair<std::string, std::string>, std::array<uint64_t, 3>> bySite;
    for (const core::StackState& s : agg.stacks()) {
        if (core::devicePool(s.device) != core::DevicePool::Device) continue;
        const uint64_t live = s.liveBytes + s.pausedBytes;
        auto& row = bySite[{core::deviceName(s.device), siteText(agg, symbolizer, s, siteMode)}];
        row[0] += s.allocatedBytes;
        row[1] += s.allocatedBytes - std::min(live, s.allocatedBytes);
        row[2] += live;
    }
    json sites = json::array();
    for (const auto& [key, row] : bySite)
        sites.push_back({{"device", key.first},
                         {"site", key.second},
                         {"allocated_bytes", row[0]},
                         {"freed_bytes", row[1]},
                         {"live_bytes", row[2]}});
    return {{"devices", std::move(devices)}, {"sites", std::move(sites)}};
}

}  // namespace memtool::cli
