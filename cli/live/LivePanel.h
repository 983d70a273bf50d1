#pragma once
// What `memtool run --live` shows, as text: a snapshot of the streams folded so
// far, laid out in at most `width` columns and `height` lines. No terminal here
// (cli/live/LiveView draws the lines), so the layout is tested on its own.

#include <cstdint>
#include <string>
#include <vector>

#include "core/Timeline.h"

namespace memtool::cli {

struct LiveSnapshot {
    double elapsedS = 0;  // since the program started
    std::string command;  // the launched program's
    struct Device {
        std::string name;  // "cpu", "cuda:0"; "pid 42 cpu" when several processes stream
        uint64_t currentBytes = 0;
        uint64_t peakBytes = 0;
        std::vector<uint64_t> history;  // the sparkline's columns, oldest first
    };
    std::vector<Device> devices;
    struct Site {
        std::string device;
        std::string text;    // "step (train.py:7)"
        uint64_t bytes = 0;  // held now (resident)
    };
    std::vector<Site> sites;  // largest first
    struct Region {
        std::string tag, device;
        std::string state;  // "resident", "paused", "partly paused"
        uint64_t bytes = 0;
        uint64_t pausedBytes = 0;
    };
    std::vector<Region> regions;
    // memtool run's polling and policy (cli/policy/PolicyRunner::liveLines): the
    // devices as polled, the last action; shown under the devices.
    std::vector<std::string> polled;
};

// The run from 0 to `nowNs` (on the samples' clock; at least past the last sample)
// in `columns` columns: each the most held in its stretch of time, a column without
// samples holding the bytes before it.
std::vector<uint64_t> historyColumns(const std::vector<core::TimelineSample>& samples,
                                     size_t columns, uint64_t nowNs);

// ▁▂▃▄▅▆▇█ for each column against `top`, in eighths rounded up (' ' for nothing
// held); `utf8` false: ".:-=+*#@" for terminals that cannot show the blocks.
std::string sparkline(const std::vector<uint64_t>& columns, uint64_t top, bool utf8);

// The panel, `height` lines (padded with empty ones), each at most `width`
// columns: a title, the devices, the top sites now, the regions; sites give way
// first when lines run short.
std::vector<std::string> renderLivePanel(const LiveSnapshot& s, size_t width, size_t height,
                                         bool utf8);

}  // namespace memtool::cli
