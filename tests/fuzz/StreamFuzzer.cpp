// libFuzzer harness: bytes from a collector's socket, as `memtool run` folds them.
// The input is a stream (preamble first); its first byte also picks the size of
// the pieces it is fed in, so records split across reads are covered. What the
// stream folded into is then built into a trace and written as trace.json would
// be. A ProtocolError is the expected answer to bad bytes; anything else that
// escapes, and any sanitizer report, is a bug.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <unordered_map>

#include "core/Aggregator.h"
#include "core/StreamDecoder.h"
#include "reporters/JsonReporter.h"
#include "reporters/TableReporter.h"
#include "trace/Symbolizer.h"
#include "trace/TraceBuilder.h"
#include "trace/TraceReader.h"

namespace {

using namespace memtool;

// Frames made from the address alone, of the kinds the builder treats apart: the
// interpreter loop, main, a header's function inlined into a named one with a
// line, an unnamed one, memtool's own.
class FakeSymbolizer : public cli::Symbolizer {
public:
    const std::vector<core::Frame>& symbolize(uint64_t ip) override {
        auto [it, fresh] = frames_.try_emplace(ip, 1);
        if (!fresh) return it->second;
        core::Frame& f = it->second.back();
        switch (ip % 6) {
            case 0:
                f.function = "_PyEval_EvalFrameDefault";
                f.module = "/usr/lib/libpython3.11.so.1.0";
                break;
            case 1:
                f.function = "main";
                f.module = "/usr/bin/python3.11";
                break;
            case 2: {
                f.function = "Model::forward()";
                f.file = "/src/model.cpp";
                f.line = ip % 1000;
                f.module = "/home/me/libmodel.so";
                core::Frame inlined = f;
                inlined.function = "at::empty(long)";
                inlined.file = "/usr/include/ATen/ops/empty.h";
                inlined.line = 36;
                it->second.insert(it->second.begin(), inlined);
                break;
            }
            case 3:
                f.module = "/usr/lib/libc10.so";
                f.offset = ip;
                break;
            case 4:
                f.function = "memtool_hook";
                f.module = "/opt/memtool/lib/memtool/libmemtool_collector.so";
                break;
            default:
                break;  // nothing known
        }
        return it->second;
    }

private:
    std::unordered_map<uint64_t, std::vector<core::Frame>> frames_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    core::Aggregator agg;
    core::StreamDecoder decoder(agg);
    const size_t piece = size == 0 ? 1 : 1 + data[0] % 64;
    cli::ProcessOutcome outcome;
    try {
        for (size_t at = 0; at < size; at += piece)
            decoder.feed(data + at, std::min(piece, size - at));
    } catch (const core::ProtocolError& e) {
        outcome.streamError = e.what();
    }
    FakeSymbolizer symbolizer;
    for (cli::SiteMode mode : {cli::SiteMode::User, cli::SiteMode::All}) {
        core::Trace trace;
        trace.processes.push_back(cli::buildProcessTrace(agg, symbolizer, outcome, mode));
        // As saveTrace writes it, and read back as report would: what memtool
        // writes, memtool reads.
        const core::Trace back = reporters::traceFromText(reporters::traceToText(trace), "fuzz");
        std::ostringstream out;
        reporters::renderTable(back, reporters::ReportOptions{}, out);
        reporters::renderJson(back, reporters::ReportOptions{}).dump();
    }
    return 0;
}
