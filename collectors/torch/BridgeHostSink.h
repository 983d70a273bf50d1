#pragma once
// The bridge side of the C surface: what the caching-allocator translator says
// goes to the collector through the host's functions.

#include "collectors/cuda/DriverCallTranslator.h"
#include "collectors/torch/TorchBridgeApi.h"

namespace memtool::collectors {

class BridgeHostSink : public AllocationSink {
public:
    explicit BridgeHostSink(const MemtoolBridgeHost& host) : host_(host) {}
    void alloc(uint8_t device, uint64_t key, uint64_t size) override {
        host_.alloc(device, key, size);
    }
    void free(uint64_t key) override { host_.free(key); }
    void oom(uint8_t device, uint64_t size, bool, uint64_t deviceFree) override {
        host_.oom(device, size, deviceFree);
    }
    void note(const char* key, const char* text) override { host_.note(key, text); }

private:
    const MemtoolBridgeHost& host_;
};

}  // namespace memtool::collectors
