#pragma once
// trace.json's text written straight from the model, laid out byte for byte as
// nlohmann's dump(1) lays out the same document: no JSON document is built. At
// the end of a run the document (a node per value, a map per object) cost more
// than the rest of the end together, most of it first touches of the memory it
// took (docs/TRACE.md describes the fields; TraceJson.h reads them back).

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trace/TraceModel.h"

namespace memtool::reporters {

// The members of a process's object that its stream alone decides (devices,
// frames, hotspots, lines, stream, regions, control, oom, timeline: what
// cli's buildProcessBody builds), rendered ahead as trace.json lays them out.
// memtool run renders them while the program is still exiting, and traceToText
// writes them in place of rendering the process's own again: the process must
// be the body they were rendered from, with only its other members set since.
class RenderedBody {
public:
    explicit RenderedBody(const core::ProcessTrace& body);
    RenderedBody(const RenderedBody&) = delete;
    RenderedBody& operator=(const RenderedBody&) = delete;

    // (key, text) in the order rendered; the text views this object's own.
    const std::vector<std::pair<std::string_view, std::string_view>>& members() const {
        return members_;
    }

    // Bytes of text rendered.
    size_t size() const { return text_.size(); }

private:
    std::string text_;
    std::vector<std::pair<std::string_view, std::string_view>> members_;
};

// traceToText (TraceJson.h), with rendered[i] (when there and not null) written
// for trace.processes[i]'s body members.
std::string traceToText(const core::Trace& trace, std::span<const RenderedBody* const> rendered);

// The same text in pieces: what was written for this call (`own`), with the
// rendered bodies' text in between where it goes, not copied. Written one piece
// after another (views()), it is traceToText's text byte for byte; memtool run
// writes trace.json so, without a second copy of every body (a fork pool's
// bodies are ~0.5 MB, each new page of a copy a page fault).
struct TextPieces {
    std::string own;
    // (where in `own`, text that goes there), in order of where.
    std::vector<std::pair<size_t, std::string_view>> inserts;
    // Every piece in order; they view `own` and the inserted text.
    std::vector<std::string_view> views() const;
};
TextPieces traceToPieces(const core::Trace& trace, std::span<const RenderedBody* const> rendered);

// One hotspot, one line row, as trace.json writes them (their pools included),
// at the outermost level; the whole trace is traceToText (TraceJson.h).
std::string hotspotText(const core::Hotspot& h);
std::string lineText(const core::LineStat& l);

}  // namespace memtool::reporters
