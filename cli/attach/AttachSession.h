#pragma once
// memtool attach's side of the run loop: the injection runs on a thread of its
// own (the loop must go on meanwhile: the collector it starts connects and waits
// to be admitted); once the process's stream is open and the tensors Python sees
// were listed (or could not be, within 1 s), "attached PID" goes to stdout, and the track lasts
// until --duration passes, memtool is asked to stop (Ctrl-C, SIGTERM), or the program ends. Memtool
// then asks the collector to detach ("detach" down the stream), and the run is done when the stream
// ends.

#include <sys/types.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/attach/Injection.h"
#include "core/Error.h"
#include "trace/TraceModel.h"

namespace memtool::cli {

class CollectorListener;
class ControlServer;
class EventLoop;
class TargetProcess;

class AttachSession {
public:
    // Starts the injection. `durationS` 0: no limit. `control` asks the collector
    // for the tensors Python sees once the stream is up.
    AttachSession(EventLoop& loop, CollectorListener& listener, ControlServer& control,
                  TargetProcess& target, InjectionPlan plan, double durationS, bool quiet);
    ~AttachSession();  // waits for the injection thread
    AttachSession(const AttachSession&) = delete;
    AttachSession& operator=(const AttachSession&) = delete;

    // After the loop: why the attach failed (thrown by the caller), if it did.
    const std::optional<core::Error>& failure() const { return failure_; }
    // What was there before: the storages Python could see that memtool never saw
    // allocated (trace.json's live_at_attach), into the attached process's trace.
    void describeBefore(core::ProcessTrace& p) const;

private:
    void injected();     // the injection thread's end, in the loop
    void look();         // after every wait: the stream came, or ended
    void stop();         // --duration, or a signal: detach
    void listTensors();  // asks for the tensors live at the attach
    void sayAttached();  // "attached PID" on stdout, once they were listed (or not)
    void tensorsListed(const nlohmann::json& answer);

    EventLoop& loop_;
    CollectorListener& listener_;
    ControlServer& control_;
    TargetProcess& target_;
    InjectionPlan plan_;
    double durationS_;
    bool quiet_;
    int done_[2] = {-1, -1};  // the injection thread writes a byte when it ends
    int timer_ = -1;          // --duration's timerfd
    std::thread thread_;
    std::optional<core::Error> threadError_;  // set by the thread, read after its byte
    std::optional<core::Error> failure_;
    bool injectedOk_ = false, connected_ = false, stopAsked_ = false, detachSent_ = false;
    std::vector<core::StorageAtAttach> before_;
    std::optional<double> beforeTimeS_;
    std::string unlisted_ = "memtool attach ended before they were listed";
};

}  // namespace memtool::cli
