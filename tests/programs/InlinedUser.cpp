// A LibTorch program built -O2 -g whose allocating functions are inlined: the
// lines memtool must name are in code that has no frame of its own at run time.
// Two CPU storages (uint8 elements, so elements == bytes), both live until main
// returns:
//   Net::forward, inlined into main:                        3,000,000 bytes
//   Holder::Holder, inlined into std::make_shared's code:     700,000 bytes
// tests/e2e/RunLibtorchTest.cpp asserts their lines (17 in Net::forward, called
// at 29; 23 in Holder::Holder, made at 30): keep them in place.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <cstdio>
#include <memory>

struct Net {
    __attribute__((always_inline)) inline at::Tensor forward(int64_t bytes) {
        return at::empty({bytes}, at::kByte);
    }
};

struct Holder {
    __attribute__((always_inline)) explicit Holder(int64_t bytes)
        : storage(at::empty({bytes}, at::kByte)) {}
    at::Tensor storage;
};

int main() {
    Net net;
    at::Tensor activations = net.forward(3000000);
    auto holder = std::make_shared<Holder>(int64_t{700000});
    std::printf("inlined_user: %lld %lld\n", static_cast<long long>(activations.numel()),
                static_cast<long long>(holder->storage.numel()));
    return 0;
}
