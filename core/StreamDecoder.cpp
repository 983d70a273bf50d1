#include "core/StreamDecoder.h"

#include <algorithm>
#include <bit>
#include <bitset>
#include <cstring>
#include <string>

namespace memtool::core {

// Reads from [p, end); `ok` turns false when the input ends first. A `dry` cursor
// only measures: strings are skipped, not copied. kRoomy: the caller made sure
// that a whole fixed record fits before `end` (kMaxFixedRecordBytes from the
// record's start), so the fields of one need no check of the input's end.
template <bool kRoomy>
struct StreamDecoder::BasicCursor {
    const uint8_t* p;
    const uint8_t* end;
    bool dry = false;
    bool ok = true;

    // Where ten bytes remain (nearly always: records are read from a buffer of
    // many), a varint of up to eight bytes (56 bits: every address, size and
    // node id) is read from one 8-byte load without a branch per byte (the load
    // keeps the bytes in stream order on a little-endian host, every one memtool
    // builds for); longer ones and the input's end take the careful path.
    [[gnu::always_inline]] uint64_t varint() {
        static_assert(std::endian::native == std::endian::little);
        if (kRoomy || static_cast<size_t>(end - p) >= kMaxVarintBytes) [[likely]] {
            if (p[0] < 0x80) return *p++;  // most fields: one byte
            uint64_t x;
            std::memcpy(&x, p, sizeof x);
            const uint64_t stops = ~x & 0x8080808080808080ULL;  // bytes that end it
            if (stops != 0) [[likely]] {
                const unsigned bytes = (static_cast<unsigned>(__builtin_ctzll(stops)) >> 3) + 1;
                x &= ~uint64_t{0} >> (64 - 8 * bytes);  // its own bytes only
                x &= 0x7f7f7f7f7f7f7f7fULL;             // their 7-bit groups, then packed:
                x = (x & 0x007f007f007f007fULL) | ((x & 0x7f007f007f007f00ULL) >> 1);
                x = (x & 0x00003fff00003fffULL) | ((x & 0x3fff00003fff0000ULL) >> 2);
                x = (x & 0x000000000fffffffULL) | ((x & 0x0fffffff00000000ULL) >> 4);
                p += bytes;
                return x;
            }
        }
        return varintCareful();
    }
    [[gnu::noinline]] uint64_t varintCareful() {
        uint64_t v = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (p >= end) {
                ok = false;
                return 0;
            }
            uint8_t b = *p++;
            // The tenth byte holds bit 63 alone.
            if (shift == 63 && (b & 0x7f) > 1) throw ProtocolError("varint past 64 bits");
            v |= static_cast<uint64_t>(b & 0x7f) << shift;
            if (!(b & 0x80)) return v;
        }
        throw ProtocolError("varint longer than 10 bytes");
    }
    uint8_t byte() {
        if (!kRoomy && p >= end) {
            ok = false;
            return 0;
        }
        return *p++;
    }
    std::string string() {
        uint64_t n = varint();
        if (!ok) return {};
        if (n > kMaxStringBytes) throw ProtocolError("string of " + std::to_string(n) + " bytes");
        if (static_cast<uint64_t>(end - p) < n) {
            ok = false;
            return {};
        }
        const char* at = reinterpret_cast<const char*>(p);
        p += n;
        return dry ? std::string() : std::string(at, n);
    }
    // A count of items that follow, each at least one byte.
    uint64_t count(const char* what) {
        const uint64_t n = varint();
        if (n > kMaxCount)
            throw ProtocolError(std::to_string(n) + " " + what + ", more than " +
                                std::to_string(kMaxCount));
        return n;
    }
};

namespace {

// The fields of the records that come by the million (Alloc, ShortLived, Free),
// read alike by both cursors; false when the input ended first.
template <typename C>
bool readAlloc(C& c, bool shortLived, AllocRecord& a, FreeRecord& f) {
    a.f.device = c.byte();
    a.f.address = c.varint();
    a.f.size = c.varint();
    a.f.nativeNode = c.varint();
    a.f.pyNode = c.varint();
    a.f.timeDeltaNs = c.varint();
    if (shortLived)
        f.f.timeDeltaNs = c.varint();
    else
        a.f.region = c.varint();
    return c.ok;
}

template <typename C>
bool readFree(C& c, FreeRecord& f) {
    f.f.device = c.byte();
    f.f.address = c.varint();
    f.f.timeDeltaNs = c.varint();
    return c.ok;
}

// A Window record's fields (PROTOCOL.md), as they are on the wire: times are
// deltas and node ids the stream's own until passWindow(); false when the input
// ended first. Lists grow as items arrive, never by a count that was claimed.
template <typename C>
bool readWindow(C& c, WindowRecord& w) {
    w.endNs = c.varint();  // the window's length, for now
    for (uint64_t i = 0, n = c.count("devices in a window"); i < n && c.ok; ++i) {
        WindowRecord::Device d;
        d.device = c.byte();
        d.allocs = c.varint();
        d.allocatedBytes = c.varint();
        d.frees = c.varint();
        d.freedBytes = c.varint();
        d.peakBytes = c.varint();
        if (d.peakBytes != 0) d.peakTimeNs = c.varint();
        for (uint64_t j = 0, m = c.count("points in a window"); j < m && c.ok; ++j) {
            const uint64_t delta = c.varint();
            const uint64_t bytes = c.varint();
            if (!c.dry) d.points.emplace_back(delta, bytes);
        }
        if (!c.dry) w.devices.push_back(std::move(d));
    }
    for (uint64_t i = 0, n = c.count("stacks in a window"); i < n && c.ok; ++i) {
        WindowRecord::Stack s;
        s.device = c.byte();
        s.nativeNode = c.varint();
        s.pyNode = c.varint();
        s.allocs = c.varint();
        s.allocatedBytes = c.varint();
        s.maxDeviceBytesAtAlloc = c.varint();
        s.liveAtPeak = c.varint();
        if (!c.dry) w.stacks.push_back(s);
    }
    for (uint64_t i = 0, n = c.count("blocks in a window"); i < n && c.ok; ++i) {
        WindowRecord::Block b;
        const uint64_t stack = c.varint();
        b.stack = static_cast<uint32_t>(std::min<uint64_t>(stack, UINT32_MAX));
        b.address = c.varint();
        b.size = c.varint();
        if (!c.dry) w.blocks.push_back(b);
    }
    for (uint64_t i = 0, n = c.count("frees in a window"); i < n && c.ok; ++i) {
        WindowRecord::OldFree f;
        f.device = c.byte();
        f.address = c.varint();
        f.beforePeak = (c.byte() & kWindowFreeBeforePeak) != 0;
        if (!c.dry) w.oldFrees.push_back(f);
    }
    return c.ok;
}

}  // namespace

static_assert(1 + 1 + 6 * kMaxVarintBytes <= kMaxFixedRecordBytes,
              "an Alloc or ShortLived record fits the room the fast path asks for");

void StreamDecoder::passAlloc(bool shortLived, AllocRecord& a, FreeRecord& f) {
    if (a.f.nativeNode >= nextNativeId_ || a.f.pyNode >= nextPyNodeId_)
        throw ProtocolError("allocation refers to an unknown stack");
    if (a.f.region != 0 && !regions_.count(a.f.region))
        throw ProtocolError("allocation refers to an unknown region");
    a.f.nativeNode = native_.map(a.f.nativeNode);
    a.f.pyNode = pyNode_.map(a.f.pyNode);
    clockNs_ += a.f.timeDeltaNs;
    a.timeNs = clockNs_;
    if (!shortLived) return sink_.onAlloc(a);
    f.f.device = a.f.device;
    f.f.address = a.f.address;
    clockNs_ += f.f.timeDeltaNs;
    f.timeNs = clockNs_;
    sink_.onShortLived(a, f);
}

void StreamDecoder::passWindow(WindowRecord& w) {
    for (WindowRecord::Stack& s : w.stacks) {
        if (s.nativeNode >= nextNativeId_ || s.pyNode >= nextPyNodeId_)
            throw ProtocolError("window refers to an unknown stack");
        s.nativeNode = native_.map(s.nativeNode);
        s.pyNode = pyNode_.map(s.pyNode);
    }
    for (const WindowRecord::Block& b : w.blocks)
        if (b.stack >= w.stacks.size()) throw ProtocolError("window block of no stack");
    // Times: the window starts where the stream's clock stands and lasts its
    // length; a device's points and peak fall inside it.
    w.startNs = clockNs_;
    clockNs_ += w.endNs;
    if (clockNs_ < w.startNs) throw ProtocolError("window past the end of the clock");
    w.endNs = clockNs_;
    // One entry per device (the collector keeps a window's figures by device): a
    // device listed twice would draw its timeline back to the window's start.
    std::bitset<256> listed;
    for (const WindowRecord::Device& d : w.devices) {
        if (listed.test(d.device)) throw ProtocolError("window lists a device twice");
        listed.set(d.device);
    }
    for (WindowRecord::Device& d : w.devices) {
        uint64_t t = w.startNs;
        // Saturating: a hostile delta cannot wrap a time back before the window.
        auto after = [&](uint64_t from, uint64_t delta) {
            return delta > w.endNs - from ? w.endNs : from + delta;
        };
        for (auto& [time, bytes] : d.points) time = t = after(t, time);
        d.peakTimeNs = after(w.startNs, d.peakTimeNs);
    }
    sink_.onWindow(w);
}

void StreamDecoder::passFree(FreeRecord& f) {
    clockNs_ += f.f.timeDeltaNs;
    f.timeNs = clockNs_;
    sink_.onFree(f);
}

const uint8_t* StreamDecoder::decodeHot(const uint8_t* start, const uint8_t* end) {
    RoomyCursor c{start + 1, end};
    switch (static_cast<RecordTag>(start[0])) {
        case RecordTag::Alloc:
        case RecordTag::ShortLived: {
            const bool shortLived = start[0] == static_cast<uint8_t>(RecordTag::ShortLived);
            AllocRecord a;
            FreeRecord f;
            readAlloc(c, shortLived, a, f);
            passAlloc(shortLived, a, f);
            break;
        }
        case RecordTag::Free: {
            FreeRecord f;
            readFree(c, f);
            passFree(f);
            break;
        }
        default:
            return nullptr;
    }
    ++records_;
    return c.p;
}

void StreamDecoder::feed(const uint8_t* data, size_t len) {
    if (!sawPreamble_) {
        const size_t take = std::min(len, kPreambleBytes - pending_.size());
        pending_.insert(pending_.end(), data, data + take);
        data += take;
        len -= take;
        if (pending_.size() < kPreambleBytes) return;
        if (std::memcmp(pending_.data(), kMagic, 8) != 0)
            throw ProtocolError("not a memtool stream (bad magic)");
        uint32_t version = 0;
        for (int i = 0; i < 4; ++i) version |= static_cast<uint32_t>(pending_[8 + i]) << (8 * i);
        if (version != kProtocolVersion) {
            throw ProtocolError("collector speaks protocol " + std::to_string(version) +
                                ", this memtool speaks " + std::to_string(kProtocolVersion));
        }
        pending_.clear();
        sawPreamble_ = true;
    }
    // A record the last read cut in two (nearly every read: the collector's
    // buffers do not end where a read does) is joined from the head of this one,
    // a slice at a time, so that the rest is not copied but decoded where it lies.
    // Each slice at least doubles what waits: a long record is measured again
    // O(log n) times, not once per slice.
    while (pendingBytes() > 0 && len > 0) {
        const size_t held = pendingBytes();
        const size_t take = std::min(len, std::max(kJoinBytes, held));
        pending_.insert(pending_.end(), data, data + take);
        data += take;
        len -= take;
        const size_t used =
            decodeRecords(pending_.data() + consumed_, pending_.data() + pending_.size());
        if (used >= held) {
            // What waited is read; what this slice has left is read in place below.
            const size_t unread = pendingBytes() - used;
            data -= unread;
            len += unread;
            pending_.clear();
            consumed_ = 0;
            break;
        }
        consumed_ += used;
        refuseEndless();
        // Compact once the consumed prefix dominates, so the buffer stays small.
        if (consumed_ > 0 && consumed_ * 2 >= pending_.size()) {
            pending_.erase(pending_.begin(), pending_.begin() + static_cast<ptrdiff_t>(consumed_));
            consumed_ = 0;
        }
    }
    if (pendingBytes() > 0) return;
    // Keep only a tail that is not a whole record yet.
    const size_t used = decodeRecords(data, data + len);
    pending_.assign(data + used, data + len);
    consumed_ = 0;
    refuseEndless();
}

size_t StreamDecoder::decodeRecords(const uint8_t* begin, const uint8_t* end) {
    const uint8_t* p = begin;
    while (p < end) {
        // The records that come by the million, while a whole one surely fits:
        // no check of the input's end per field, and nothing else to decide.
        if (sawHandshake_ && !sawEnd_ && !measureFirst_) {
            while (static_cast<size_t>(end - p) >= kMaxFixedRecordBytes)
                if (const uint8_t* next = decodeHot(p, end))
                    p = next;
                else
                    break;
            if (p == end) break;
        }
        // A record that was incomplete is measured before it is decoded again:
        // one that keeps coming costs a scan per read, not a copy of all it holds.
        if (measureFirst_ && decodeOne(p, end, /*dry=*/true) == 0) break;
        const size_t used = decodeOne(p, end, /*dry=*/false);
        measureFirst_ = used == 0;
        if (used == 0) break;
        p += used;
    }
    return static_cast<size_t>(p - begin);
}

void StreamDecoder::refuseEndless() const {
    // What is left is one record, incomplete: a record that never ends (a string
    // or a run of fields that keeps coming) must not hold memory without bound.
    if (pendingBytes() > kMaxRecordBytes)
        throw ProtocolError("a record longer than " + std::to_string(kMaxRecordBytes) + " bytes");
}

size_t StreamDecoder::decodeOne(const uint8_t* start, const uint8_t* end, bool dry) {
    if (sawEnd_) throw ProtocolError("record after end of stream");
    // A record past the limit reads as incomplete, and feed() refuses it.
    Cursor c{start, start + std::min<size_t>(static_cast<size_t>(end - start), kMaxRecordBytes),
             dry};
    auto tag = static_cast<RecordTag>(c.byte());
    if (!c.ok) return 0;
    if ((tag == RecordTag::Handshake) == sawHandshake_)
        throw ProtocolError(sawHandshake_ ? "a second handshake" : "a record before the handshake");
    if (!decodeFields(tag, c)) return 0;
    if (!dry) ++records_;
    return static_cast<size_t>(c.p - start);
}

bool StreamDecoder::decodeFields(RecordTag tag, Cursor& c) {
    // Each decodeX reads its fields, then `if (!c.ok) return false; if (c.dry)
    // return true;`, and only after that checks them against the stream so far,
    // changes any state and calls the sink: a dry run measures the record and
    // leaves no trace.
    switch (tag) {
        case RecordTag::Handshake:
            return decodeHandshake(c);
        case RecordTag::Module:
            return decodeModule(c);
        case RecordTag::NativeNode:
            return decodeNativeNode(c);
        case RecordTag::PyCode:
            return decodePyCode(c);
        case RecordTag::PyNode:
            return decodePyNode(c);
        case RecordTag::Alloc:
        case RecordTag::ShortLived:
            return decodeAlloc(c, tag == RecordTag::ShortLived);
        case RecordTag::Oom:
            return decodeOom(c);
        case RecordTag::Window:
            return decodeWindow(c);
        case RecordTag::Free:
            return decodeFree(c);
        case RecordTag::Region:
            return decodeRegion(c);
        case RecordTag::Control:
            return decodeControl(c);
        case RecordTag::Reply:
            return decodeReply(c);
        case RecordTag::Note:
            return decodeNote(c);
        case RecordTag::End:
            return decodeEnd(c);
        default:
            throw ProtocolError("unknown record tag " + std::to_string(static_cast<int>(tag)));
    }
}

bool StreamDecoder::decodeHandshake(Cursor& c) {
    Handshake h;
    h.protocolVersion = kProtocolVersion;
    h.pid = static_cast<int64_t>(c.varint());
    h.ppid = static_cast<int64_t>(c.varint());
    h.startUnixNs = c.varint();
    const uint64_t flags = c.varint();
    h.nativeStacks = flags & kHandshakeNativeStacks;
    h.pythonStacks = flags & kHandshakePythonStacks;
    h.forked = flags & kHandshakeForked;
    h.notice = flags & kHandshakeNotice;
    const uint64_t argc = c.count("arguments in a handshake");
    for (uint64_t i = 0; c.ok && i < argc; ++i) {
        std::string arg = c.string();
        if (!c.dry) h.command.push_back(std::move(arg));
    }
    const uint64_t envc = c.ok ? c.count("variables in a handshake") : 0;
    for (uint64_t i = 0; c.ok && i < envc; ++i) {
        std::string name = c.string();
        std::string value = c.string();
        if (!c.dry) h.environment.emplace_back(std::move(name), std::move(value));
    }
    StreamContinuation from;
    if (flags & kHandshakeContinues) {
        from.pid = c.varint();
        from.startUnixNs = c.varint();
        from.nativeNodes = c.varint();
        from.pyCodes = c.varint();
        from.pyNodes = c.varint();
        from.modules = c.varint();
    }
    if (!c.ok) return false;
    if (c.dry) return true;
    if (flags & ~kHandshakeKnownFlags) throw ProtocolError("unknown handshake flags");
    if (flags & kHandshakeContinues) {
        // The collector numbers its nodes and code objects in 32 bits.
        for (uint64_t n : {from.nativeNodes, from.pyCodes, from.pyNodes, from.modules})
            if (n >= kMaxContinuedIds) throw ProtocolError("a continuation past 2^32 - 1 ids");
        h.continues = from;
    }
    sawHandshake_ = true;
    sink_.onHandshake(h);
    if (h.continues) {
        // The reader may hold fewer of them than the stream takes over (the
        // stream continued broke early): those read as unknown frames.
        const IdCounts held = sink_.heldIds();
        native_ = IdSpace{from.nativeNodes, std::min(held.nativeNodes, from.nativeNodes)};
        pyCode_ = IdSpace{from.pyCodes, std::min(held.pyCodes, from.pyCodes)};
        pyNode_ = IdSpace{from.pyNodes, std::min(held.pyNodes, from.pyNodes)};
        nextNativeId_ = from.nativeNodes + 1;
        nextPyCodeId_ = from.pyCodes + 1;
        nextPyNodeId_ = from.pyNodes + 1;
    }
    return true;
}

bool StreamDecoder::decodeModule(Cursor& c) {
    ModuleRecord m;
    m.id = c.varint();
    m.path = c.string();
    m.loadBias = c.varint();
    const uint64_t n = c.count("ranges in a module");
    for (uint64_t i = 0; c.ok && i < n; ++i) {
        uint64_t s = c.varint();
        uint64_t l = c.varint();
        if (!c.dry) m.ranges.emplace_back(s, s + l);
    }
    if (!c.ok) return false;
    if (c.dry) return true;
    sink_.onModule(m);
    return true;
}

bool StreamDecoder::decodeNativeNode(Cursor& c) {
    NativeNodeRecord n;
    n.parent = c.varint();
    n.ip = c.varint();
    if (!c.ok) return false;
    if (c.dry) return true;
    n.id = nextNativeId_++;
    if (n.parent >= n.id) throw ProtocolError("native node refers to a later parent");
    n.id = native_.map(n.id);
    n.parent = native_.map(n.parent);
    sink_.onNativeNode(n);
    return true;
}

bool StreamDecoder::decodePyCode(Cursor& c) {
    PyCodeRecord r;
    r.file = c.string();
    r.name = c.string();
    r.firstLine = c.varint();
    if (!c.ok) return false;
    if (c.dry) return true;
    r.id = pyCode_.map(nextPyCodeId_++);
    sink_.onPyCode(r);
    return true;
}

bool StreamDecoder::decodePyNode(Cursor& c) {
    PyNodeRecord n;
    n.parent = c.varint();
    n.codeId = c.varint();
    n.line = c.varint();
    if (!c.ok) return false;
    if (c.dry) return true;
    n.id = nextPyNodeId_++;
    if (n.parent >= n.id) throw ProtocolError("python node refers to a later parent");
    if (n.codeId == 0 || n.codeId >= nextPyCodeId_)
        throw ProtocolError("python node refers to an unknown code object");
    n.id = pyNode_.map(n.id);
    n.parent = pyNode_.map(n.parent);
    n.codeId = pyCode_.map(n.codeId);
    sink_.onPyNode(n);
    return true;
}

bool StreamDecoder::decodeAlloc(Cursor& c, bool shortLived) {
    AllocRecord a;
    FreeRecord f;
    if (!readAlloc(c, shortLived, a, f)) return false;
    if (c.dry) return true;
    passAlloc(shortLived, a, f);
    return true;
}

bool StreamDecoder::decodeOom(Cursor& c) {
    OomRecord o;
    o.f.device = c.byte();
    o.f.size = c.varint();
    o.f.nativeNode = c.varint();
    o.f.pyNode = c.varint();
    o.f.timeDeltaNs = c.varint();
    const uint8_t source = c.byte();
    o.f.deviceFree = c.varint();
    o.f.deviceTotal = c.varint();
    if (!c.ok) return false;
    if (c.dry) return true;
    if (o.f.nativeNode >= nextNativeId_ || o.f.pyNode >= nextPyNodeId_)
        throw ProtocolError("out-of-memory record refers to an unknown stack");
    o.f.nativeNode = native_.map(o.f.nativeNode);
    o.f.pyNode = pyNode_.map(o.f.pyNode);
    if (source < static_cast<uint8_t>(OomSource::Allocator) ||
        source > static_cast<uint8_t>(OomSource::Torch))
        throw ProtocolError("unknown out-of-memory source");
    o.f.source = static_cast<OomSource>(source);
    clockNs_ += o.f.timeDeltaNs;
    o.timeNs = clockNs_;
    sink_.onOom(o);
    return true;
}

bool StreamDecoder::decodeWindow(Cursor& c) {
    WindowRecord w;
    if (!readWindow(c, w)) return false;
    if (c.dry) return true;
    passWindow(w);
    return true;
}

bool StreamDecoder::decodeFree(Cursor& c) {
    FreeRecord f;
    if (!readFree(c, f)) return false;
    if (c.dry) return true;
    passFree(f);
    return true;
}

bool StreamDecoder::decodeRegion(Cursor& c) {
    RegionRecord r;
    r.id = c.varint();
    r.tag = c.string();
    r.device = c.byte();
    const uint8_t backup = c.byte();
    if (!c.ok) return false;
    if (c.dry) return true;
    if (r.id == 0 || r.id > kMaxRegionId || regions_.count(r.id))
        throw ProtocolError("region id 0, past 2^32 - 1 or declared twice");
    if (r.tag.size() > kMaxTagBytes) throw ProtocolError("region tag longer than 63 bytes");
    if (backup > static_cast<uint8_t>(BackupKind::Disk)) throw ProtocolError("unknown backup kind");
    r.backup = static_cast<BackupKind>(backup);
    regions_.insert(r.id);
    sink_.onRegion(r);
    return true;
}

bool StreamDecoder::decodeControl(Cursor& c) {
    ControlRecord x;
    x.f.timeDeltaNs = c.varint();
    x.f.region = c.varint();
    const uint8_t action = c.byte();
    const uint8_t origin = c.byte();
    x.f.bytes = c.varint();
    const uint8_t backup = c.byte();
    x.f.durationNs = c.varint();
    x.f.ok = c.byte() != 0;
    x.message = c.string();
    if (!c.ok) return false;
    if (c.dry) return true;
    if (!regions_.count(x.f.region)) throw ProtocolError("control event for an unknown region");
    if (action < 1 || action > 4 || origin < 1 || origin > 3 || backup > 2)
        throw ProtocolError("control event with an unknown action, origin or backup");
    x.f.action = static_cast<ControlAction>(action);
    x.f.origin = static_cast<ControlOrigin>(origin);
    x.f.backup = static_cast<BackupKind>(backup);
    clockNs_ += x.f.timeDeltaNs;
    x.timeNs = clockNs_;
    sink_.onControl(x);
    return true;
}

bool StreamDecoder::decodeReply(Cursor& c) {
    ReplyRecord r;
    r.id = c.varint();
    const uint8_t status = c.byte();
    r.body = c.string();
    if (!c.ok) return false;
    if (c.dry) return true;
    if (status > static_cast<uint8_t>(ReplyStatus::Refused))
        throw ProtocolError("unknown reply status");
    r.status = static_cast<ReplyStatus>(status);
    sink_.onReply(r);
    return true;
}

bool StreamDecoder::decodeNote(Cursor& c) {
    NoteRecord n;
    n.key = c.string();
    n.text = c.string();
    if (!c.ok) return false;
    if (c.dry) return true;
    sink_.onNote(n);
    return true;
}

bool StreamDecoder::decodeEnd(Cursor& c) {
    EndFields e;
    e.allocCount = c.varint();
    e.freeCount = c.varint();
    e.allocatedBytes = c.varint();
    e.freedBytes = c.varint();
    e.recordCount = c.varint();
    e.missedEvents = c.varint();
    e.exitKind = c.varint();
    e.exitStatus = c.varint();
    if (!c.ok) return false;
    if (c.dry) return true;
    // An end before an exec is the last record unless the exec failed:
    // then the stream goes on.
    sawEnd_ = e.exitKind != static_cast<uint64_t>(ExitKind::Exec);
    sink_.onEnd(e);
    return true;
}

}  // namespace memtool::core
