#include "reporters/TensorsReporter.h"

#include <fmt/format.h>

#include "core/Units.h"

namespace memtool::reporters {

namespace {

using nlohmann::json;

uint64_t u64(const json& j, const char* key) {
    return j.contains(key) && j[key].is_number_unsigned() ? j[key].get<uint64_t>() : 0;
}

std::string str(const json& j, const char* key) {
    return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

std::string shapeText(const json& shape) {
    std::string s = "(";
    if (shape.is_array())
        for (size_t i = 0; i < shape.size(); ++i) {
            if (i) s += ", ";
            s += shape[i].is_number_unsigned() ? std::to_string(shape[i].get<uint64_t>()) : "?";
        }
    return s + ")";
}

const char* plural(uint64_t n) { return n == 1 ? "" : "s"; }

// Where a visible tensor's storage not among the live blocks may come from.
const char* outsideText(bool forked, bool attached) {
    // A fork child's tensors made before the fork are its parent's allocations;
    // an attached process's made before the attach were never seen.
    if (forked)
        return "not allocated in this process (its parent's from before the fork, or not "
               "torch's; not in the live bytes)";
    if (attached)
        return "not allocated while memtool was attached (before the attach, or not torch's; "
               "not in the live bytes)";
    return "not from torch's allocator (not in the live bytes)";
}

void renderDevice(const json& d, bool forked, bool attached, std::string& out) {
    const std::string device = str(d, "device");
    out += fmt::format("Storage on {}\n", device);
    out += fmt::format("{:<52} {:>20} {:>15}\n", "Tensor", "Shape", "Bytes");
    for (const json& t : d.value("tensors", json::array())) {
        std::string name = str(t, "name");
        if (t.contains("owner") && t["owner"].is_string())
            name += "(->" + t["owner"].get<std::string>() + ")";
        out +=
            fmt::format("{:<52} {:>20} {:>15}\n", name, shapeText(t.value("shape", json::array())),
                        core::groupDigits(u64(t, "bytes")));
    }
    out += std::string(89, '-') + "\n";
    out += fmt::format("Total Tensors: {}   Used Memory: {} B (visible from Python, {} tensor{})\n",
                       core::groupDigits(u64(d, "visible_elements")),
                       core::groupDigits(u64(d, "visible_bytes")), u64(d, "visible_tensors"),
                       plural(u64(d, "visible_tensors")));
    if (d.contains("note")) {
        out += fmt::format("Live on {}: {} B. {}\n\n", device,
                           core::groupDigits(u64(d, "live_bytes")), str(d, "note"));
        return;
    }
    const uint64_t invisible = u64(d, "invisible_bytes"), storages = u64(d, "invisible_storages");
    out += fmt::format("Not visible from Python: {} B in {} storage{}\n",
                       core::groupDigits(invisible), core::groupDigits(storages), plural(storages));
    for (const json& g : d.value("invisible", json::array())) {
        out += fmt::format(
            "  {:>15} B  {:>6} storage{:<1}  {}\n", core::groupDigits(u64(g, "bytes")),
            core::groupDigits(u64(g, "storages")), plural(u64(g, "storages")), str(g, "site"));
        if (g.contains("stack") && g["stack"].is_array())
            for (const json& f : g["stack"])
                if (f.is_string()) out += fmt::format("  {:>34}{}\n", "", f.get<std::string>());
    }
    const uint64_t outside = u64(d, "outside_allocator_bytes");
    if (outside > 0) {
        out += fmt::format("Visible but {}: {} B\n", outsideText(forked, attached),
                           core::groupDigits(outside));
        for (const json& t : d.value("outside_allocator", json::array()))
            out +=
                fmt::format("  {:>15} B  {}\n", core::groupDigits(u64(t, "bytes")), str(t, "name"));
    }
    out += fmt::format("Live on {}: {} found from Python + {} not visible = {} B{}\n\n", device,
                       core::groupDigits(u64(d, "matched_bytes")), core::groupDigits(invisible),
                       core::groupDigits(u64(d, "live_bytes")),
                       d.value("exact", false)
                           ? " (exact)"
                           : " (a visible storage's size differs from its block's)");
}

}  // namespace

std::string renderTensors(const json& report) {
    std::string out;
    if (report.contains("pid")) {
        std::string command;
        for (const json& a : report.value("command", json::array()))
            if (a.is_string()) command += (command.empty() ? "" : " ") + a.get<std::string>();
        out += fmt::format("Tensors of process {} ({}), {:.3f} s into the run\n\n",
                           report["pid"].is_number_integer() ? report["pid"].get<int64_t>() : 0,
                           command, report.value("time_s", 0.0));
    }
    const json devices = report.value("devices", json::array());
    if (devices.empty()) out += "No tensors, and no live storage.\n";
    const bool forked = report.contains("forked") && report["forked"] == true;
    const bool attached = report.contains("attached") && report["attached"] == true;
    for (const json& d : devices)
        if (d.is_object()) renderDevice(d, forked, attached, out);
    return out;
}

}  // namespace memtool::reporters
