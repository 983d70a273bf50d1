#include "cli/live/Terminal.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace memtool::cli {

std::unique_ptr<Terminal> Terminal::open(std::string* why) {
    const int draw = ::open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (draw < 0) {
        *why = std::string("no terminal (/dev/tty: ") + std::strerror(errno) + ")";
        return nullptr;
    }
    termios original{};
    if (tcgetpgrp(draw) != getpgrp() || tcgetattr(draw, &original) != 0) {
        *why = "memtool is not in the terminal's foreground";
        ::close(draw);
        return nullptr;
    }
    const int keys = ::open("/dev/tty", O_RDONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
    if (keys < 0) {
        *why = std::string("cannot read keys from /dev/tty: ") + std::strerror(errno);
        ::close(draw);
        return nullptr;
    }
    termios raw = original;
    raw.c_lflag &= static_cast<tcflag_t>(~(ICANON | ECHO));  // ISIG stays: Ctrl-C works
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    tcsetattr(draw, TCSANOW, &raw);
    return std::unique_ptr<Terminal>(new Terminal(draw, keys, original));
}

Terminal::Terminal(int draw, int keys, const termios& original)
    : draw_(draw), keys_(keys), original_(original) {}

Terminal::~Terminal() {
    restoreKeys();
    ::close(keys_);
    ::close(draw_);
}

void Terminal::restoreKeys() {
    if (keysRestored_) return;
    keysRestored_ = true;
    termios now{};
    if (tcgetattr(draw_, &now) != 0) return;
    const tcflag_t ours = ICANON | ECHO;
    now.c_lflag = (now.c_lflag & ~ours) | (original_.c_lflag & ours);
    now.c_cc[VMIN] = original_.c_cc[VMIN];
    now.c_cc[VTIME] = original_.c_cc[VTIME];
    tcsetattr(draw_, TCSANOW, &now);
}

std::string Terminal::readKeys(bool* gone) {
    std::string keys;
    char buf[64];
    for (;;) {
        const ssize_t n = ::read(keys_, buf, sizeof buf);
        if (n > 0) {
            keys.append(buf, static_cast<size_t>(n));
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        // EAGAIN: nothing more typed (or the program took it); 0 or another error: hung up.
        *gone = !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
        return keys;
    }
}

void Terminal::size(size_t* rows, size_t* columns) const {
    winsize ws{};
    if (ioctl(draw_, TIOCGWINSZ, &ws) != 0 || ws.ws_row == 0 || ws.ws_col == 0) {
        *rows = 24;
        *columns = 80;
        return;
    }
    *rows = ws.ws_row;
    *columns = ws.ws_col;
}

void Terminal::write(const std::string& bytes) {
    const char* at = bytes.data();
    size_t left = bytes.size();
    while (left > 0) {
        const ssize_t n = ::write(draw_, at, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;  // the terminal went away: nothing left to show
        at += n;
        left -= static_cast<size_t>(n);
    }
}

}  // namespace memtool::cli
