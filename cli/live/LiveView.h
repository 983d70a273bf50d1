#pragma once
// `memtool run --live`: while the program runs, a panel at the bottom of the
// terminal shows, about once a second, per device the bytes held now and at the
// peak with a sparkline of the run so far, the sites holding the most now, and the
// pausable regions with their states. `q` takes the panel away and the program runs
// on; the trace is written as usual.
//
// The panel sits below a scrolling region (DECSTBM) that keeps the rest of the
// screen for the program's own output, which is never touched: its stdout and
// stderr stay whatever they were, and keys are read from /dev/tty, never from its
// stdin (cli/live/Terminal). Each frame is one write that saves the cursor, draws the
// panel's lines and puts the cursor back where the program left it.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "cli/live/LivePanel.h"
#include "cli/live/Terminal.h"
#include "trace/TraceBuilder.h"

namespace memtool::cli {

class CollectorConnection;
class CollectorListener;
class EventLoop;

class LiveView {
public:
    // Null, with one line on `warn`, when there is no terminal to show it on (the
    // program then runs as without --live).
    static std::unique_ptr<LiveView> open(std::ostream& warn, SiteMode siteMode,
                                          std::string command);
    // Takes the panel away if it is still up (finish() leaves the last frame).
    ~LiveView();
    LiveView(const LiveView&) = delete;
    LiveView& operator=(const LiveView&) = delete;

    // `q` (or a terminal that hangs up) takes the panel away from now on.
    void attach(EventLoop& loop);
    bool showing() const { return terminal_ != nullptr; }

    // Draws a frame when one is due: milliseconds until the next (-1: not showing).
    int refresh(const CollectorListener& listener);
    // The program has ended: one last frame, left on screen above what follows.
    void finish(const CollectorListener& listener);

    // Lines the panel takes at most.
    static constexpr size_t kHeight = 12;
    // What memtool run's policy clock has to show (PolicyRunner::liveLines).
    void setPolledLines(std::function<std::vector<std::string>()> lines) {
        polledLines_ = std::move(lines);
    }

private:
    LiveView(std::unique_ptr<Terminal> terminal, SiteMode siteMode, std::string command);

    LiveSnapshot snapshot(const CollectorListener& listener);
    // Makes room for the panel below a scrolling region fitted to the terminal now.
    void reserve(size_t rows, size_t columns);
    void draw(const CollectorListener& listener);
    // Gives the terminal its whole screen back, the panel kept on it or wiped.
    void leave(bool keepPanel);

    std::unique_ptr<Terminal> terminal_;
    std::function<std::vector<std::string>()> polledLines_;
    SiteMode siteMode_;
    std::string command_;
    bool utf8_;
    std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
    std::chrono::steady_clock::time_point nextFrame_ = started_;
    size_t rows_ = 0, columns_ = 0, height_ = 0;  // the reserved geometry
    size_t drawnLines_ = 0;  // the last frame's lines, up to its last that is not blank
    // Each stream's stack sites, by stack index: a stack's site never changes.
    std::map<const CollectorConnection*, std::vector<std::string>> sites_;
    EventLoop* loop_ = nullptr;
};

}  // namespace memtool::cli
