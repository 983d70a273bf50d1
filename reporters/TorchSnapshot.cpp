#include "reporters/TorchSnapshot.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "reporters/EventViews.h"
#include "reporters/Pickler.h"

namespace memtool::reporters {

namespace {

constexpr uint64_t kSmallSegment = uint64_t{1} << 20;  // PyTorch's small pool holds blocks to 1 MiB

// Where each wire device code of the log goes in the snapshot, and in which role:
// its blocks (alloc / free) or its segments (segment_alloc / segment_free).
struct Route {
    int64_t index = -1;
    bool blocks = false, segments = false;
};

struct Layout {
    std::vector<std::string> names;  // by index
    std::map<uint8_t, Route> routes;
};

// Which codes the log has, and so where each one goes.
Layout layoutOf(const core::ProcessEvents& p) {
    std::map<uint8_t, bool> seen;
    for (const core::Event& e : p.events) seen[e.device] = true;
    for (const core::EndBlock& b : p.endBlocks) seen[b.device] = true;
    int highest = -1;
    for (const auto& [code, any] : seen) highest = std::max(highest, core::cudaOrdinal(code));
    Layout l;
    for (int n = 0; n <= highest; ++n) l.names.push_back("cuda:" + std::to_string(n));
    for (const auto& [code, any] : seen) {
        const int n = core::cudaOrdinal(code);
        Route& r = l.routes[code];
        if (n < 0) {
            r.index = static_cast<int64_t>(l.names.size());
            l.names.push_back(core::deviceName(code));
            r.blocks = true;
            continue;
        }
        r.index = n;
        const bool bridged = seen.count(core::cudaDevice(n, core::DevicePool::Active)) > 0;
        const core::DevicePool pool = core::devicePool(code);
        r.blocks =
            pool == core::DevicePool::Active || (!bridged && pool == core::DevicePool::Device);
        r.segments =
            pool == core::DevicePool::Reserved || (!bridged && pool == core::DevicePool::Device);
    }
    return l;
}

class SnapshotWriter {
public:
    explicit SnapshotWriter(const core::ProcessEvents& p) : p_(p), layout_(layoutOf(p)) {}

    std::string write() && {
        pk_.beginDict();
        pk_.text("segments");
        segments();
        pk_.text("device_traces");
        traces();
        pk_.text("allocator_settings");
        pk_.beginDict();
        pk_.endDict();
        pk_.text("memtool_devices");
        pk_.beginList();
        for (const std::string& name : layout_.names) pk_.text(name);
        pk_.endList();
        pk_.endDict();
        return std::move(pk_).finish();
    }

private:
    // A stack's frames as PyTorch's: written once, recalled after.
    void frames(uint32_t stack) {
        if (const auto it = memo_.find(stack); it != memo_.end()) return pk_.recall(it->second);
        pk_.beginList();
        for (const core::Frame& f : eventStack(p_, stack)) {
            pk_.beginDict();
            pk_.text("filename");
            pk_.text(f.file.empty() ? f.module : f.file);
            pk_.text("line");
            pk_.unsignedInteger(f.line);
            pk_.text("name");
            pk_.text(f.function.empty() ? "??" : f.function);
            pk_.endDict();
        }
        pk_.endList();
        memo_[stack] = pk_.remember();
    }

    void entry(const char* action, const core::Event& e) {
        pk_.beginDict();
        pk_.text("action");
        pk_.text(action);
        pk_.text("addr");
        pk_.unsignedInteger(e.address);
        pk_.text("size");
        pk_.unsignedInteger(e.size);
        pk_.text("stream");
        pk_.integer(0);
        pk_.text("time_us");
        pk_.integer(timeUs(e.timeNs));
        if (e.kind == core::EventKind::Oom) {
            pk_.text("device_free");
            pk_.integer(0);
        }
        pk_.text("frames");
        frames(e.stack);
        pk_.endDict();
    }

    // Unix microseconds where the process's start is known, as PyTorch's are.
    int64_t timeUs(uint64_t ns) const {
        const double start = p_.startUnixS.value_or(0);
        return static_cast<int64_t>(std::llround(start * 1e6)) + static_cast<int64_t>(ns / 1000);
    }

    void event(const core::Event& e, const Route& r) {
        if (e.kind == core::EventKind::Oom) return entry("oom", e);
        const bool alloc = e.kind == core::EventKind::Alloc;
        if (alloc && r.segments) entry("segment_alloc", e);
        if (alloc && r.blocks) entry("alloc", e);
        if (!alloc && r.blocks) {
            entry("free_requested", e);
            entry("free_completed", e);
        }
        if (!alloc && r.segments) entry("segment_free", e);
    }

    void traces() {
        pk_.beginList();
        for (size_t index = 0; index < layout_.names.size(); ++index) {
            pk_.beginList();
            for (const core::Event& e : p_.events) {
                const Route& r = layout_.routes.at(e.device);
                if (r.index == static_cast<int64_t>(index)) event(e, r);
            }
            pk_.endList();
        }
        pk_.endList();
    }

    void block(uint64_t address, uint64_t size, const char* state, uint32_t stack) {
        pk_.beginDict();
        pk_.text("address");
        pk_.unsignedInteger(address);
        pk_.text("size");
        pk_.unsignedInteger(size);
        pk_.text("requested_size");
        pk_.unsignedInteger(size);
        pk_.text("state");
        pk_.text(state);
        pk_.text("frames");
        frames(stack);
        pk_.endDict();
    }

    void segment(int64_t index, const core::EndBlock& s, const std::vector<core::EndBlock>& inside);
    void segments();

    const core::ProcessEvents& p_;
    Layout layout_;
    Pickler pk_;
    std::map<uint32_t, uint32_t> memo_;  // stack -> memo id of its frames
};

// One segment, its active blocks `inside` it (by address) and the gaps between them.
void SnapshotWriter::segment(int64_t index, const core::EndBlock& s,
                             const std::vector<core::EndBlock>& inside) {
    uint64_t active = 0;
    for (const core::EndBlock& b : inside) active += b.size;
    auto field = [&](const char* key, uint64_t v) {
        pk_.text(key);
        pk_.unsignedInteger(v);
    };
    pk_.beginDict();
    field("device", static_cast<uint64_t>(index));
    field("address", s.address);
    field("total_size", s.size);
    field("allocated_size", active);
    field("active_size", active);
    field("requested_size", active);
    field("stream", 0);
    pk_.text("segment_type");
    pk_.text(s.size <= kSmallSegment ? "small" : "large");
    pk_.text("segment_pool_id");
    pk_.integer(0);
    pk_.integer(0);
    pk_.tuple2();
    pk_.text("is_expandable");
    pk_.boolean(false);
    pk_.text("frames");
    frames(s.stack);
    pk_.text("blocks");
    pk_.beginList();
    uint64_t at = s.address;
    for (const core::EndBlock& b : inside) {
        if (b.address > at) block(at, b.address - at, "inactive", 0);
        block(b.address, b.size, "active_allocated", b.stack);
        at = b.address + b.size;
    }
    if (at < s.address + s.size) block(at, s.address + s.size - at, "inactive", 0);
    pk_.endList();
    pk_.endDict();
}

// The blocks live at the end: in the segments that hold them, or each its own.
void SnapshotWriter::segments() {
    auto byAddress = [](const core::EndBlock& a, const core::EndBlock& b) {
        return a.address < b.address;
    };
    std::map<int64_t, std::pair<std::vector<core::EndBlock>, std::vector<core::EndBlock>>> at;
    for (const core::EndBlock& b : p_.endBlocks) {
        const Route& r = layout_.routes.at(b.device);
        if (r.blocks)
            at[r.index].first.push_back(b);
        else if (r.segments)
            at[r.index].second.push_back(b);
    }
    pk_.beginList();
    for (auto& [index, lists] : at) {
        auto& [blocks, owners] = lists;
        std::sort(blocks.begin(), blocks.end(), byAddress);
        std::sort(owners.begin(), owners.end(), byAddress);
        if (owners.empty())
            for (const core::EndBlock& b : blocks) segment(index, b, {b});
        for (const core::EndBlock& s : owners) {
            std::vector<core::EndBlock> inside;
            for (const core::EndBlock& b : blocks)
                if (b.address >= s.address && b.address + b.size <= s.address + s.size)
                    inside.push_back(b);
            segment(index, s, inside);
        }
    }
    pk_.endList();
}

}  // namespace

std::string renderTorchSnapshot(const core::ProcessEvents& p) { return SnapshotWriter(p).write(); }

}  // namespace memtool::reporters
