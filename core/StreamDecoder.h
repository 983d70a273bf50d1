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
    virtual void onNote(const NoteRecord&) = 0;
    virtual void onRegion(const RegionRecord&) = 0;
    virtual void onControl(const ControlRecord&) = 0;
    virtual void onReply(const ReplyRecord&) = 0;
    virtual void onOom(const OomRecord&) {}
    virtual void onEnd(const EndFields&) = 0;
};

// Thrown on bytes that can never become a valid stream (bad magic, version,
// unknown tag, a record after End).
class ProtocolError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class StreamDecoder {
public:
    explicit StreamDecoder(RecordSink& sink) : sink_(sink) {}

    void feed(const uint8_t* data, size_t len);

    // Bytes received that do not yet form a whole record.
    size_t pendingBytes() const { return pending_.size() - consumed_; }
    bool sawEnd() const { return sawEnd_; }
    uint64_t recordCount() const { return records_; }

private:
    // Returns bytes used, or 0 when the record is not complete yet.
    size_t decodeOne(const uint8_t* p, const uint8_t* end);

    RecordSink& sink_;
    std::vector<uint8_t> pending_;
    size_t consumed_ = 0;
    bool sawPreamble_ = false;
    bool sawEnd_ = false;
    uint64_t records_ = 0;
    uint64_t nextNativeId_ = 1;
    uint64_t nextPyNodeId_ = 1;
    uint64_t nextPyCodeId_ = 1;
    uint64_t clockNs_ = 0;
    std::set<uint64_t> regions_;  // ids declared so far
};

}  // namespace memtool::core
