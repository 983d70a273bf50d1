#pragma once
// The tensors report of a live process (`memtool ctl PID tensors`,
// memtool.report_tensors()) as text, in pytorch_memlab's MemReporter layout, then
// what memlab cannot show: the storages no Python-visible tensor owns, by
// allocation site, and the reconciliation with the device's live bytes.

#include <nlohmann/json.hpp>
#include <string>

namespace memtool::reporters {

// `report` is cli::tensorsReport's JSON.
std::string renderTensors(const nlohmann::json& report);

}  // namespace memtool::reporters
