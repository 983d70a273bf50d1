#pragma once
// Python's pickle, protocol 2, written from C++: what `pickle.load` reads back as
// dicts, lists, tuples, strings, ints, floats, bools and None (the subset a
// PyTorch memory snapshot is made of). Values are written in order: a dict's
// keys and values alternate between beginDict() and endDict(). Objects can be
// written once and referred to again (remember/recall: pickle's memo), so that
// the frames a thousand events share are stored once.
//
// Opcodes (pickletools): \x80 PROTO, } EMPTY_DICT, ] EMPTY_LIST, ( MARK,
// u SETITEMS, e APPENDS, \x86 TUPLE2, N NONE, \x88 / \x89 NEWTRUE / NEWFALSE,
// K BININT1, J BININT (4 bytes, little-endian, signed), \x8a LONG1 (length, then
// two's complement little-endian), G BINFLOAT (8 bytes, big-endian), X
// BINUNICODE (4-byte length, UTF-8), r LONG_BINPUT, j LONG_BINGET, . STOP.

#include <cstdint>
#include <string>
#include <string_view>

namespace memtool::reporters {

class Pickler {
public:
    Pickler() : out_("\x80\x02", 2) {}

    void none() { out_ += 'N'; }
    void boolean(bool b) { out_ += b ? '\x88' : '\x89'; }
    void integer(int64_t v);
    void unsignedInteger(uint64_t v);
    void real(double v);
    // Bytes that are not UTF-8 are written as U+FFFD (pickle.load would refuse them).
    void text(std::string_view s);
    void beginList() { out_ += "]("; }
    void endList() { out_ += 'e'; }
    void beginDict() { out_ += "}("; }
    void endDict() { out_ += 'u'; }
    // The two values written last become one tuple.
    void tuple2() { out_ += '\x86'; }
    // The value written last is kept under the returned id; recall(id) writes it again.
    uint32_t remember();
    void recall(uint32_t id);

    // The pickle, STOP added; the pickler is done.
    std::string finish() && {
        out_ += '.';
        return std::move(out_);
    }

private:
    void put32(uint32_t v);
    std::string out_;
    uint32_t memo_ = 0;
};

}  // namespace memtool::reporters
