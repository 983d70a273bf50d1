#include "trace/EventLog.h"

namespace memtool::core {

namespace {

constexpr uint8_t kKindMask = 0x3;
constexpr uint8_t kDeviceFollows = 1 << 2;
constexpr uint8_t kStackFollows = 1 << 3;
constexpr uint8_t kSizeFollows = 1 << 4;
constexpr uint8_t kUnusedBits = 0xe0;

uint64_t zigzag(uint64_t delta) {
    const auto s = static_cast<int64_t>(delta);
    return (static_cast<uint64_t>(s) << 1) ^ static_cast<uint64_t>(s >> 63);
}

uint64_t unzigzag(uint64_t z) { return (z >> 1) ^ (~(z & 1) + 1); }

// A varint of at most ten bytes from [p, end) into `v`; null when cut short or longer.
const uint8_t* readVarint(const uint8_t* p, const uint8_t* end, uint64_t& v) {
    v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (p == end) return nullptr;
        const uint8_t b = *p++;
        if (shift == 63 && b > 1) return nullptr;
        v |= static_cast<uint64_t>(b & 0x7f) << shift;
        if (!(b & 0x80)) return p;
    }
    return nullptr;
}

}  // namespace

const ProcessEvents* EventLog::find(int64_t pid, std::optional<double> startUnixS) const {
    for (const ProcessEvents& p : processes)
        if (p.pid == pid && p.startUnixS == startUnixS) return &p;
    return nullptr;
}

uint8_t* EventEncoder::encode(const Event& e, uint8_t* out) {
    uint8_t tag = static_cast<uint8_t>(e.kind);
    if (e.device != last_.device) tag |= kDeviceFollows;
    if (e.stack != last_.stack) tag |= kStackFollows;
    if (e.size != last_.size) tag |= kSizeFollows;
    *out++ = tag;
    if (tag & kDeviceFollows) *out++ = e.device;
    out = putVarint(out, e.timeNs - last_.timeNs);
    out = putVarint(out, zigzag(e.address - last_.address));
    if (tag & kSizeFollows) out = putVarint(out, e.size);
    if (tag & kStackFollows) out = putVarint(out, e.stack);
    last_ = e;
    return out;
}

const uint8_t* EventDecoder::decode(const uint8_t* p, const uint8_t* end, uint64_t stackCount,
                                    Event& e) {
    if (p == end) return nullptr;
    const uint8_t tag = *p++;
    if ((tag & kUnusedBits) || (tag & kKindMask) > static_cast<uint8_t>(EventKind::Oom))
        return nullptr;
    e = last_;
    e.kind = static_cast<EventKind>(tag & kKindMask);
    if (tag & kDeviceFollows) {
        if (p == end) return nullptr;
        e.device = *p++;
    }
    uint64_t delta = 0, address = 0;
    if (!(p = readVarint(p, end, delta)) || !(p = readVarint(p, end, address))) return nullptr;
    if (delta > UINT64_MAX - last_.timeNs) return nullptr;
    e.timeNs = last_.timeNs + delta;
    e.address = last_.address + unzigzag(address);
    if ((tag & kSizeFollows) && !(p = readVarint(p, end, e.size))) return nullptr;
    if (tag & kStackFollows) {
        uint64_t stack = 0;
        if (!(p = readVarint(p, end, stack)) || stack >= stackCount) return nullptr;
        e.stack = static_cast<uint32_t>(stack);
    }
    if (e.stack >= stackCount) return nullptr;
    last_ = e;
    return p;
}

}  // namespace memtool::core
