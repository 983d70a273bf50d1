#pragma once
// Sizes in a text report, as --bytes asks (core::ByteUnits): alone, or right-
// aligned in a table's column, whose width fits the widest such size.

#include <fmt/format.h>

#include <cstdint>
#include <string>

#include "core/Units.h"

namespace memtool::reporters {

class ByteText {
public:
    explicit ByteText(core::ByteUnits units)
        : units_(units), width_(core::byteColumnWidth(units)) {}
    std::string operator()(uint64_t bytes) const { return core::formatBytes(bytes, units_); }
    std::string column(uint64_t bytes) const { return column((*this)(bytes)); }
    std::string column(const std::string& text) const {
        return fmt::format("{:>{}}", text, width_);
    }
    size_t width() const { return width_; }

private:
    core::ByteUnits units_;
    size_t width_;
};

}  // namespace memtool::reporters
