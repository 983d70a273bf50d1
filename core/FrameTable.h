#pragma once
// The unique frames of one process, each stored once and named by its index:
// trace.json's per-process `frames` table, which hotspots refer to by id.

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "core/Frame.h"

namespace memtool::core {

class FrameTable {
public:
    FrameTable() = default;
    // Starts from a table as it stands (ids are positions, duplicates included).
    explicit FrameTable(std::vector<Frame> frames) : frames_(std::move(frames)) {
        for (size_t i = 0; i < frames_.size(); ++i)
            ids_.try_emplace(frames_[i], static_cast<uint32_t>(i));
    }

    // The id of `frame`, added at the end when it is new.
    uint32_t intern(const Frame& frame) {
        auto [it, inserted] = ids_.try_emplace(frame, static_cast<uint32_t>(frames_.size()));
        if (inserted) frames_.push_back(frame);
        return it->second;
    }
    const std::vector<Frame>& frames() const { return frames_; }
    std::vector<Frame> release() && { return std::move(frames_); }

private:
    std::vector<Frame> frames_;  // id -> frame
    std::map<Frame, uint32_t> ids_;
};

}  // namespace memtool::core
