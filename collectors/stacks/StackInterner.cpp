#include "collectors/stacks/StackInterner.h"

#include <atomic>
#include <cstring>

#include "core/Protocol.h"

namespace memtool::collectors {

namespace {
// The last generation any interner of this process took: generations are unique
// across interners, because threads' caches outlive them (a test's engines, one
// after another on one thread, each start at the same count otherwise).
std::atomic<uint64_t> gLastGeneration{1};
}  // namespace

void StackInterner::reset() {
    native_.clear();
    python_.clear();
    generation_ = gLastGeneration.fetch_add(1, std::memory_order_relaxed) + 1;
}

uint32_t StackInterner::native(ThreadState& ts, const uint64_t* ips, int count, uint64_t walkSerial,
                               RecordWriter& out) {
    if (ts.nativeGeneration != generation_) {
        ts.nativeGeneration = generation_;
        ts.nativeDepth = 0;
        ts.nativeWalkSerial = 0;
    }
    const int depth = ts.nativeDepth;
    // The thread's last stack again (a loop allocating at one place): its node.
    // Frames a replayed walk left where the last stack interned lay are those.
    if (count == depth && count > 0 &&
        ((walkSerial != 0 && walkSerial == ts.nativeWalkSerial && ips == ts.nativeWalkIps) ||
         std::memcmp(ips, ts.nativeIps, sizeof(uint64_t) * static_cast<size_t>(count)) == 0)) {
        ts.nativeWalkSerial = walkSerial;
        ts.nativeWalkIps = ips;
        return ts.nativeNodes[count - 1];
    }
    // Both innermost first; the trie and the nodes go outermost first.
    int common = 0;
    while (common < count && common < depth &&
           ips[count - 1 - common] == ts.nativeIps[depth - 1 - common])
        ++common;
    uint32_t node = common ? ts.nativeNodes[common - 1] : 0;
    int k = common;
    for (; k < count; ++k) {
        const uint64_t ip = ips[count - 1 - k];
        bool created;
        uint32_t child = native_.findOrInsert(node, ip, &created);
        if (child == 0) break;  // out of memory: keep the outer part
        if (created) {
            uint8_t* p = out.reserve(core::kMaxFixedRecordBytes);
            if (p) out.commitDefinition(core::encodeNativeNode(p, node, ip));
        }
        node = child;
        ts.nativeNodes[k] = node;
    }
    // The outer k frames, innermost first (an empty stack may come as a null pointer).
    if (k > 0)
        std::memcpy(ts.nativeIps, ips + (count - k), sizeof(uint64_t) * static_cast<size_t>(k));
    ts.nativeDepth = k;
    // Only a whole stack interned stands for its walk.
    ts.nativeWalkSerial = k == count ? walkSerial : 0;
    ts.nativeWalkIps = ips;
    return node;
}

uint32_t StackInterner::python(ShadowStack& s, uint32_t firstStale, RecordWriter& out) {
    const uint32_t n = s.recorded();
    if (n == 0) return 0;
    uint32_t parent = firstStale > 0 ? s.frames[firstStale - 1].node : 0;
    for (uint32_t i = firstStale; i < n; ++i) {
        ShadowFrame& f = s.frames[i];
        bool created;
        const uint64_t key = (static_cast<uint64_t>(f.codeId) << 32) | f.line;
        uint32_t node = python_.findOrInsert(parent, key, &created);
        if (node == 0) return parent;  // out of memory: frames from here stay stale
        if (created) {
            uint8_t* p = out.reserve(core::kMaxFixedRecordBytes);
            if (p) out.commitDefinition(core::encodePyNode(p, parent, f.codeId, f.line));
        }
        f.node = node;
        parent = node;
    }
    return s.frames[n - 1].node;
}

}  // namespace memtool::collectors
