// loadEventLog (EventLogFile.h): the log's file read back, as input from someone
// else: every count is checked against the bytes before memory is taken for it,
// and the decompressed bytes never exceed what the counts allow.

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/CtlArgs.h"
#include "core/Error.h"
#include "core/Files.h"
#include "core/Units.h"
#include "trace/EventLogFile.h"
#include "trace/TraceReader.h"

namespace memtool::reporters {

namespace {

using json = nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = uint64_t{256} << 20;
constexpr uint64_t kMinEventBytes = 3;  // tag, time delta, address delta

class BadLog : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

uint64_t maxEvents() {
    const char* env = std::getenv("MEMTOOL_MAX_EVENTS");
    if (!env || !*env) return kDefaultMaxEvents;
    char* end = nullptr;
    const unsigned long long n = std::strtoull(env, &end, 10);
    if (!core::isDecimalText(env) || *end != '\0' || n == 0)
        throw core::Error(core::kExitBadInput, std::string("MEMTOOL_MAX_EVENTS='") + env +
                                                   "' is not a number of events");
    return n;
}

// The file's bytes, mapped, decompressed on demand.
class Inflater {
public:
    Inflater(const void* data, size_t size) : ctx_(ZSTD_createDCtx()), in_{data, size, 0} {
        if (!ctx_) throw BadLog("zstd could not start");
    }
    ~Inflater() { ZSTD_freeDCtx(ctx_); }
    Inflater(const Inflater&) = delete;
    Inflater& operator=(const Inflater&) = delete;

    // The bytes up to the first newline (not included), at most `max` of them.
    std::string line(uint64_t max) {
        std::string text;
        for (;;) {
            for (; at_ < buf_.size(); ++at_) {
                if (buf_[at_] == '\n') {
                    ++at_;
                    return text;
                }
                if (text.size() == max) throw BadLog("its header is longer than allowed");
                text.push_back(static_cast<char>(buf_[at_]));
            }
            if (!fill()) throw BadLog("it ends inside its header");
        }
    }
    // Exactly `n` bytes.
    std::vector<uint8_t> take(uint64_t n) {
        std::vector<uint8_t> out;
        out.reserve(n);
        while (out.size() < n) {
            if (at_ == buf_.size() && !fill()) throw BadLog("it ends before its events do");
            const size_t k = std::min<uint64_t>(n - out.size(), buf_.size() - at_);
            out.insert(out.end(), buf_.begin() + static_cast<long>(at_),
                       buf_.begin() + static_cast<long>(at_ + k));
            at_ += k;
        }
        return out;
    }
    bool atEnd() { return at_ == buf_.size() && !fill(); }

private:
    // Decompresses more; false at the end of the input (an unfinished frame is bad).
    bool fill() {
        buf_.resize(ZSTD_DStreamOutSize());
        at_ = 0;
        for (;;) {
            ZSTD_outBuffer out{buf_.data(), buf_.size(), 0};
            if (in_.pos == in_.size) {
                if (!frameDone_) throw BadLog("its last zstd frame is cut short");
                buf_.clear();
                return false;
            }
            const size_t r = ZSTD_decompressStream(ctx_, &out, &in_);
            if (ZSTD_isError(r)) throw BadLog(std::string("zstd: ") + ZSTD_getErrorName(r));
            frameDone_ = r == 0;
            if (out.pos > 0) {
                buf_.resize(out.pos);
                return true;
            }
        }
    }

    ZSTD_DCtx* ctx_;
    ZSTD_inBuffer in_;
    std::vector<uint8_t> buf_;
    size_t at_ = 0;
    bool frameDone_ = true;
};

uint64_t count(const json& j, const char* key) {
    const json& v = j.at(key);
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
        throw BadLog(std::string("\"") + key + "\" is not a count");
    return v.get<uint64_t>();
}

// A process's entry without its events; `events`, `endBlocks`, `bytes`: what follows it.
core::ProcessEvents processFromJson(const json& j, uint64_t* events, uint64_t* endBlocks,
                                    uint64_t* bytes) {
    core::ProcessEvents p;
    p.pid = j.at("pid").get<int64_t>();
    if (j.contains("start_unix_s")) p.startUnixS = j.at("start_unix_s").get<double>();
    p.mode = j.at("mode").get<std::string>();
    if (p.mode != core::kEventsAll && p.mode != core::kEventsLast)
        throw BadLog("unknown mode '" + p.mode.substr(0, 20) + "'");
    p.limit = count(j, "limit");
    p.seen = count(j, "seen");
    p.folded = count(j, "folded");
    p.gapAt = count(j, "gap_at");
    *events = count(j, "events");
    *endBlocks = count(j, "end_blocks");
    *bytes = count(j, "event_bytes");
    for (const json& f : j.at("frames")) p.frames.push_back(readFrame(f));
    p.stacks.clear();
    for (const json& s : j.at("stacks")) {
        std::vector<uint32_t> ids;
        for (const json& id : s) {
            const uint64_t frame = id.get<uint64_t>();
            if (frame >= p.frames.size()) throw BadLog("a stack names a frame it does not have");
            ids.push_back(static_cast<uint32_t>(frame));
        }
        p.stacks.push_back(std::move(ids));
    }
    if (p.stacks.empty() || !p.stacks[0].empty()) throw BadLog("its stack 0 is not the empty one");
    return p;
}

// The process's events and end blocks from its bytes, which they must use exactly.
void decodeEvents(core::ProcessEvents& p, const std::vector<uint8_t>& bytes, uint64_t events,
                  uint64_t endBlocks) {
    core::EventDecoder decoder;
    const uint8_t* at = bytes.data();
    const uint8_t* end = at + bytes.size();
    p.events.reserve(events);
    for (uint64_t i = 0; i < events + endBlocks; ++i) {
        core::Event e;
        at = decoder.decode(at, end, p.stacks.size(), e);
        if (!at) throw BadLog("an event of pid " + std::to_string(p.pid) + " does not parse");
        if (i < events) {
            p.events.push_back(e);
        } else {
            if (e.kind != core::EventKind::Alloc) throw BadLog("an end block is not an allocation");
            p.endBlocks.push_back({e.address, e.size, e.stack, e.device});
        }
    }
    if (at != end) throw BadLog("pid " + std::to_string(p.pid) + "'s events end early");
    if (p.gapAt > p.events.size()) throw BadLog("its gap is past its events");
}

core::EventLog readLog(Inflater& in) {
    const json header = json::parse(in.line(kMaxHeaderBytes));
    if (header.at("schema").get<std::string>() != core::kEventsSchema)
        throw BadLog("its schema is not " + std::string(core::kEventsSchema));
    const uint64_t limit = maxEvents();
    uint64_t total = 0;
    core::EventLog log;
    for (const json& j : header.at("processes")) {
        uint64_t events = 0, endBlocks = 0, bytes = 0;
        core::ProcessEvents p = processFromJson(j, &events, &endBlocks, &bytes);
        const uint64_t all = events + endBlocks;
        if (all < events || all > limit - total)
            throw BadLog("it holds more events than MEMTOOL_MAX_EVENTS allows (" +
                         std::to_string(limit) + ")");
        total += all;
        if (bytes < all * kMinEventBytes || bytes > all * core::EventEncoder::kMaxEventBytes)
            throw BadLog("pid " + std::to_string(p.pid) + "'s byte count does not fit its events");
        decodeEvents(p, in.take(bytes), events, endBlocks);
        log.processes.push_back(std::move(p));
    }
    if (!in.atEnd()) throw BadLog("bytes follow its last process");
    return log;
}

}  // namespace

core::EventLog eventLogFromBytes(const void* data, size_t size, const std::string& origin) {
    try {
        Inflater in(data, size);
        return readLog(in);
    } catch (const core::Error&) {
        throw;
    } catch (const std::exception& e) {
        throw core::Error(core::kExitBadInput, origin + " is not an event log: " + e.what());
    }
}

core::EventLog loadEventLog(const std::string& path) {
    std::string why;
    const int fd = core::openRegularFile(path, &why);
    if (fd < 0) throw core::Error(core::kExitBadInput, "cannot open " + path + ": " + why);
    struct stat st {};
    void* map = MAP_FAILED;
    if (fstat(fd, &st) == 0 && st.st_size > 0)
        map = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        throw core::Error(core::kExitBadInput, path + " is not an event log: it is empty");
    // Unmapped however reading ends.
    const std::unique_ptr<void, std::function<void(void*)>> mapping(
        map, [size = static_cast<size_t>(st.st_size)](void* m) { munmap(m, size); });
    return eventLogFromBytes(map, static_cast<size_t>(st.st_size), path);
}

}  // namespace memtool::reporters
