#include "collectors/StackInterner.h"

#include "core/Protocol.h"

namespace memtool::collectors {

void StackInterner::reset() {
    native_.clear();
    python_.clear();
    ++generation_;
}

uint32_t StackInterner::native(ThreadState& ts, const uint64_t* ips, int count, RecordWriter& out) {
    if (ts.nativeGeneration != generation_) {
        ts.nativeGeneration = generation_;
        ts.nativeDepth = 0;
    }
    // ips is innermost first; the cache and the trie go outermost first.
    int common = 0;
    while (common < count && common < ts.nativeDepth &&
           ips[count - 1 - common] == ts.nativeIps[common])
        ++common;
    uint32_t node = common ? ts.nativeNodes[common - 1] : 0;
    for (int k = common; k < count; ++k) {
        const uint64_t ip = ips[count - 1 - k];
        bool created;
        uint32_t child = native_.findOrInsert(node, ip, &created);
        if (child == 0) {  // out of memory: keep the outer part
            ts.nativeDepth = k;
            return node;
        }
        if (created) {
            uint8_t* p = out.reserve(core::kMaxFixedRecordBytes);
            if (p) out.commit(core::encodeNativeNode(p, node, ip));
        }
        node = child;
        ts.nativeIps[k] = ip;
        ts.nativeNodes[k] = node;
    }
    ts.nativeDepth = count;
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
            if (p) out.commit(core::encodePyNode(p, parent, f.codeId, f.line));
        }
        f.node = node;
        parent = node;
    }
    return s.frames[n - 1].node;
}

}  // namespace memtool::collectors
