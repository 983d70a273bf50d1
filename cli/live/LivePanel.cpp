#include "cli/live/LivePanel.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/Units.h"

namespace memtool::cli {

namespace {

// Columns a line takes on screen: UTF-8 continuation bytes take none (every
// character here is one column wide).
size_t displayWidth(const std::string& s) {
    return static_cast<size_t>(
        std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// Cut to `width` columns, never inside a UTF-8 sequence.
std::string fit(const std::string& s, size_t width) {
    size_t columns = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        if ((s[i] & 0xC0) == 0x80) continue;
        if (columns++ == width) return s.substr(0, i);
    }
    return s;
}

std::string title(const LiveSnapshot& s, size_t width, bool utf8) {
    const std::string rule = utf8 ? "\u2500" : "-";
    const std::string left = fmt::format("{0}{0} memtool live {1} {2:.0f} s {1} {3} ", rule,
                                         utf8 ? "\u00b7" : "-", s.elapsedS, s.command);
    const std::string right = " q: leave the view " + rule + rule;
    std::string line = fit(left, width > displayWidth(right) ? width - displayWidth(right) : 0);
    for (size_t w = displayWidth(line) + displayWidth(right); w < width; ++w) line += rule;
    return fit(line + right, width);
}

}  // namespace

std::vector<uint64_t> historyColumns(const std::vector<core::TimelineSample>& samples,
                                     size_t columns, uint64_t nowNs) {
    std::vector<uint64_t> out(columns, 0);
    if (samples.empty() || columns == 0) return out;
    const double end = static_cast<double>(std::max(nowNs, samples.back().timeNs + 1));
    auto column = [&](const core::TimelineSample& s) {
        return std::min(columns - 1,
                        static_cast<size_t>(static_cast<double>(s.timeNs) / end * columns));
    };
    uint64_t entering = 0;  // held when the column's stretch begins: nothing before the first
    size_t i = 0;
    for (size_t c = 0; c < columns; ++c) {
        uint64_t most = entering;
        for (; i < samples.size() && column(samples[i]) == c; ++i) {
            most = std::max(most, samples[i].bytes);
            entering = samples[i].bytes;
        }
        out[c] = most;
    }
    return out;
}

std::string sparkline(const std::vector<uint64_t>& columns, uint64_t top, bool utf8) {
    static const char* const blocks[] = {"\u2581", "\u2582", "\u2583", "\u2584",
                                         "\u2585", "\u2586", "\u2587", "\u2588"};
    static const char ascii[] = ".:-=+*#@";
    std::string out;
    for (uint64_t v : columns) {
        if (v == 0 || top == 0) {
            out += ' ';
            continue;
        }
        // Eighths of `top`, rounded up: anything held shows at least the lowest block.
        const double eighths = std::ceil(8.0 * static_cast<double>(v) / static_cast<double>(top));
        const size_t level = std::min<size_t>(7, static_cast<size_t>(eighths) - 1);
        out += utf8 ? std::string(blocks[level]) : std::string(1, ascii[level]);
    }
    return out;
}

std::vector<std::string> renderLivePanel(const LiveSnapshot& s, size_t width, size_t height,
                                         bool utf8) {
    std::vector<std::string> devices, sites, regions;
    // Each column as wide as its longest name: with several processes a device
    // reads "pid 4242 shared", which shifted its row's columns against the others.
    size_t deviceWidth = 12, siteDeviceWidth = 8, regionDeviceWidth = 8;
    for (const auto& d : s.devices) deviceWidth = std::max(deviceWidth, d.name.size());
    for (const auto& site : s.sites)
        siteDeviceWidth = std::max(siteDeviceWidth, site.device.size());
    for (const auto& r : s.regions)
        regionDeviceWidth = std::max(regionDeviceWidth, r.device.size());
    for (const auto& d : s.devices)
        devices.push_back(fmt::format("  {:<{}} now {:>12}  peak {:>12}  {}", d.name, deviceWidth,
                                      core::formatBytes(d.currentBytes),
                                      core::formatBytes(d.peakBytes),
                                      sparkline(d.history, d.peakBytes, utf8)));
    if (s.devices.empty()) devices.push_back("  waiting for the program's first allocation");
    for (const auto& site : s.sites)
        sites.push_back(fmt::format("  {:>12}  {:<{}} {}", core::formatBytes(site.bytes),
                                    site.device, siteDeviceWidth, site.text));
    for (const auto& r : s.regions)
        regions.push_back(fmt::format("  {:<16} {:<{}} {:<14} {:>12}  ({} paused)", r.tag, r.device,
                                      regionDeviceWidth, r.state, core::formatBytes(r.bytes),
                                      core::formatBytes(r.pausedBytes)));

    std::vector<std::string> lines{title(s, width, utf8)};
    auto room = [&] { return height > lines.size() ? height - lines.size() : 0; };
    for (const auto& d : devices)
        if (room() > 0) lines.push_back(d);
    for (const auto& p : s.polled)
        if (room() > 0) lines.push_back(" " + p);
    // Regions before sites: their few lines say what a pause left; sites take the rest.
    const size_t regionLines = regions.empty() ? 0 : std::min(regions.size() + 1, room());
    if (!sites.empty() && room() > regionLines + 1) {
        lines.push_back(" held now, by site");
        const size_t shown = std::min(sites.size(), room() - regionLines);
        lines.insert(lines.end(), sites.begin(), sites.begin() + static_cast<long>(shown));
    }
    if (regionLines > 0) {
        lines.push_back(" regions");
        lines.insert(lines.end(), regions.begin(),
                     regions.begin() + static_cast<long>(regionLines - 1));
    }
    for (auto& l : lines) l = fit(l, width);
    lines.resize(height);
    return lines;
}

}  // namespace memtool::cli
