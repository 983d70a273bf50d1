// The program behind traces/cuda.json (a fixture written by hand: its
// line rows point here). LibTorch with CUDA, run with the torch bridge attached.
#include <torch/torch.h>

#include "model.h"

int main() {
    torch::NoGradGuard noGrad;
    // 4 MiB of input on the host, dropped before the model is built.
    {
        torch::Tensor input = torch::empty({4 << 20}, torch::kUInt8);
    }
    Model model;
    for (int step = 0; step < 2; ++step) model.forward();
    return 0;
}
