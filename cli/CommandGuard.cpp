#include "cli/CommandGuard.h"

#include <exception>

#include "core/Error.h"

namespace memtool::cli {

int runGuarded(const std::function<int()>& command, int unexpectedExitCode, std::ostream& err) {
    try {
        return command();
    } catch (const core::Error& e) {
        err << "memtool: " << e.what() << '\n';
        return e.exitCode();
    } catch (const std::exception& e) {
        err << "memtool: internal error: " << e.what() << '\n';
        return unexpectedExitCode;
    } catch (...) {
        err << "memtool: internal error: an exception of unknown type\n";
        return unexpectedExitCode;
    }
}

}  // namespace memtool::cli
