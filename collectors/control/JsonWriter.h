#pragma once
// JSON into a fixed buffer, for replies and the C API's results: no heap, no
// exceptions. Output that does not fit is cut and marked truncated (the caller
// asks again with more room).

#include <cstddef>
#include <cstdint>
#include <cstdio>

namespace memtool::collectors::control {

class JsonWriter {
public:
    JsonWriter(char* out, size_t size) : out_(out), size_(size) {
        if (size_) out_[0] = '\0';
    }
    JsonWriter& raw(const char* s) {
        for (; *s; ++s) put(*s);
        return *this;
    }
    JsonWriter& string(const char* s) {
        put('"');
        for (; *s; ++s) {
            const unsigned char c = static_cast<unsigned char>(*s);
            if (c == '"' || c == '\\') {
                put('\\');
                put(static_cast<char>(c));
            } else if (c < 0x20) {
                char esc[8];
                std::snprintf(esc, sizeof esc, "\\u%04x", c);
                raw(esc);
            } else {
                put(static_cast<char>(c));
            }
        }
        put('"');
        return *this;
    }
    JsonWriter& key(const char* k) {
        comma();
        string(k);
        put(':');
        fresh_ = true;
        return *this;
    }
    JsonWriter& value(uint64_t v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(v));
        return item(buf);
    }
    JsonWriter& value(double v) {
        char buf[48];
        std::snprintf(buf, sizeof buf, "%.6f", v);
        return item(buf);
    }
    JsonWriter& value(bool v) { return item(v ? "true" : "false"); }
    JsonWriter& value(const char* s) {
        comma();
        return string(s);
    }
    JsonWriter& open(char bracket) {
        comma();
        put(bracket);
        fresh_ = true;
        return *this;
    }
    JsonWriter& close(char bracket) {
        put(bracket);
        fresh_ = false;
        return *this;
    }
    size_t length() const { return used_; }
    bool truncated() const { return truncated_; }

private:
    JsonWriter& item(const char* text) {
        comma();
        return raw(text);
    }
    void comma() {
        if (!fresh_) put(',');
        fresh_ = false;
    }
    void put(char c) {
        if (used_ + 1 < size_) {
            out_[used_++] = c;
            out_[used_] = '\0';
        } else {
            truncated_ = true;
        }
    }
    char* out_;
    size_t size_;
    size_t used_ = 0;
    bool fresh_ = true;  // nothing written at this level yet: no comma before the next item
    bool truncated_ = false;
};

}  // namespace memtool::collectors::control
