#include "cli/attach/AttachSession.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cmath>
#include <iostream>

#include "cli/run/EventLoop.h"
#include "cli/run/TargetProcess.h"
#include "cli/stream/CollectorListener.h"

namespace memtool::cli {

namespace {

// The collector connects within a few ms of its start; past this it is not coming.
constexpr double kConnectWaitS = 10;
// The detach request's id: above every id the ctl server hands out.
constexpr uint64_t kDetachRequest = uint64_t{1} << 62;

void arm(int timer, double seconds) {
    itimerspec when{};
    when.it_value.tv_sec = static_cast<time_t>(seconds);
    when.it_value.tv_nsec = static_cast<long>((seconds - std::floor(seconds)) * 1e9);
    if (when.it_value.tv_sec == 0 && when.it_value.tv_nsec == 0) when.it_value.tv_nsec = 1;
    timerfd_settime(timer, 0, &when, nullptr);
}

}  // namespace

AttachSession::AttachSession(EventLoop& loop, CollectorListener& listener, TargetProcess& target,
                             InjectionPlan plan, double durationS, bool quiet)
    : loop_(loop),
      listener_(listener),
      target_(target),
      plan_(std::move(plan)),
      durationS_(durationS),
      quiet_(quiet) {
    if (pipe2(done_, O_CLOEXEC) != 0 || (timer_ = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC)) < 0)
        throw core::Error(core::kExitRunFailed, "attach: no pipe or timer for the attach");
    target_.onStopAsked([this] { stop(); });
    loop_.afterEachWait([this] { look(); });
    loop_.watch(done_[0], [this] { injected(); });
    loop_.watch(timer_, [this] {
        uint64_t expirations = 0;
        if (read(timer_, &expirations, sizeof expirations) <= 0) return;
        if (!connected_) {
            failure_ =
                core::Error(core::kExitRunFailed,
                            fmt::format("attach: the collector started in process {} did not "
                                        "connect within {:g} s",
                                        plan_.pid, kConnectWaitS));
            target_.markDone();
            return;
        }
        stop();  // --duration passed
    });
    thread_ = std::thread([this] {
        try {
            inject(plan_);
        } catch (const core::Error& e) {
            threadError_ = e;
        } catch (const std::exception& e) {
            threadError_ = core::Error(core::kExitRunFailed, std::string("attach: ") + e.what());
        }
        const char byte = 1;
        ssize_t w = write(done_[1], &byte, 1);
        (void)w;
    });
}

AttachSession::~AttachSession() {
    if (thread_.joinable()) thread_.join();
    loop_.afterEachWait(nullptr);
    loop_.unwatch(done_[0]);
    loop_.unwatch(timer_);
    target_.onStopAsked(nullptr);
    for (int fd : {done_[0], done_[1], timer_})
        if (fd >= 0) close(fd);
}

void AttachSession::injected() {
    char byte = 0;
    if (read(done_[0], &byte, 1) <= 0) return;
    loop_.unwatch(done_[0]);
    thread_.join();
    if (threadError_) {
        failure_ = threadError_;
        target_.markDone();
        return;
    }
    injectedOk_ = true;
    arm(timer_, kConnectWaitS);
}

namespace {
CollectorConnection* streamOf(const CollectorListener& listener, pid_t pid) {
    for (const auto& c : listener.connections())
        if (c->isStream() && c->aggregator().handshake()->pid == pid) return c.get();
    return nullptr;
}
}  // namespace

void AttachSession::look() {
    if (!injectedOk_ || target_.exited()) return;
    CollectorConnection* mine = streamOf(listener_, plan_.pid);
    if (!mine) return;
    if (!connected_) {
        connected_ = true;
        itimerspec off{};
        timerfd_settime(timer_, 0, &off, nullptr);
        std::cout << "attached " << plan_.pid << '\n' << std::flush;
        if (!quiet_)
            std::cerr << fmt::format("memtool: attached to process {}; {} detaches\n", plan_.pid,
                                     durationS_ > 0
                                         ? fmt::format("{:g} s from now, or Ctrl-C,", durationS_)
                                         : std::string("Ctrl-C"));
        if (stopAsked_)
            stop();
        else if (durationS_ > 0)
            arm(timer_, durationS_);
    }
    // Detached, or the program ended: its stream is over.
    if (!mine->open()) target_.markDone();
}

void AttachSession::stop() {
    if (detachSent_) {  // asked again while detaching: what has arrived is written now
        target_.markDone();
        return;
    }
    stopAsked_ = true;
    if (!connected_) {
        // Still injecting: the injection runs to its end (the process is never left
        // stopped), then look() detaches. Never injected: nothing to wait for.
        if (failure_ || !thread_.joinable()) target_.markDone();
        return;
    }
    CollectorConnection* mine = streamOf(listener_, plan_.pid);
    if (!mine || !mine->open()) return target_.markDone();
    detachSent_ = true;
    if (!quiet_) std::cerr << fmt::format("memtool: detaching from process {}\n", plan_.pid);
    if (!mine->sendRequest(kDetachRequest, {"detach"})) target_.markDone();
}

}  // namespace memtool::cli
