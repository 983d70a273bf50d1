#pragma once
// Incremental decoder for the collector stream: feed() whatever bytes arrived;
// every complete record is passed to the sink, a partial one waits for more.

#include <cstddef>
#include <cstdint>
#include <set>
#include <stdexcept>
#include <vector>

#include "core/Records.h"

namespace memtool::core {

// How many of the ids a continuing stream takes over a reader holds.
struct IdCounts {
    uint64_t nativeNodes = 0;
    uint64_t pyCodes = 0;
    uint64_t pyNodes = 0;
};

class RecordSink {
public:
    virtual ~RecordSink() = default;
    virtual void onHandshake(const Handshake&) = 0;
    virtual void onModule(const ModuleRecord&) = 0;
    virtual void onPyCode(const PyCodeRecord&) = 0;
    virtual void onNativeNode(const NativeNodeRecord&) = 0;
    virtual void onPyNode(const PyNodeRecord&) = 0;
    virtual void onAlloc(const AllocRecord&) = 0;
    virtual void onFree(const FreeRecord&) = 0;
    // A ShortLived record: the Alloc and the Free it stands for (one record).
    virtual void onShortLived(const AllocRecord&, const FreeRecord&) = 0;
    virtual void onNote(const NoteRecord&) = 0;
    virtual void onRegion(const RegionRecord&) = 0;
    virtual void onControl(const ControlRecord&) = 0;
    virtual void onReply(const ReplyRecord&) = 0;
    virtual void onOom(const OomRecord&) {}
    // A Window record: the Allocs and Frees the collector folded into it.
    virtual void onWindow(const WindowRecord&) = 0;
    virtual void onEnd(const EndFields&) = 0;
    // Right after a handshake that continues an earlier stream: how many of its
    // node and code ids the sink took over (it may find fewer, or none).
    virtual IdCounts heldIds() const { return {}; }
};

// Thrown on bytes that can never become a valid stream (bad magic, version,
// unknown tag, a record before the handshake or after End, a limit passed).
class ProtocolError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Limits of what a reader accepts (PROTOCOL.md, "Limits"): a stream from a
// broken or hostile process cannot make the CLI hold memory without bound.
inline constexpr uint64_t kMaxStringBytes = uint64_t{1} << 24;  // 16 MiB
// One record whole: two strings at their limit and room to spare; a handshake's
// argv is bounded by the kernel's ARG_MAX (a quarter of the stack limit) first.
// An incomplete record is parsed again from its start as bytes arrive, so this
// also bounds the work one read can cause.
inline constexpr size_t kMaxRecordBytes = size_t{1} << 26;  // 64 MiB
inline constexpr uint64_t kMaxCount = uint64_t{1} << 20;    // arguments, a module's ranges
inline constexpr uint64_t kMaxRegionId = UINT32_MAX;        // the aggregator keeps 32 bits
inline constexpr uint64_t kMaxContinuedIds = UINT32_MAX;    // ids a continuation takes over
inline constexpr size_t kJoinBytes = 4096;  // the least slice a split record is joined from

class StreamDecoder {
public:
    explicit StreamDecoder(RecordSink& sink) : sink_(sink) {}

    void feed(const uint8_t* data, size_t len);

    // Bytes received that do not yet form a whole record.
    size_t pendingBytes() const { return pending_.size() - consumed_; }
    bool sawEnd() const { return sawEnd_; }
    uint64_t recordCount() const { return records_; }

private:
    // Reads a record's fields (defined in the .cpp); RoomyCursor: with no check
    // of the input's end per field.
    template <bool kRoomy>
    struct BasicCursor;
    using Cursor = BasicCursor<false>;
    using RoomyCursor = BasicCursor<true>;

    // Returns bytes used, or 0 when the record is not complete yet. `dry`: only
    // measures (and validates what needs no state), passing nothing on.
    size_t decodeOne(const uint8_t* p, const uint8_t* end, bool dry);
    // The fields after the tag, by the record's kind: false when the input ended
    // first; throws on an unknown tag.
    bool decodeFields(RecordTag tag, Cursor& c);
    // One per record kind, what follows its tag: false when the input ended
    // first. A dry cursor only reads; otherwise the fields are checked against
    // the stream so far, and the record passed on.
    bool decodeHandshake(Cursor& c);
    bool decodeModule(Cursor& c);
    bool decodeNativeNode(Cursor& c);
    bool decodePyCode(Cursor& c);
    bool decodePyNode(Cursor& c);
    bool decodeAlloc(Cursor& c, bool shortLived);  // or ShortLived
    bool decodeOom(Cursor& c);
    bool decodeWindow(Cursor& c);
    bool decodeFree(Cursor& c);
    bool decodeRegion(Cursor& c);
    bool decodeControl(Cursor& c);
    bool decodeReply(Cursor& c);
    bool decodeNote(Cursor& c);
    bool decodeEnd(Cursor& c);
    // Every whole record in [begin, end), passed on; returns the bytes they took
    // (what is left is one record, not whole yet).
    size_t decodeRecords(const uint8_t* begin, const uint8_t* end);
    // Throws when what waits for the rest of its record passed kMaxRecordBytes.
    void refuseEndless() const;
    // An Alloc, ShortLived or Free record at `p`, with at least
    // kMaxFixedRecordBytes before `end`: decoded and passed on, returning where
    // the next record starts; nullptr (nothing done) for a record of another kind.
    const uint8_t* decodeHot(const uint8_t* p, const uint8_t* end);
    // What decodeOne and decodeHot do alike once a record's fields are read.
    void passAlloc(bool shortLived, AllocRecord& a, FreeRecord& f);
    void passFree(FreeRecord& f);
    void passWindow(WindowRecord& w);

    RecordSink& sink_;
    std::vector<uint8_t> pending_;
    size_t consumed_ = 0;
    bool sawPreamble_ = false;
    bool sawHandshake_ = false;
    bool measureFirst_ = false;  // the record at the front was incomplete last time
    bool sawEnd_ = false;
    uint64_t records_ = 0;
    // Ids a continuing stream took over, and how many of them the sink holds: the
    // ones it lacks are passed on as 0 (unknown), and the stream's own ids after
    // them move down so that the sink's ids stay dense.
    struct IdSpace {
        uint64_t claimed = 0;
        uint64_t held = 0;
        uint64_t map(uint64_t id) const {
            return id <= held ? id : id <= claimed ? 0 : id - (claimed - held);
        }
    };
    IdSpace native_, pyCode_, pyNode_;
    uint64_t nextNativeId_ = 1;
    uint64_t nextPyNodeId_ = 1;
    uint64_t nextPyCodeId_ = 1;
    uint64_t clockNs_ = 0;
    std::set<uint64_t> regions_;  // ids declared so far
};

}  // namespace memtool::core
