#include "trace/EventLogFile.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/Error.h"
#include "core/Files.h"

namespace memtool::reporters {

namespace {

using json = nlohmann::json;

// zstd's level 3 (its default): ~0.3 bytes an event for a loop of temporaries,
// at a few ns an event of the CLI's time (bench/events_cost.py).
constexpr int kLevel = 3;
constexpr size_t kRawChunk = size_t{64} << 10;  // encoded bytes compressed at once

[[noreturn]] void fail(int code, const std::string& what) { throw core::Error(code, what); }

json frameToJson(const core::Frame& f) {
    json j = {{"kind", f.isPython() ? "python" : "native"},
              {"function", f.function},
              {"file", f.file},
              {"line", f.line},
              {"user", f.user}};
    if (!f.isPython()) j["module"] = f.module;
    if (f.isUnnamed()) j["offset"] = f.offset;
    if (f.isPython() && !f.source.empty()) j["source"] = f.source;
    return j;
}

json headerOf(const EventSection& s) {
    const core::ProcessEvents& p = s.process;
    json frames = json::array();
    for (const core::Frame& f : p.frames) frames.push_back(frameToJson(f));
    json j = {{"pid", p.pid},
              {"mode", p.mode},
              {"limit", p.limit},
              {"seen", p.seen},
              {"folded", p.folded},
              {"gap_at", p.gapAt},
              {"events", s.eventCount},
              {"end_blocks", s.events->count() - s.eventCount},
              {"event_bytes", s.events->rawBytes()},
              {"stacks", p.stacks},
              {"frames", std::move(frames)}};
    if (p.startUnixS) j["start_unix_s"] = *p.startUnixS;
    return j;
}

}  // namespace

CompressedEvents::CompressedEvents(const std::string& spillDir) : ctx_(ZSTD_createCCtx()) {
    if (!ctx_) fail(core::kExitRunFailed, "events: zstd could not start");
    ZSTD_CCtx_setParameter(ctx_, ZSTD_c_compressionLevel, kLevel);
    raw_.reserve(kRawChunk + core::EventEncoder::kMaxEventBytes);
    if (spillDir.empty()) return;
    fd_ = open(spillDir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd_ < 0)
        fail(core::kExitRunFailed,
             "events: cannot make a file in " + spillDir + ": " + std::strerror(errno));
}

CompressedEvents::~CompressedEvents() {
    if (mapped_) munmap(mapped_, fileBytes_);
    if (fd_ >= 0) close(fd_);
    ZSTD_freeCCtx(ctx_);
}

void CompressedEvents::add(const core::Event& e) {
    uint8_t* at = raw_.data() + raw_.size();
    raw_.resize(raw_.size() + core::EventEncoder::kMaxEventBytes);
    uint8_t* end = encoder_.encode(e, at);
    raw_.resize(static_cast<size_t>(end - raw_.data()));
    ++count_;
    if (raw_.size() >= kRawChunk) flush(ZSTD_e_continue);
}

void CompressedEvents::writeOut(const uint8_t* data, size_t len) {
    if (fd_ < 0) {
        memory_.append(reinterpret_cast<const char*>(data), len);
        return;
    }
    while (len > 0) {
        const ssize_t n = write(fd_, data, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) fail(core::kExitRunFailed, std::string("events: ") + std::strerror(errno));
        data += n;
        len -= static_cast<size_t>(n);
        fileBytes_ += static_cast<uint64_t>(n);
    }
}

void CompressedEvents::flush(ZSTD_EndDirective how) {
    rawBytes_ += raw_.size();
    ZSTD_inBuffer in{raw_.data(), raw_.size(), 0};
    out_.resize(ZSTD_CStreamOutSize());
    for (;;) {
        ZSTD_outBuffer out{out_.data(), out_.size(), 0};
        const size_t left = ZSTD_compressStream2(ctx_, &out, &in, how);
        if (ZSTD_isError(left))
            fail(core::kExitRunFailed, std::string("events: ") + ZSTD_getErrorName(left));
        writeOut(out_.data(), out.pos);
        if (how == ZSTD_e_end ? left == 0 : in.pos == in.size) break;
    }
    raw_.clear();
}

void CompressedEvents::finish() {
    if (finished_) return;
    flush(ZSTD_e_end);
    finished_ = true;
    if (fd_ < 0 || fileBytes_ == 0) return;
    mapped_ = mmap(nullptr, fileBytes_, PROT_READ, MAP_PRIVATE, fd_, 0);
    if (mapped_ == MAP_FAILED) {
        mapped_ = nullptr;
        fail(core::kExitRunFailed, std::string("events: ") + std::strerror(errno));
    }
}

std::string_view CompressedEvents::bytes() const {
    if (fd_ < 0) return memory_;
    return {static_cast<const char*>(mapped_), mapped_ ? fileBytes_ : 0};
}

void writeEventLog(const std::string& path, const std::vector<const EventSection*>& sections,
                   int exitCode) {
    json processes = json::array();
    for (const EventSection* s : sections) processes.push_back(headerOf(*s));
    const std::string header =
        json{{"schema", core::kEventsSchema}, {"processes", std::move(processes)}}.dump(
            -1, ' ', false, json::error_handler_t::replace) +
        "\n";
    std::string frame(ZSTD_compressBound(header.size()), '\0');
    const size_t n =
        ZSTD_compress(frame.data(), frame.size(), header.data(), header.size(), kLevel);
    if (ZSTD_isError(n)) fail(exitCode, std::string("events: ") + ZSTD_getErrorName(n));
    frame.resize(n);
    std::vector<std::string_view> pieces{frame};
    for (const EventSection* s : sections) pieces.push_back(s->events->bytes());
    core::replaceFile(path, pieces, exitCode);
}

std::string eventLogPath(const std::string& tracePath, const std::string& name) {
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        name.find('\0') != std::string::npos)
        fail(core::kExitBadInput,
             tracePath + ": its events file '" + name + "' is not a file name beside it");
    const size_t slash = tracePath.rfind('/');
    return slash == std::string::npos ? name : tracePath.substr(0, slash + 1) + name;
}

std::string eventLogName(const std::string& tracePath) {
    const size_t slash = tracePath.rfind('/');
    std::string base = slash == std::string::npos ? tracePath : tracePath.substr(slash + 1);
    if (base.size() > 5 && base.compare(base.size() - 5, 5, ".json") == 0)
        base.resize(base.size() - 5);
    return base + ".events.zst";
}

}  // namespace memtool::reporters
