// A record sink that forwards every record to two others, for one read that feeds two consumers
// (the join's model and its kept records; a run database and its rank comparison).
#pragma once

#include <nlohmann/json.hpp>

#include "twinscope/trace_reader.h"

namespace twinscope {

class TeeSink : public RecordSink {
 public:
  TeeSink(RecordSink& a, RecordSink& b) : a_(a), b_(b) {}
  void OnKernel(const KernelRecord& r) override { a_.OnKernel(r), b_.OnKernel(r); }
  void OnMemcpy(const MemcpyRecord& r) override { a_.OnMemcpy(r), b_.OnMemcpy(r); }
  void OnMemset(const MemsetRecord& r) override { a_.OnMemset(r), b_.OnMemset(r); }
  void OnApi(const ApiRecord& r) override { a_.OnApi(r), b_.OnApi(r); }
  void OnNvtx(const NvtxRecord& r) override { a_.OnNvtx(r), b_.OnNvtx(r); }
  void OnLaunch(const LaunchRecord& r) override { a_.OnLaunch(r), b_.OnLaunch(r); }
  void OnBlock(const BlockRecord& r) override { a_.OnBlock(r), b_.OnBlock(r); }
  void OnStatus(const nlohmann::json& s, bool summary) override { a_.OnStatus(s, summary), b_.OnStatus(s, summary); }

 private:
  RecordSink& a_;
  RecordSink& b_;
};

}  // namespace twinscope
