// A LibTorch program with known CPU storages, for `memtool run` (no Python).
//
//   libtorch_sample [N]
//
// Storages, in order (uint8 elements, so elements == bytes):
//   makeActivations: 3,000,000 bytes, live until main returns
//   a slice of it:   a view, no storage
//   keepForever:       500,000 bytes, never freed (leaked at exit)
//   scratch:         1,000,000 bytes, freed before scratch returns
// Peak: 4,500,000 bytes. Then N small float tensors (64 floats = 256 bytes each),
// each freed at once, for benchmarks.
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>

__attribute__((noinline)) torch::Tensor makeActivations(int64_t bytes) {
    return torch::empty({bytes}, torch::kUInt8);
}

__attribute__((noinline)) torch::Tensor* keepForever(int64_t bytes) {
    return new torch::Tensor(torch::empty({bytes}, torch::kUInt8));
}

__attribute__((noinline)) int64_t scratch(int64_t bytes) {
    torch::Tensor t = torch::empty({bytes}, torch::kUInt8);
    t.fill_(1);
    return t[bytes - 1].item<int64_t>();  // a view and a scalar read: no storage
}

__attribute__((noinline)) double smallTensorLoop(int64_t n) {
    double acc = 0;
    for (int64_t i = 0; i < n; ++i) {
        torch::Tensor t = torch::empty({64}, torch::kFloat32);
        acc += static_cast<double>(t.numel());
    }
    return acc;
}

int main(int argc, char** argv) {
    int64_t iterations = argc > 1 ? std::atoll(argv[1]) : 0;
    torch::Tensor activations = makeActivations(3000000);
    torch::Tensor view = activations.slice(0, 0, 1000);
    torch::Tensor* leaked = keepForever(500000);
    int64_t sum = scratch(1000000);
    double loop = smallTensorLoop(iterations);
    std::printf(
        "libtorch_sample: view %lld elements, scratch last %lld, leaked %lld bytes, loop %.0f\n",
        static_cast<long long>(view.numel()), static_cast<long long>(sum),
        static_cast<long long>(leaked->numel()), loop);
    return 0;
}
