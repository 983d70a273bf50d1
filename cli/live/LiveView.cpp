#include "cli/live/LiveView.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "cli/run/EventLoop.h"
#include "cli/stream/CollectorListener.h"
#include "trace/TraceModel.h"

namespace memtool::cli {

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kFramePeriod = std::chrono::milliseconds(1000);
constexpr size_t kSparkColumns = 24;
constexpr size_t kMaxSites = 20;

// ECMA-48 / VT100 controls. DECSC and DECRC (ESC 7, ESC 8) save and restore the
// cursor with its attributes, so a frame leaves the program's colours as they were.
constexpr const char* kSaveCursor = "\0337";
constexpr const char* kRestoreCursor = "\0338";

std::string moveTo(size_t row, size_t column) { return fmt::format("\033[{};{}H", row, column); }
std::string scrollRegion(size_t top, size_t bottom) {
    return fmt::format("\033[{};{}r", top, bottom);
}
constexpr const char* kWholeScreenScrolls = "\033[r";  // and the cursor goes home
constexpr const char* kEraseLine = "\033[2K";

// The blocks of the sparkline need a UTF-8 terminal; the locale says whether it is one.
bool utf8Terminal() {
    for (const char* name : {"LC_ALL", "LC_CTYPE", "LANG"}) {
        const char* value = std::getenv(name);
        if (!value || !*value) continue;
        std::string v(value);
        std::transform(v.begin(), v.end(), v.begin(),
                       [](unsigned char c) { return std::tolower(c); });
        return v.find("utf-8") != std::string::npos || v.find("utf8") != std::string::npos;
    }
    return false;
}

const char* regionState(uint64_t live, uint64_t paused) {
    return paused == 0 ? "resident" : paused == live ? "paused" : "partly paused";
}

}  // namespace

std::unique_ptr<LiveView> LiveView::open(std::ostream& warn, SiteMode siteMode,
                                         std::string command) {
    std::string why;
    std::unique_ptr<Terminal> terminal = Terminal::open(&why);
    if (!terminal) {
        warn << "memtool: --live: " << why << "; the program runs without the live view\n";
        return nullptr;
    }
    return std::unique_ptr<LiveView>(
        new LiveView(std::move(terminal), siteMode, std::move(command)));
}

LiveView::LiveView(std::unique_ptr<Terminal> terminal, SiteMode siteMode, std::string command)
    : terminal_(std::move(terminal)),
      siteMode_(siteMode),
      command_(std::move(command)),
      utf8_(utf8Terminal()) {}

LiveView::~LiveView() { leave(false); }

void LiveView::attach(EventLoop& loop) {
    if (!terminal_) return;
    loop_ = &loop;
    loop.watch(terminal_->keyFd(), [this] {
        bool gone = false;
        const std::string keys = terminal_->readKeys(&gone);
        if (gone || keys.find_first_of("qQ") != std::string::npos) leave(false);
    });
}

int LiveView::refresh(const CollectorListener& listener) {
    if (!terminal_) return -1;
    const Clock::time_point now = Clock::now();
    if (now >= nextFrame_) {
        draw(listener);
        nextFrame_ = now + kFramePeriod;
    }
    return static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(nextFrame_ - now).count() + 1);
}

void LiveView::finish(const CollectorListener& listener) {
    if (!terminal_) return;
    draw(listener);
    leave(true);
}

void LiveView::reserve(size_t rows, size_t columns) {
    std::string out;
    if (height_ > 0) out += std::string(kSaveCursor) + kWholeScreenScrolls + kRestoreCursor;
    rows_ = rows;
    columns_ = columns;
    // The program keeps at least half the screen.
    height_ = std::min(kHeight, rows / 2);
    if (height_ < 2) {
        height_ = 0;
        terminal_->write(out);
        return;
    }
    // Newlines scroll what is on screen up out of the panel's way (at the bottom) or
    // move down to be undone (above it); setting the region moves the cursor home,
    // so it is saved around that.
    out += std::string(height_, '\n') + kSaveCursor + scrollRegion(1, rows - height_) +
           kRestoreCursor + fmt::format("\033[{}A", height_);
    terminal_->write(out);
}

void LiveView::draw(const CollectorListener& listener) {
    size_t rows = 0, columns = 0;
    terminal_->size(&rows, &columns);
    if (rows != rows_ || columns != columns_) reserve(rows, columns);
    if (height_ == 0) return;  // too small a terminal to share
    const std::vector<std::string> lines =
        renderLivePanel(snapshot(listener), columns_, height_, utf8_);
    std::string out = kSaveCursor;
    drawnLines_ = 0;
    for (size_t i = 0; i < lines.size(); ++i) {
        if (!lines[i].empty()) drawnLines_ = i + 1;
        out += moveTo(rows_ - height_ + 1 + i, 1) + kEraseLine;
        // The title in reverse video; the cursor's restore brings back the program's attributes.
        out += i == 0 ? "\033[7m" + lines[i] + "\033[0m" : lines[i];
    }
    out += kRestoreCursor;
    terminal_->write(out);
}

void LiveView::leave(bool keepPanel) {
    if (!terminal_) return;
    if (loop_) loop_->unwatch(terminal_->keyFd());
    std::string out;
    if (height_ > 0) {
        out += std::string(kSaveCursor) + kWholeScreenScrolls + kRestoreCursor;
        if (keepPanel) {
            // Below the last frame's last line that is not blank, on a fresh line: what
            // memtool prints next (and the shell's prompt) follows it, not the blank
            // rows the panel kept below it.
            out += moveTo(rows_ - height_ + std::max<size_t>(drawnLines_, 1), 1) + "\r\n";
        } else {
            out += kSaveCursor;
            for (size_t row = rows_ - height_ + 1; row <= rows_; ++row)
                out += moveTo(row, 1) + kEraseLine;
            out += kRestoreCursor;
        }
    }
    terminal_->write(out);
    terminal_.reset();  // canonical mode and echo come back
}

LiveSnapshot LiveView::snapshot(const CollectorListener& listener) {
    LiveSnapshot s;
    s.elapsedS = std::chrono::duration<double>(Clock::now() - started_).count();
    s.command = command_;
    size_t streams = 0;
    for (const auto& c : listener.connections()) streams += c->isStream() ? 1 : 0;
    std::map<std::pair<std::string, std::string>, uint64_t> held;  // (device, site) -> bytes
    for (const auto& c : listener.connections()) {
        const core::Aggregator& agg = c->aggregator();
        if (!c->isStream()) continue;
        const std::string prefix = streams > 1 ? fmt::format("pid {} ", agg.handshake()->pid) : "";
        // The stream's clock started when the collector connected, as connectedS() did.
        const auto nowNs = static_cast<uint64_t>(c->connectedS() * 1e9);
        for (const auto& [code, d] : agg.devices())
            s.devices.push_back({prefix + core::deviceName(code), d.currentBytes, d.peakBytes,
                                 historyColumns(d.timeline.samples(), kSparkColumns, nowNs)});
        std::vector<std::string>& sites = sites_[c.get()];
        const auto& stacks = agg.stacks();
        for (size_t i = sites.size(); i < stacks.size(); ++i)
            sites.push_back(siteText(agg, c->symbolizer(), stacks[i], siteMode_));
        for (size_t i = 0; i < stacks.size(); ++i)
            if (stacks[i].liveBytes > 0)
                held[{prefix + core::deviceName(stacks[i].device), sites[i]}] +=
                    stacks[i].liveBytes;
        for (const auto& [id, r] : agg.regions())
            s.regions.push_back({r.record.tag, prefix + core::deviceName(r.record.device),
                                 regionState(r.liveBytes, r.pausedBytes), r.liveBytes,
                                 r.pausedBytes});
    }
    for (const auto& [key, bytes] : held) s.sites.push_back({key.first, key.second, bytes});
    std::stable_sort(s.sites.begin(), s.sites.end(),
                     [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
    if (s.sites.size() > kMaxSites) s.sites.resize(kMaxSites);
    if (polledLines_) s.polled = polledLines_();
    return s;
}

}  // namespace memtool::cli
