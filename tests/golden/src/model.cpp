// The model of traces/cuda.json (uint8 tensors: elements are bytes). In the
// fixture the caching allocator reserves 20 MiB for the weights and 32 MiB for the
// first pass's activations; the second pass reuses those 32 MiB.
#include "model.h"

namespace {
constexpr int64_t kMiB = 1 << 20;
const auto kOnGpu = torch::TensorOptions().dtype(torch::kUInt8).device(torch::kCUDA);
}  // namespace

Model::Model() : weights_(torch::empty({16 * kMiB}, kOnGpu)) {}

void Model::forward() {
    torch::Tensor activations = torch::empty({24 * kMiB}, kOnGpu);
}
