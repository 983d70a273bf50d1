#pragma once
// The controlling terminal, for the live view: /dev/tty, never the program's
// stdin, stdout or stderr (those stay the program's, whatever they are). Opened
// twice: a blocking descriptor for drawing (a frame goes out in one write, which
// the terminal keeps whole among the program's own writes) and a non-blocking one
// for keys (the program may read the same terminal and take a key first).
//
// Keys come one at a time without echo (canonical mode and echo off), while
// Ctrl-C and Ctrl-Z still raise their signals. restoreKeys() and the destructor
// give those two settings back as they were, leaving anything else the program
// may have changed meanwhile.

#include <termios.h>

#include <memory>
#include <string>

namespace memtool::cli {

class Terminal {
public:
    // Null, with the reason in `why`, when memtool has no controlling terminal, or
    // is not in its foreground (a job in the background must not touch it).
    static std::unique_ptr<Terminal> open(std::string* why);
    ~Terminal();
    Terminal(const Terminal&) = delete;
    Terminal& operator=(const Terminal&) = delete;

    // The descriptor to watch for keys.
    int keyFd() const { return keys_; }
    // Keys typed since the last call ("" when none); `gone` set when the terminal
    // hung up (nothing will ever be typed again).
    std::string readKeys(bool* gone);
    // Canonical mode and echo as they were before.
    void restoreKeys();

    // Rows and columns now (it may be resized at any time).
    void size(size_t* rows, size_t* columns) const;
    // All of `bytes`, in one write where the terminal takes it whole.
    void write(const std::string& bytes);

private:
    Terminal(int draw, int keys, const termios& original);

    int draw_;
    int keys_;
    termios original_;
    bool keysRestored_ = false;
};

}  // namespace memtool::cli
