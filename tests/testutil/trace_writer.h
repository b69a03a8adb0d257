// The writer of the tests' synthetic traces: small chunks (several even for a small trace), and an exception
// when it cannot open (a fixture's setup fails loudly, never with an empty trace).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "format/trace_writer.h"

namespace twinscope::testing {

inline std::unique_ptr<TraceWriter> OpenTestTrace(const std::string& path, const nlohmann::json& header) {
  WriterOptions o;
  o.path = path;
  o.chunk_bytes = 4096;
  std::string error;
  auto w = TraceWriter::Open(o, header, &error);
  if (!w) throw std::runtime_error("TraceWriter::Open: " + error);
  return w;
}

}  // namespace twinscope::testing
