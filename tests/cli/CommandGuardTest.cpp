// How memtool's subcommands end when they throw: main() runs each through runGuarded.
#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>

#include "cli/CommandGuard.h"
#include "core/Error.h"

using namespace memtool;

TEST(CommandGuard, ReturnsWhatTheCommandReturns) {
    std::ostringstream err;
    EXPECT_EQ(cli::runGuarded([] { return 3; }, core::kExitInternal, err), 3);
    EXPECT_EQ(err.str(), "");
}

TEST(CommandGuard, AnExpectedErrorKeepsItsCode) {
    std::ostringstream err;
    int code =
        cli::runGuarded([]() -> int { throw core::Error(core::kExitBadInput, "bad size '12XB'"); },
                        core::kExitInternal, err);
    EXPECT_EQ(code, 2);
    EXPECT_EQ(err.str(), "memtool: bad size '12XB'\n");
}

TEST(CommandGuard, AnyOtherExceptionIsAnInternalError) {
    std::ostringstream err;
    int code = cli::runGuarded([]() -> int { throw std::out_of_range("vector::_M_range_check"); },
                               core::kExitInternal, err);
    EXPECT_EQ(code, 70);
    EXPECT_EQ(err.str(), "memtool: internal error: vector::_M_range_check\n");
    std::ostringstream unknown;
    EXPECT_EQ(cli::runGuarded([]() -> int { throw 42; }, core::kExitInternal, unknown), 70);
    EXPECT_EQ(unknown.str(), "memtool: internal error: an exception of unknown type\n");
}

TEST(CommandGuard, RunKeepsItsOwnCodeForFaults) {
    std::ostringstream err;
    EXPECT_EQ(
        cli::runGuarded([]() -> int { throw std::runtime_error("x"); }, core::kExitRunFailed, err),
        125);
}
