// Text from a trace or a target shown on a terminal: nothing in it drives the
// terminal (issue 51: raw escape sequences reached it from report, diff and ctl).
#include <gtest/gtest.h>

#include "reporters/Markup.h"

using memtool::reporters::escapeTerminal;

TEST(EscapeTerminal, PlainTextAndUtf8ComeBackAsTheyAre) {
    EXPECT_EQ(escapeTerminal("train.py:35 forward\tx"), "train.py:35 forward\tx");
    EXPECT_EQ(escapeTerminal("Größe 日本 🙂"), "Größe 日本 🙂");
    EXPECT_EQ(escapeTerminal("a\nb", /*keepNewlines=*/true), "a\nb");
}

TEST(EscapeTerminal, ControlCharactersAndBrokenUtf8AreShownNotSent) {
    // C0: ESC, BEL, CR, a newline where one line is shown; DEL.
    EXPECT_EQ(escapeTerminal("\x1b]0;owned\x07\x1b[2J\r"), "\\x1b]0;owned\\x07\\x1b[2J\\x0d");
    EXPECT_EQ(escapeTerminal("a\nb"), "a\\x0ab");
    EXPECT_EQ(escapeTerminal("\x7f"), "\\x7f");
    // C1 as UTF-8 (U+009B is CSI to a terminal that reads UTF-8).
    EXPECT_EQ(escapeTerminal("\xc2\x9b"
                             "31m"),
              "\\u009b31m");
    // Not UTF-8: a raw 0x9b (CSI to an 8-bit terminal), a cut sequence, an overlong
    // form, a surrogate.
    EXPECT_EQ(escapeTerminal("\x9b"
                             "31m"),
              "\\x9b31m");
    EXPECT_EQ(escapeTerminal("\xe6\x97"), "\\xe6\\x97");
    EXPECT_EQ(escapeTerminal("\xc0\xaf"), "\\xc0\\xaf");
    EXPECT_EQ(escapeTerminal("\xed\xa0\x80"), "\\xed\\xa0\\x80");
}
