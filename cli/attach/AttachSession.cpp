#include "cli/attach/AttachSession.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cmath>
#include <iostream>

#include "cli/ctl/ControlServer.h"
#include "cli/run/EventLoop.h"
#include "cli/run/TargetProcess.h"
#include "cli/stream/CollectorListener.h"

namespace memtool::cli {

namespace {

// The collector connects within a few ms of its start; past this it is not coming.
constexpr double kConnectWaitS = 10;
// How long the tensors at the attach wait for the main thread's safe point.
constexpr const char* kListWait = "1";
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

namespace {
CollectorConnection* streamOf(const CollectorListener& listener, pid_t pid) {
    for (const auto& c : listener.connections())
        if (c->isStream() && c->aggregator().handshake()->pid == pid) return c.get();
    return nullptr;
}
}  // namespace

AttachSession::AttachSession(EventLoop& loop, CollectorListener& listener, ControlServer& control,
                             TargetProcess& target, InjectionPlan plan, double durationS,
                             bool quiet)
    : loop_(loop),
      listener_(listener),
      control_(control),
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

void AttachSession::look() {
    if (!injectedOk_ || target_.exited()) return;
    CollectorConnection* mine = streamOf(listener_, plan_.pid);
    if (!mine) return;
    if (!connected_) {
        connected_ = true;
        itimerspec off{};
        timerfd_settime(timer_, 0, &off, nullptr);
        listTensors();
        if (stopAsked_)
            stop();
        else if (durationS_ > 0)
            arm(timer_, durationS_);
    }
    // Detached, or the program ended: its stream is over.
    if (!mine->open()) target_.markDone();
}

// What was there is listed first, so that "attached" means it was (or could not
// be): a main thread that reaches no safe point within kListWaitS is not waited
// for longer, and the requests after it (a detach) wait no longer either.
void AttachSession::listTensors() {
    if (!control_.ask(plan_.pid, {"tensors", "--wait", kListWait}, [this](const nlohmann::json& a) {
            tensorsListed(a);
            sayAttached();
        })) {
        unlisted_ = "the process's stream closed at once";
        sayAttached();
    }
}

void AttachSession::sayAttached() {
    std::cout << "attached " << plan_.pid << '\n' << std::flush;
    if (!quiet_)
        std::cerr << fmt::format("memtool: attached to process {}; {} detaches\n", plan_.pid,
                                 durationS_ > 0
                                     ? fmt::format("{:g} s from now, or Ctrl-C,", durationS_)
                                     : std::string("Ctrl-C"));
}

// The answer is the target's data: read field by field; anything unexpected
// leaves the storages unlisted, with what came instead.
void AttachSession::tensorsListed(const nlohmann::json& answer) {
    const std::string status = answer.is_object() ? answer.value("status", "") : "";
    const nlohmann::json* body =
        answer.is_object() && answer.contains("body") ? &answer["body"] : nullptr;
    if (status != "ok" || !body || !body->is_object()) {
        const bool said =
            body && body->is_object() && body->contains("error") && (*body)["error"].is_string();
        unlisted_ = said ? (*body)["error"].get<std::string>()
                    : status == "gone"
                        ? "the stream ended before the main thread ran Python (no safe point "
                          "while attached)"
                        : "the answer was " + status;
        return;
    }
    std::vector<core::StorageAtAttach> found;
    for (const nlohmann::json& d : body->value("devices", nlohmann::json::array())) {
        if (!d.is_object() || !d.contains("outside_allocator") ||
            !d["outside_allocator"].is_array())
            continue;
        const std::string device = d.contains("device") && d["device"].is_string()
                                       ? d["device"].get<std::string>()
                                       : std::string();
        for (const nlohmann::json& t : d["outside_allocator"])
            if (t.is_object() && t.contains("name") && t["name"].is_string() &&
                t.contains("bytes") && t["bytes"].is_number_unsigned())
                found.push_back({device, t["name"].get<std::string>(), t["bytes"].get<uint64_t>()});
    }
    uint64_t bytes = 0;
    for (const auto& s : found) bytes += s.bytes;
    control_.setBeforeAttach(bytes);
    before_ = std::move(found);
    // When, on the stream's clock (seconds after tracking began, as the trace's times).
    const CollectorConnection* mine = streamOf(listener_, plan_.pid);
    beforeTimeS_ = mine ? mine->connectedS() : 0.0;
}

void AttachSession::describeBefore(core::ProcessTrace& p) const {
    p.liveAtAttach = before_;
    p.liveAtAttachTimeS = beforeTimeS_;
    if (!beforeTimeS_) p.liveAtAttachUnlisted = unlisted_;
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
