// A LibTorch program memtool did not start, for memtool attach: it prints
// "ready PID", waits for SIGUSR1, allocates five 1,000,000-byte tensors in
// allocateFive() (line 17), prints "allocated 5000000", waits for SIGUSR2, prints
// "done" and exits with code 3.
#include <signal.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

namespace {

__attribute__((noinline)) std::vector<torch::Tensor> allocateFive() {
    std::vector<torch::Tensor> held;
    for (int i = 0; i < 5; ++i)
        held.push_back(torch::empty({1'000'000}, torch::kUInt8));  // line 17
    return held;
}

// Blocked before any static initializer of LibTorch's may start a thread: every
// thread inherits the mask, and the signals wait for sigwait.
__attribute__((constructor(101))) void blockSignals() {
    sigset_t both;
    sigemptyset(&both);
    sigaddset(&both, SIGUSR1);
    sigaddset(&both, SIGUSR2);
    sigprocmask(SIG_BLOCK, &both, nullptr);
}

void waitFor(int sig) {
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig);
    int got = 0;
    sigwait(&only, &got);
}

}  // namespace

int main() {
    std::printf("ready %d\n", static_cast<int>(getpid()));
    std::fflush(stdout);
    waitFor(SIGUSR1);
    std::vector<torch::Tensor> held = allocateFive();
    int64_t bytes = 0;
    for (const auto& t : held) bytes += t.numel();
    std::printf("allocated %lld\n", static_cast<long long>(bytes));
    std::fflush(stdout);
    waitFor(SIGUSR2);
    std::printf("done\n");
    std::fflush(stdout);
    return 3;
}
