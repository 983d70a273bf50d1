// What memtool attach refuses before it touches a process, from a /proc made up
// for the test (what this machine cannot show: another architecture, a kernel
// whose Yama forbids tracing).
#include <elf.h>
#include <errno.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>

#include "cli/attach/Injection.h"
#include "cli/attach/RemoteCall.h"
#include "core/Error.h"
#include "tests/TempDir.h"

using namespace memtool::cli;

namespace {

// PROC/4242: a sleeping process of this user whose executable has `machine`.
std::string fakeAttachProc(uint16_t machine) {
    const std::string root = memtool::test_support::makeTempDir("memtool-attachable-");
    const std::string dir = root + "/4242";
    mkdir(dir.c_str(), 0700);
    std::ofstream(dir + "/stat") << "4242 (trainer) S 1 4242 4242 0 -1\n";
    std::ofstream(dir + "/status")
        << "Name:\ttrainer\nState:\tS (sleeping)\nTracerPid:\t0\nUid:\t" << geteuid() << "\t"
        << geteuid() << "\t" << geteuid() << "\t" << geteuid() << "\n";
    Elf64_Ehdr h{};
    std::memcpy(h.e_ident, ELFMAG, SELFMAG);
    h.e_ident[EI_CLASS] = ELFCLASS64;
    h.e_machine = machine;
    std::ofstream(dir + "/exe", std::ios::binary)
        .write(reinterpret_cast<const char*>(&h), sizeof h);
    std::ofstream(dir + "/maps")
        << "00400000-00401000 r-xp 00000000 fd:01 1234 /opt/trainer/trainer\n";
    return root;
}

std::string attachRefusal(const std::string& root) {
    try {
        checkAttachable(4242, root);
    } catch (const memtool::core::Error& e) {
        EXPECT_EQ(e.exitCode(), memtool::core::kExitBadInput);
        return e.what();
    }
    return "";
}

}  // namespace

TEST(Attachable, AProgramOfAnotherArchitectureIsRefused) {
    EXPECT_EQ(attachRefusal(fakeAttachProc(EM_AARCH64)),
              "attach: process 4242 is not an x86-64 program: memtool attach needs one");
}

TEST(Attachable, AProgramWithoutThisSystemsCLibraryIsRefused) {
    // x86-64, but its map holds no C library of memtool's (a static program's has none).
    const std::string why = attachRefusal(fakeAttachProc(EM_X86_64));
    EXPECT_EQ(why.rfind("attach: process 4242 does not use this system's C library (", 0), 0u)
        << why;
    EXPECT_NE(
        why.find("): it is statically linked, or built for another libc or container, and memtool "
                 "cannot load its collector there"),
        std::string::npos)
        << why;
}

TEST(Attachable, YamaForbiddingTracingIsNamedWithItsSetting) {
    EXPECT_EQ(
        seizeRefusal(77, EPERM, 1),
        "attach: the kernel forbids tracing process 77 (kernel.yama.ptrace_scope = 1: only a "
        "process's ancestors may trace it); run memtool attach as root, or set the sysctl to 0");
    EXPECT_EQ(
        seizeRefusal(77, EPERM, 2),
        "attach: the kernel forbids tracing process 77 (kernel.yama.ptrace_scope = 2: only root "
        "may trace); run memtool attach as root, or set the sysctl to 0");
    EXPECT_EQ(seizeRefusal(77, EPERM, 0),
              "attach: not permitted to trace process 77 (another user's, not dumpable, or traced "
              "already by a debugger)");
    EXPECT_EQ(seizeRefusal(77, ESRCH, 0), "attach: no process 77");
}
