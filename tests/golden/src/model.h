#pragma once
#include <torch/torch.h>

// 16 MiB of weights; a forward pass holds 24 MiB of activations until it returns.
class Model {
public:
    Model();
    void forward();

private:
    torch::Tensor weights_;
};
