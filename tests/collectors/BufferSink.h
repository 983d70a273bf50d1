#pragma once
// A collector sink that keeps every byte written to it, for tests that read a
// stream back without a socket.

#include <cstdint>
#include <vector>

#include "collectors/engine/Sink.h"

namespace memtool::collectors {

struct BufferSink : Sink {
    std::vector<uint8_t> bytes;
    bool write(const uint8_t* data, size_t len) override {
        bytes.insert(bytes.end(), data, data + len);
        return true;
    }
    void close() override {}
    void abandon() override {}
    const char* failure() const override { return ""; }
};

}  // namespace memtool::collectors
