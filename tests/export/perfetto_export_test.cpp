// The Perfetto exporter, read back with the same generated classes and a
// decoder written here that follows the rules trace_processor applies: interned
// ids defined before use on the sequence (first packet clears the state),
// slices paired by track after sorting by (timestamp, file position), flows
// matched by id. (Perfetto's own trace_processor is not a Debian package, so
// it is not used here.)
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "golden.h"
#include "join_scene.h"
#include "sample_trace.h"
#include "served_scene.h"
#include "views/export/join/join_export.h"
#include "views/export/join/perfetto_trace.pb.h"

namespace twinscope::exporters {
namespace {

using pftrace::TrackEvent;

struct Arg {
  std::string name;
  std::string text;  // value as text (strings resolved through interning)
};

struct Slice {
  uint64_t track = 0;
  uint64_t ts = 0, dur = 0;
  bool instant = false;
  std::string name, category;
  std::vector<Arg> args;
  std::vector<uint64_t> flows_out, flows_in;
  int depth = 0;
  size_t pos = 0;  // the packet that begins it (its place in trace_processor's order with ts)
  std::string ArgText(const std::string& n) const {
    for (const auto& a : args)
      if (a.name == n) return a.text;
    return "<none>";
  }
};

struct Track {
  uint64_t uuid = 0, parent = 0;
  std::string name;
  int32_t rank = 0;
  bool process = false, thread = false;
  int64_t pid = 0, tid = 0;
};

// A trace as trace_processor would see it, or the reason it would not.
struct Decoded {
  std::map<uint64_t, Track> tracks;
  std::vector<Slice> slices;                    // begin/end pairs and instants, in (track, ts) order
  std::map<std::string, int> name_definitions;  // how often each event name was interned
  size_t packets = 0;
  std::vector<std::string> errors;

  // Slices on every track of that name (lanes of one visual track), by time.
  std::vector<const Slice*> On(const std::string& track_name) const {
    std::vector<const Slice*> v;
    for (const auto& s : slices)
      if (tracks.count(s.track) && tracks.at(s.track).name == track_name) v.push_back(&s);
    std::stable_sort(v.begin(), v.end(), [](const Slice* a, const Slice* b) { return a->ts < b->ts; });
    return v;
  }
  std::vector<const Slice*> Named(const std::string& name) const {
    std::vector<const Slice*> v;
    for (const auto& s : slices)
      if (s.name == name) v.push_back(&s);
    return v;
  }
  const Track* TrackNamed(const std::string& name) const {
    for (const auto& [u, t] : tracks)
      if (t.name == name) return &t;
    return nullptr;
  }
};

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

Decoded Decode(const std::string& path) {
  Decoded d;
  pftrace::Trace trace;
  if (!trace.ParseFromString(ReadFile(path))) {
    d.errors.push_back("not a valid Trace message");
    return d;
  }
  std::map<uint64_t, std::string> names, categories, annotation_names, strings;
  struct Event {
    uint64_t ts;
    size_t index;
    TrackEvent::Type type;
    uint64_t track;
    Slice s;
  };
  std::vector<Event> events;
  bool state_valid = false;
  for (int i = 0; i < trace.packet_size(); ++i) {
    const auto& p = trace.packet(i);
    ++d.packets;
    if (p.trusted_packet_sequence_id() != 1) d.errors.push_back("packet without sequence id 1");
    if (p.sequence_flags() & pftrace::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED) {
      names.clear(), categories.clear(), annotation_names.clear(), strings.clear();
      state_valid = true;
    }
    if (i == 0 && !state_valid) d.errors.push_back("the first packet does not clear the incremental state");
    const auto& in = p.interned_data();
    auto define = [&](auto& table, uint64_t iid, const std::string& value, const char* what) {
      if (iid == 0 || table.count(iid))
        d.errors.push_back(std::string(what) + " iid " + std::to_string(iid) + " redefined");
      table[iid] = value;
    };
    for (const auto& e : in.event_names()) {
      define(names, e.iid(), e.name(), "event name");
      ++d.name_definitions[e.name()];
    }
    for (const auto& e : in.event_categories()) define(categories, e.iid(), e.name(), "category");
    for (const auto& e : in.debug_annotation_names()) define(annotation_names, e.iid(), e.name(), "annotation name");
    for (const auto& e : in.debug_annotation_string_values()) define(strings, e.iid(), e.str(), "string value");
    if (p.has_track_descriptor()) {
      const auto& t = p.track_descriptor();
      Track tr;
      tr.uuid = t.uuid();
      tr.parent = t.parent_uuid();
      tr.rank = t.sibling_order_rank();
      tr.name = t.name();
      if (t.has_process()) tr.process = true, tr.pid = t.process().pid(), tr.name = t.process().process_name();
      if (t.has_thread())
        tr.thread = true, tr.pid = t.thread().pid(), tr.tid = t.thread().tid(), tr.name = t.thread().thread_name();
      if (d.tracks.count(tr.uuid)) d.errors.push_back("track " + std::to_string(tr.uuid) + " described twice");
      d.tracks[tr.uuid] = tr;
    }
    if (!p.has_track_event()) continue;
    const auto& e = p.track_event();
    if (!(p.sequence_flags() & pftrace::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE))
      d.errors.push_back("event packet without SEQ_NEEDS_INCREMENTAL_STATE");
    if (!d.tracks.count(e.track_uuid())) d.errors.push_back("event on a track not described before it");
    Slice s;
    s.track = e.track_uuid();
    s.pos = static_cast<size_t>(i);
    auto lookup = [&](const std::map<uint64_t, std::string>& table, uint64_t iid, const char* what) {
      auto it = table.find(iid);
      if (it == table.end()) {
        d.errors.push_back(std::string(what) + " iid " + std::to_string(iid) + " used before it was defined");
        return std::string("?");
      }
      return it->second;
    };
    if (e.has_name_iid()) s.name = lookup(names, e.name_iid(), "event name");
    if (e.has_name()) s.name = e.name();
    for (uint64_t c : e.category_iids()) s.category = lookup(categories, c, "category");
    for (const auto& a : e.debug_annotations()) {
      Arg arg{lookup(annotation_names, a.name_iid(), "annotation name"), ""};
      if (a.has_uint_value()) arg.text = std::to_string(a.uint_value());
      if (a.has_int_value()) arg.text = std::to_string(a.int_value());
      if (a.has_bool_value()) arg.text = a.bool_value() ? "true" : "false";
      if (a.has_double_value()) arg.text = std::to_string(a.double_value());
      if (a.has_string_value()) arg.text = a.string_value();
      if (a.has_string_value_iid()) arg.text = lookup(strings, a.string_value_iid(), "string value");
      s.args.push_back(arg);
    }
    s.flows_out.assign(e.flow_ids().begin(), e.flow_ids().end());
    s.flows_in.assign(e.terminating_flow_ids().begin(), e.terminating_flow_ids().end());
    events.push_back({p.timestamp(), static_cast<size_t>(i), e.type(), e.track_uuid(), std::move(s)});
  }
  // trace_processor's order: timestamp, then position in the file.
  std::stable_sort(events.begin(), events.end(),
                   [](const Event& a, const Event& b) { return std::tie(a.ts, a.index) < std::tie(b.ts, b.index); });
  std::map<uint64_t, std::vector<Slice>> open;
  for (auto& ev : events) {
    if (ev.type == TrackEvent::TYPE_INSTANT) {
      ev.s.ts = ev.ts;
      ev.s.instant = true;
      ev.s.depth = static_cast<int>(open[ev.track].size());
      d.slices.push_back(ev.s);
    } else if (ev.type == TrackEvent::TYPE_SLICE_BEGIN) {
      ev.s.ts = ev.ts;
      ev.s.depth = static_cast<int>(open[ev.track].size());
      open[ev.track].push_back(ev.s);
    } else if (ev.type == TrackEvent::TYPE_SLICE_END) {
      auto& stack = open[ev.track];
      if (stack.empty()) {
        d.errors.push_back("slice end without a begin on track " + std::to_string(ev.track));
        continue;
      }
      Slice s = stack.back();
      stack.pop_back();
      s.dur = ev.ts - s.ts;
      d.slices.push_back(s);
    } else {
      d.errors.push_back("event without a type");
    }
  }
  for (const auto& [t, stack] : open)
    if (!stack.empty()) d.errors.push_back("unclosed slice on track " + std::to_string(t));
  std::stable_sort(d.slices.begin(), d.slices.end(),
                   [](const Slice& a, const Slice& b) { return std::tie(a.track, a.ts) < std::tie(b.track, b.ts); });
  return d;
}

// Flow id -> (from, to) slices; an error for a flow without both ends.
std::map<uint64_t, std::pair<const Slice*, const Slice*>> Flows(const Decoded& d, std::vector<std::string>* errors) {
  std::map<uint64_t, std::pair<const Slice*, const Slice*>> f;
  for (const auto& s : d.slices) {
    for (uint64_t id : s.flows_out) {
      if (f[id].first) errors->push_back("flow " + std::to_string(id) + " starts twice");
      f[id].first = &s;
    }
    for (uint64_t id : s.flows_in) {
      if (f[id].second) errors->push_back("flow " + std::to_string(id) + " ends twice");
      f[id].second = &s;
    }
  }
  for (const auto& [id, ends] : f)
    if (!ends.first || !ends.second) errors->push_back("flow " + std::to_string(id) + " has one end");
  return f;
}

size_t Occurrences(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

std::string Temp(const char* suffix) { return testing::TempPath(suffix); }

TEST(PerfettoExport, PrimaryTraceTracksSlicesAndFlows) {
  ASSERT_TRUE(PerfettoAvailable());
  const std::string trace = Temp(".tsc"), out = Temp(".perfetto-trace");
  testing::WritePrimaryTrace(trace);
  auto r = ExportPerfetto(trace, out);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->skipped_invalid, 1u);  // the kernel with an invalid timestamp
  Decoded d = Decode(out);
  EXPECT_EQ(d.errors, std::vector<std::string>{});
  EXPECT_EQ(r->written, d.packets);
  EXPECT_EQ(r->bytes, ReadFile(out).size());

  // Tracks: the process, its threads, the GPU and its streams.
  const Track* gpu = d.TrackNamed("GPU 0 (Fake GPU)");
  ASSERT_NE(gpu, nullptr);
  std::set<std::string> threads, streams;
  for (const auto& [u, t] : d.tracks) {
    if (t.thread) threads.insert(t.name + "/" + std::to_string(t.pid) + "/" + std::to_string(t.tid));
    if (t.parent == gpu->uuid) streams.insert(t.name);
    if (t.process) {
      EXPECT_EQ(t.name, "./app (primary)");
    }
  }
  EXPECT_EQ(threads, (std::set<std::string>{"main thread 4242/4242/4242", "thread 4243/4242/4243"}));
  EXPECT_EQ(streams, (std::set<std::string>{"stream 7", "stream 8"}));

  // Kernels on stream 7, ts relative to the base (900 ns), names demangled.
  auto s7 = d.On("stream 7");
  ASSERT_EQ(s7.size(), 4u);  // gemm, memcpy, two graph nodes
  EXPECT_EQ(s7[0]->name, "gemm()");
  EXPECT_EQ(s7[0]->category, "kernel");
  EXPECT_EQ(s7[0]->ts, 4100u);
  EXPECT_EQ(s7[0]->dur, 1000u);
  EXPECT_EQ(s7[0]->ArgText("mangled"), "_Z4gemmv");
  EXPECT_EQ(s7[0]->ArgText("grid"), "[128,2,1]");
  EXPECT_EQ(s7[0]->ArgText("key_path"), "step#0");
  EXPECT_EQ(s7[0]->ArgText("key_hash"), "000000001234abcd");
  EXPECT_EQ(s7[1]->name, "Memcpy HtoD");
  EXPECT_EQ(s7[1]->ArgText("bytes"), "4096");
  EXPECT_EQ(s7[2]->ArgText("graph_id"), "9");
  auto s8 = d.On("stream 8");
  ASSERT_EQ(s8.size(), 1u);
  EXPECT_EQ(s8[0]->name, "Memset");

  // API calls and the push/pop range nest on the thread tracks; the start/end
  // range has its own track; the mark is an instant.
  auto main_thread = d.On("main thread 4242");
  ASSERT_EQ(main_thread.size(), 4u);
  EXPECT_EQ(main_thread[0]->name, "step");
  EXPECT_EQ(main_thread[0]->ts, 0u);
  EXPECT_EQ(main_thread[0]->dur, 8100u);
  EXPECT_EQ(main_thread[0]->depth, 0);
  EXPECT_EQ(main_thread[1]->name, "cudaLaunchKernel");
  EXPECT_EQ(main_thread[1]->category, "cuda_runtime");
  EXPECT_EQ(main_thread[1]->depth, 1);
  EXPECT_TRUE(main_thread[3]->instant);
  EXPECT_EQ(main_thread[3]->ts, 3100u);
  auto ranges = d.On("NVTX start/end ranges");
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0]->ts, 50u);
  EXPECT_EQ(ranges[0]->dur, 7550u);

  // Flows: one per GPU activity with an API call (the graph launch has two; the
  // memset has no API call).
  std::vector<std::string> errors;
  auto flows = Flows(d, &errors);
  EXPECT_EQ(errors, std::vector<std::string>{});
  std::multiset<std::string> links;
  for (const auto& [id, ends] : flows) links.insert(ends.first->name + " -> " + ends.second->name);
  EXPECT_EQ(links, (std::multiset<std::string>{"cudaLaunchKernel -> gemm()", "cudaMemcpyAsync -> Memcpy HtoD",
                                               "cudaGraphLaunch -> graph_node_kernel",
                                               "cudaGraphLaunch -> graph_node_kernel"}));
  // What was left out is said in the trace itself.
  auto summary = d.On("twinscope");
  ASSERT_EQ(summary.size(), 1u);
  EXPECT_EQ(summary[0]->ArgText("skipped_invalid_timestamps"), "1");
  EXPECT_EQ(summary[0]->ArgText("base_ns"), "900");
  std::remove(trace.c_str());
  std::remove(out.c_str());
}

TEST(PerfettoExport, ShadowTraceAloneDrawsBlocksPerSmInItsClock) {
  const std::string trace = Temp(".tsc"), out = Temp(".perfetto-trace");
  testing::WriteShadowTrace(trace);
  auto r = ExportPerfetto(trace, out);
  ASSERT_TRUE(r.ok()) << r.status().message();
  Decoded d = Decode(out);
  EXPECT_EQ(d.errors, std::vector<std::string>{});
  EXPECT_EQ(d.On("SM 0").size() + d.On("SM 1").size(), 5u);
  EXPECT_EQ(r->blocks.blocks_drawn, 5u);
  auto launches = d.On("traced launches");
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0]->name, "probe_k");
  EXPECT_EQ(launches[0]->dur, 2000u);
  EXPECT_NE(d.TrackNamed("GPU 0 thread blocks by SM (shadow clock)"), nullptr);
  // Bounded: one launch only.
  auto r1 = ExportPerfetto(trace, out, BlockBounds{1, 100});
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ(r1->blocks.launches_drawn, 1u);
  EXPECT_EQ(r1->blocks.launches_over_bounds, 1u);
  EXPECT_EQ(r1->blocks.blocks_drawn, 4u);
  ASSERT_FALSE(r1->warnings.empty());
  EXPECT_NE(r1->warnings.back().find("blocks drawn for 1 of 2 launches"), std::string::npos) << r1->warnings.back();
  std::remove(trace.c_str());
  std::remove(out.c_str());
}

class PerfettoJoin : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::SceneDir("perfetto");
    model_ = testing::WriteAndJoinScene(dir_);
    out_ = dir_ + "/join.perfetto-trace";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_, out_;
  join::JoinedModel model_;
};

TEST_F(PerfettoJoin, BlocksLieInsideTheirKernelAndLinkToIt) {
  ASSERT_EQ(model_.matches.size(), 5u);
  auto r = ExportJoinPerfetto(testing::ViewsOf(model_), out_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  Decoded d = Decode(out_);
  ASSERT_EQ(d.errors, std::vector<std::string>{});

  const std::string kernel = testing::SceneKernel();
  // The long name is written once (interned) for all kernels and launch spans,
  // and once more inside the diverged pair's label.
  EXPECT_EQ(d.name_definitions[kernel], 1);
  EXPECT_EQ(Occurrences(ReadFile(out_), kernel), 2u);
  auto kernels = d.Named(kernel);
  std::vector<const Slice*> gpu_kernels, spans;
  for (const Slice* s : kernels) (s->category == "kernel" ? gpu_kernels : spans).push_back(s);
  ASSERT_EQ(gpu_kernels.size(), 5u);
  ASSERT_EQ(spans.size(), 4u);  // the exact matches; the diverged one is labelled
  auto diverged = d.Named(kernel + " [diverged: other work in the shadow]");
  ASSERT_EQ(diverged.size(), 1u);
  EXPECT_EQ(diverged[0]->ArgText("match"), "diverged");
  spans.push_back(diverged[0]);

  // Every kernel links to its shadow launch span, which covers exactly the kernel.
  std::vector<std::string> errors;
  auto flows = Flows(d, &errors);
  EXPECT_EQ(errors, std::vector<std::string>{});
  size_t linked = 0;
  for (const auto& [id, ends] : flows) {
    if (ends.first->category != "kernel") continue;
    ++linked;
    EXPECT_EQ(ends.second->category, "shadow_launch");
    EXPECT_EQ(ends.first->ts, ends.second->ts);
    EXPECT_EQ(ends.first->dur, ends.second->dur);
    EXPECT_EQ(ends.first->ArgText("join_launch"), ends.second->ArgText("join_launch"));
  }
  EXPECT_EQ(linked, 5u);

  // Blocks: on SM tracks under the GPU's block group, each inside one launch span.
  const Track* group = nullptr;
  for (const auto& [u, t] : d.tracks)
    if (t.name.rfind("GPU 0 thread blocks by SM (shadow, scaled onto primary kernels", 0) == 0) group = &t;
  ASSERT_NE(group, nullptr);
  size_t blocks = 0;
  std::map<std::string, size_t> lanes_per_sm;
  for (const auto& [u, t] : d.tracks)
    if (t.parent == group->uuid && t.name.rfind("SM ", 0) == 0) ++lanes_per_sm[t.name];
  EXPECT_EQ(lanes_per_sm.size(), 4u);
  for (const auto& s : d.slices) {
    if (s.category != "block") continue;
    ++blocks;
    EXPECT_EQ(d.tracks.at(s.track).parent, group->uuid);
    EXPECT_EQ(s.depth, 0) << "blocks on one lane never overlap";
    size_t inside = 0;
    for (const Slice* k : spans) inside += s.ts >= k->ts && s.ts + s.dur <= k->ts + k->dur;
    EXPECT_EQ(inside, 1u) << s.name << " at " << s.ts;
  }
  EXPECT_EQ(blocks, 5u * 8u);
  EXPECT_EQ(r->blocks.blocks_drawn, 40u);
  EXPECT_EQ(r->blocks.launches_drawn, 5u);
  // step#1's blocks 0, 2, 4 and 6 (SM 0, 1 us each, 200 ns apart) all overlap:
  // SM 0 has four lanes; the other launches have two blocks at once per SM.
  EXPECT_EQ(lanes_per_sm["SM 0"], 4u);
  EXPECT_EQ(lanes_per_sm["SM 2"], 2u);

  // Hand-computed: step#0's kernel starts 1,002,000 ns, 2,000 ns after the base
  // (its launch at 1,000,000), and lasts 10,000 ns; its shadow blocks span
  // 1,700 ns, block 1 runs [100, 1100]: scaled to 2000 + 100 * 10000 / 1700 and
  // 2000 + 1100 * 10000 / 1700 (ns, rounded down).
  const Slice* b1 = nullptr;
  for (const auto& s : d.slices)
    if (s.name == "block 1" && s.ts < 12'000) b1 = &s;
  ASSERT_NE(b1, nullptr);
  EXPECT_EQ(b1->ts, 2000u + 588u);
  EXPECT_EQ(b1->ts + b1->dur, 2000u + 6470u);
  EXPECT_EQ(b1->ArgText("order"), "1");
  EXPECT_EQ(d.tracks.at(b1->track).name, "SM 1");
  // step#2's straggler is marked.
  size_t stragglers = 0;
  for (const auto& s : d.slices) stragglers += s.ArgText("straggler") == "true";
  EXPECT_GE(stragglers, 1u);
  for (const Slice* k : spans) {
    if (k->ArgText("key_path") != "step#2") continue;
    EXPECT_EQ(k->ArgText("straggler_block"), "5");
    EXPECT_EQ(k->ArgText("blocks_drawn"), "true");
  }
  // The summary instant says what was drawn.
  auto summary = d.On("twinscope");
  ASSERT_EQ(summary.size(), 1u);
  EXPECT_EQ(summary[0]->ArgText("launches_matched"), "5");
  EXPECT_EQ(summary[0]->ArgText("blocks_drawn"), "40");
  EXPECT_EQ(summary[0]->ArgText("launches_over_bounds"), "0");
  EXPECT_GT(r->blocks.block_bytes, 0u);
}

TEST_F(PerfettoJoin, BoundsAreCountedAndStated) {
  auto r = ExportJoinPerfetto(testing::ViewsOf(model_), out_, BlockBounds{2, 1000});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->blocks.launches_drawn, 2u);
  EXPECT_EQ(r->blocks.launches_over_bounds, 3u);
  EXPECT_EQ(r->blocks.blocks_drawn, 16u);
  Decoded d = Decode(out_);
  ASSERT_EQ(d.errors, std::vector<std::string>{});
  size_t blocks = 0, drawn_spans = 0;
  for (const auto& s : d.slices) {
    blocks += s.category == "block";
    drawn_spans += s.category == "shadow_launch" && s.ArgText("blocks_drawn") == "true";
  }
  EXPECT_EQ(blocks, 16u);
  EXPECT_EQ(drawn_spans, 2u);
  // Why-slow launches come first: the slow step#2 and its group's reference.
  std::set<std::string> drawn_paths;
  for (const auto& s : d.slices)
    if (s.category == "shadow_launch" && s.ArgText("blocks_drawn") == "true") drawn_paths.insert(s.ArgText("key_path"));
  EXPECT_TRUE(drawn_paths.count("step#2")) << *drawn_paths.begin();
  EXPECT_NE(d.TrackNamed("GPU 0 thread blocks by SM (shadow, scaled onto primary kernels; blocks of 2 of 5 launches)"),
            nullptr);
  ASSERT_FALSE(r->warnings.empty());
  EXPECT_NE(r->warnings.back().find("blocks drawn for 2 of 5 launches"), std::string::npos);
  // A block budget that one launch would overrun leaves it out whole.
  auto r2 = ExportJoinPerfetto(testing::ViewsOf(model_), out_, BlockBounds{100, 20});
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->blocks.blocks_drawn, 16u);
  EXPECT_EQ(r2->blocks.launches_drawn, 2u);
}

// The whole decoded trace as canonical text: tracks, then slices in (track,
// ts) order with their args and flows; the folder's path and the scene's long
// kernel name left out.
std::string Render(const Decoded& d, const std::string& dir) {
  std::ostringstream o;
  o << "packets " << d.packets << "\n";
  for (const auto& [u, t] : d.tracks) {
    o << "track " << u << " parent=" << t.parent << " rank=" << t.rank << " " << t.name;
    if (t.process) o << " process=" << t.pid;
    if (t.thread) o << " thread=" << t.pid << "/" << t.tid;
    o << "\n";
  }
  for (const auto& s : d.slices) {
    o << (s.instant ? "I" : "S") << " track=" << s.track << " ts=" << s.ts << " dur=" << s.dur << " depth=" << s.depth
      << " " << s.category << " " << s.name;
    for (const auto& a : s.args) o << " " << a.name << "=" << a.text;
    for (uint64_t f : s.flows_out) o << " out=" << f;
    for (uint64_t f : s.flows_in) o << " in=" << f;
    o << "\n";
  }
  std::string text = testing::Shorten(o.str());
  for (size_t at = text.find(dir); at != std::string::npos; at = text.find(dir)) text.replace(at, dir.size(), "<dir>");
  return text;
}

// Runs without a request trace: the scene, and a serving run's twins (step
// ranges named as the demo server names them) joined without one. The golden
// file was written by the exporter before per-request tracks existed, so these
// traces are what they were then.
TEST_F(PerfettoJoin, GoldenWithoutRequests) {
  auto r = ExportJoinPerfetto(testing::ViewsOf(model_), out_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  Decoded d = Decode(out_);
  ASSERT_EQ(d.errors, std::vector<std::string>{});
  std::string text = "# scene\n" + Render(d, dir_);

  testing::WriteOptions wo;
  wo.other_kernels = {"rms_norm_kernel"};
  auto files = testing::WriteTwin(dir_ + "/served", testing::Served(), wo);
  auto m = join::JoinTraces(files.primary, files.shadow);
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_FALSE(m->requests.present);
  r = ExportJoinPerfetto(testing::ViewsOf(*m), out_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  Decoded served = Decode(out_);
  ASSERT_EQ(served.errors, std::vector<std::string>{});
  EXPECT_EQ(served.TrackNamed("Requests"), nullptr);
  text += "# served, no request trace\n" + Render(served, dir_);
  testing::ExpectGolden("join_perfetto.txt", text);
}

// A serving run with arrival times (tests/join/served_scene.h,
// ArrivalRequestTrace): the trace's base is the first launch at 1,000,000 ns.
class PerfettoRequests : public ::testing::Test {
 protected:
  static constexpr uint64_t kBase = 1'000'000;
  void SetUp() override {
    dir_ = testing::SceneDir("perfetto_requests");
    model_ = testing::JoinServedWithArrivals(dir_, 1'796'113'162'000'000);
    out_ = dir_ + "/join.perfetto-trace";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Each request's slices (on every lane of its track), by request id.
  std::map<std::string, std::vector<const Slice*>> ByRequest(const Decoded& d) const {
    std::map<std::string, std::vector<const Slice*>> by;
    const Track* group = d.TrackNamed("Requests");
    if (!group) return by;
    for (const auto& s : d.slices) {
      const Track& t = d.tracks.at(s.track);
      if (t.parent == group->uuid && t.name.rfind("request ", 0) == 0) by[t.name.substr(8)].push_back(&s);
    }
    return by;
  }
  std::string dir_, out_;
  join::JoinedModel model_;
};

std::string LaunchIds(const join::ServedStep& s) {
  std::string ids = "[";
  for (size_t k = 0; k < s.target_launches.size(); ++k) ids += (k ? "," : "") + std::to_string(s.target_launches[k]);
  return ids + "]";
}

// Every request with a time to place it has a track under "Requests": its
// life, its first token, and one slice per step of its with kernels, equal to
// the model's; each step's flows end at exactly its target launches' kernels.
TEST_F(PerfettoRequests, EachRequestHasItsLifeFirstTokenAndServedSteps) {
  const join::RequestTable& t = model_.requests;
  ASSERT_EQ(t.requests.size(), 6u);
  auto r = ExportJoinPerfetto(testing::ViewsOf(model_), out_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  Decoded d = Decode(out_);
  ASSERT_EQ(d.errors, std::vector<std::string>{});

  const Track* group = d.TrackNamed("Requests");
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->parent, 0u);
  std::map<std::string, int32_t> ranks;  // the request tracks (lanes included), by name
  for (const auto& [u, tr] : d.tracks)
    if (tr.parent == group->uuid) ranks[tr.name] = tr.rank;
  // "lost" has neither an arrival time nor a step: no track.
  EXPECT_EQ(ranks, (std::map<std::string, int32_t>{{"request r0", 0},
                                                   {std::string("request ") + testing::kOddId, 1},
                                                   {"request skew", 2},
                                                   {"request bad", 3},
                                                   {"request late", 5}}));

  std::map<uint64_t, const join::ServedStep*> step_of;
  for (const auto& s : t.steps) step_of[s.index] = &s;
  auto by = ByRequest(d);
  for (const join::ServedRequest& q : t.requests) {
    SCOPED_TRACE(q.id);
    std::vector<const Slice*> life, steps, first;
    for (const Slice* s : by[q.id]) {
      if (s->category == "served_step") steps.push_back(s);
      if (s->category == "request") (s->instant ? first : life).push_back(s);
    }
    if (q.id == "lost") {
      EXPECT_TRUE(by[q.id].empty());
      continue;
    }
    ASSERT_EQ(life.size(), 1u);
    EXPECT_EQ(life[0]->name, "request " + q.id);
    EXPECT_EQ(life[0]->depth, 0);
    EXPECT_EQ(life[0]->ArgText("request"), q.id);
    EXPECT_EQ(life[0]->ArgText("status"), std::to_string(q.status));
    EXPECT_EQ(life[0]->ArgText("target_launches"), std::to_string(q.target_launches));
    EXPECT_EQ(life[0]->ArgText("shadow_exact"), std::to_string(q.shadow_exact));
    EXPECT_EQ(life[0]->ArgText("ttft_us"), q.first_token_us >= 0 ? std::to_string(q.first_token_us) : "<none>");

    // One slice per step of the request that has kernels, in its order, each equal to the model's step.
    std::vector<const join::ServedStep*> want;
    for (uint64_t index : q.steps)
      if (step_of.at(index)->first_start_ns) want.push_back(step_of.at(index));
    std::sort(steps.begin(), steps.end(), [](const Slice* a, const Slice* b) { return a->ts < b->ts; });
    ASSERT_EQ(steps.size(), want.size());
    EXPECT_EQ(steps.size(), q.steps.size() - q.steps_without_kernels);
    for (size_t k = 0; k < steps.size(); ++k) {
      const join::ServedStep& s = *want[k];
      const Slice& sl = *steps[k];
      EXPECT_EQ(sl.name, s.kind + " step " + std::to_string(s.index));
      EXPECT_EQ(sl.ts, s.first_start_ns - kBase);
      EXPECT_EQ(sl.dur, s.last_end_ns - s.first_start_ns);
      EXPECT_EQ(sl.ArgText("step"), std::to_string(s.index));
      EXPECT_EQ(sl.ArgText("batch"), std::to_string(s.batch));
      EXPECT_EQ(sl.ArgText("padded"), std::to_string(s.padded));
      EXPECT_EQ(sl.ArgText("range"), s.range);
      EXPECT_EQ(sl.ArgText("target_launches"), std::to_string(s.target_launches.size()));
      EXPECT_EQ(sl.ArgText("shadow_exact"), std::to_string(s.shadow_exact));
      EXPECT_EQ(sl.ArgText("shadow_time_only"), std::to_string(s.shadow_time_only));
      EXPECT_EQ(sl.ArgText("launch_ids"), LaunchIds(s));
    }
  }

  // Hand-checked (served_scene.h): r0 lives [1,001,000, 1,801,000] on the
  // CUPTI clock, its first token at 1,121,000, its four steps nested inside.
  auto& r0 = by["r0"];
  ASSERT_FALSE(r0.empty());
  const Slice* r0_life = nullptr;
  for (const Slice* s : r0)
    if (s->category == "request" && !s->instant) r0_life = s;
  ASSERT_NE(r0_life, nullptr);
  EXPECT_EQ(r0_life->ts, 1'000u);
  EXPECT_EQ(r0_life->dur, 800'000u);
  EXPECT_EQ(r0_life->ArgText("done_us"), "800");
  EXPECT_EQ(r0_life->ArgText("placed").rfind("arrival to done", 0), 0u) << r0_life->ArgText("placed");
  std::vector<std::string> r0_rest;
  for (const Slice* s : r0)
    if (s != r0_life)
      r0_rest.push_back(s->name + " ts=" + std::to_string(s->ts) + " depth=" + std::to_string(s->depth) +
                        (s->track == r0_life->track ? "" : " beside"));
  EXPECT_EQ(r0_rest, (std::vector<std::string>{"prefill step 0 ts=2000 depth=1", "first token ts=121000 depth=1",
                                               "decode step 1 ts=202000 depth=1", "decode step 2 ts=402000 depth=1",
                                               "decode step 3 ts=602000 depth=1"}));
  // The odd id has no times: its life is its steps' GPU span, with no first token.
  for (const Slice* s : by[testing::kOddId]) {
    EXPECT_FALSE(s->instant);
    if (s->category != "request") continue;
    EXPECT_EQ(s->ts, 2'000u);
    EXPECT_EQ(s->dur, 1'912'600u - 1'002'000u);
    EXPECT_EQ(s->ArgText("placed").rfind("its steps' GPU span", 0), 0u);
  }
  // "skew": steps 0 and 4 lie outside its life, so they go beside it, not mis-nested.
  std::vector<std::string> skew;
  uint64_t skew_life_track = 0;
  for (const Slice* s : by["skew"])
    if (s->category == "request" && !s->instant) skew_life_track = s->track;
  auto skew_slices = by["skew"];
  std::sort(skew_slices.begin(), skew_slices.end(), [](const Slice* a, const Slice* b) { return a->ts < b->ts; });
  for (const Slice* s : skew_slices)
    if (s->category == "served_step")
      skew.push_back(s->ArgText("step") + (s->track == skew_life_track ? " nested" : " beside") +
                     " depth=" + std::to_string(s->depth));
  EXPECT_EQ(skew, (std::vector<std::string>{"0 beside depth=0", "1 nested depth=1", "2 nested depth=1",
                                            "3 nested depth=1", "4 beside depth=0"}));
  // "bad" answered at once; "late"'s only step has no kernel.
  ASSERT_EQ(by["bad"].size(), 1u);
  EXPECT_EQ(by["bad"][0]->ts, 500'000u);
  EXPECT_EQ(by["bad"][0]->dur, 0u);
  EXPECT_EQ(by["bad"][0]->ArgText("error"), "max_tokens must be an integer");
  ASSERT_EQ(by["late"].size(), 1u);
  EXPECT_EQ(by["late"][0]->ArgText("steps_without_kernels"), "1");

  // Flows: every step slice's flows end at the kernel slices of its target
  // launches, whose launch_id names the model's launch; each flow starts
  // before its end in trace_processor's order (timestamp, then file place).
  std::vector<std::string> errors;
  auto flows = Flows(d, &errors);
  EXPECT_EQ(errors, std::vector<std::string>{});
  std::map<const Slice*, std::multiset<std::string>> reached;
  size_t request_flows = 0;
  for (const auto& [id, ends] : flows) {
    if (ends.first->category != "served_step") continue;
    ++request_flows;
    const Slice& k = *ends.second;
    EXPECT_EQ(k.category, "kernel");
    EXPECT_EQ(k.name, "_Z23reshape_and_cache_flashv");
    EXPECT_TRUE(std::tie(ends.first->ts, ends.first->pos) < std::tie(k.ts, k.pos)) << id;
    const size_t launch = std::stoul(k.ArgText("launch_id"));
    ASSERT_LT(launch, model_.primary.size());
    EXPECT_EQ(k.ts, model_.primary[launch].start_ns - kBase);
    EXPECT_EQ(k.dur, model_.primary[launch].end_ns - model_.primary[launch].start_ns);
    reached[ends.first].insert(k.ArgText("launch_id"));
  }
  size_t step_slices = 0;
  for (const auto& s : d.slices) {
    if (s.category != "served_step") continue;
    ++step_slices;
    const join::ServedStep& st = *step_of.at(std::stoul(s.ArgText("step")));
    std::multiset<std::string> want;
    for (size_t launch : st.target_launches) want.insert(std::to_string(launch));
    EXPECT_EQ(reached[&s], want) << s.name;
  }
  EXPECT_EQ(step_slices, 4u + 5u + 5u);
  EXPECT_EQ(request_flows, 2u * step_slices);

  // The counts, in the result and in the trace.
  const RequestTrackCounts& c = r->requests;
  EXPECT_EQ(c.requests, 6u);
  EXPECT_EQ(c.drawn, 5u);
  EXPECT_EQ(c.not_placed, 1u);
  EXPECT_EQ(c.without_arrival, 1u);
  EXPECT_EQ(c.step_slices, 14u);
  EXPECT_EQ(c.steps_without_kernels, 1u);
  EXPECT_EQ(c.steps_off_life, 2u);
  EXPECT_EQ(c.flows, 28u);
  EXPECT_EQ(c.flows_unended, 0u);
  auto summary = d.On("twinscope");
  ASSERT_EQ(summary.size(), 1u);
  EXPECT_EQ(summary[0]->ArgText("requests_drawn"), "5");
  EXPECT_EQ(summary[0]->ArgText("requests_not_placed"), "1");
  EXPECT_EQ(summary[0]->ArgText("request_flows"), "28");
  EXPECT_EQ(summary[0]->ArgText("request_steps_off_life"), "2");
  std::string warnings;
  for (const auto& w : r->warnings) warnings += w + "\n";
  EXPECT_NE(warnings.find("1 requests have neither an arrival time nor a step with kernels"), std::string::npos)
      << warnings;
  EXPECT_NE(warnings.find("2 step slices lie outside their request's life slice"), std::string::npos) << warnings;
}

TEST_F(PerfettoRequests, BoundsAreCountedAndStated) {
  auto r = ExportJoinPerfetto(testing::ViewsOf(model_), out_, kPerfettoBlockBounds, RequestTrackBounds{2, 6, 5});
  ASSERT_TRUE(r.ok()) << r.status().message();
  Decoded d = Decode(out_);
  ASSERT_EQ(d.errors, std::vector<std::string>{});
  const RequestTrackCounts& c = r->requests;
  EXPECT_EQ(c.drawn, 2u);  // r0 and the odd id
  EXPECT_EQ(c.over_bounds, 4u);
  EXPECT_EQ(c.step_slices, 6u);  // r0's four, two of the odd id's five
  EXPECT_EQ(c.steps_over_bounds, 3u);
  EXPECT_EQ(c.flows, 5u);
  EXPECT_EQ(c.flows_over_bounds, 7u);
  auto by = ByRequest(d);
  EXPECT_EQ(by.size(), 2u);
  size_t step_slices = 0;
  uint64_t left_out = 0;
  for (const auto& s : d.slices) {
    if (s.category != "served_step") continue;
    ++step_slices;
    if (s.ArgText("flows_left_out") != "<none>") left_out += std::stoul(s.ArgText("flows_left_out"));
  }
  EXPECT_EQ(step_slices, 6u);
  EXPECT_EQ(left_out, 7u);
  std::vector<std::string> errors;
  size_t request_flows = 0;
  for (const auto& [id, ends] : Flows(d, &errors)) request_flows += ends.first->category == "served_step";
  EXPECT_EQ(errors, std::vector<std::string>{});
  EXPECT_EQ(request_flows, 5u);
  auto summary = d.On("twinscope");
  ASSERT_EQ(summary.size(), 1u);
  EXPECT_EQ(summary[0]->ArgText("requests_over_bounds"), "4");
  EXPECT_EQ(summary[0]->ArgText("request_flows_over_bounds"), "7");
  bool said = false;
  for (const auto& w : r->warnings) said = said || w.find("requests: 2 of 6 requests") == 0;
  EXPECT_TRUE(said);
}

// The served scene's own request trace has no arrival times: its requests
// span their steps' GPU time, and the 400 without steps has no track.
TEST_F(PerfettoRequests, WithoutArrivalTimesRequestsSpanTheirSteps) {
  const join::JoinedModel m = testing::JoinServed(dir_ + "/plain", true);
  ASSERT_EQ(m.requests.requests.size(), 3u);
  auto r = ExportJoinPerfetto(testing::ViewsOf(m), out_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  Decoded d = Decode(out_);
  ASSERT_EQ(d.errors, std::vector<std::string>{});
  auto by = ByRequest(d);
  ASSERT_EQ(by.size(), 2u);
  for (const join::ServedRequest& q : m.requests.requests) {
    if (q.steps.empty()) continue;
    size_t steps = 0;
    for (const Slice* s : by[q.id]) {
      if (s->category == "request") {
        EXPECT_EQ(s->ts, q.first_start_ns - kBase);
        EXPECT_EQ(s->dur, q.last_end_ns - q.first_start_ns);
      }
      if (s->category == "served_step") {
        ++steps;
        EXPECT_EQ(s->depth, 1);
      }
    }
    EXPECT_EQ(steps, q.steps.size());
  }
  EXPECT_EQ(r->requests.without_arrival, 2u);
  EXPECT_EQ(r->requests.not_placed, 1u);
}

// The view reads no trace (docs/join.md, "Reads"): a missing primary is the
// join's clear error, and a run already read is drawn with its files gone.
TEST_F(PerfettoJoin, MissingPrimaryIsAClearError) {
  auto gone = join::JoinForViews(dir_ + "/gone.tsc", model_.shadow_path);
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.status().message().find("gone.tsc"), std::string::npos) << gone.status().message();
  const join::JoinedRun run = testing::ViewsOf(model_);
  std::filesystem::remove(model_.primary_path);
  std::filesystem::remove(model_.shadow_path);
  auto r = ExportJoinPerfetto(run, out_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->blocks.launches_drawn, 5u);
}

}  // namespace
}  // namespace twinscope::exporters
