// Renders the joined model's JSON (docs/join.md) as one self-contained HTML report (docs/report.md).
// Text and tables are written here, escaped; the charts are drawn by assets/report.js from a bounded
// copy of the model embedded as JSON, and the block detail from report::EncodeBlocks' compact form.
#include "report/report.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string_view>
#include <vector>

#include "report/block_codec.h"
#include "report/html.h"
#include "report/report_assets.h"

namespace twinscope {
namespace {

using nlohmann::json;
using report::Count;
using report::Duration;
using report::Esc;
using report::Percent;

const json& At(const json& j, std::string_view key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}
bool Has(const json& j, std::string_view key) { return !At(j, key).is_null(); }
double Num(const json& j, std::string_view key, double def = 0) {
  const json& v = At(j, key);
  return v.is_number() ? v.get<double>() : def;
}
int64_t Int(const json& j, std::string_view key, int64_t def = 0) {
  const json& v = At(j, key);
  if (v.is_number_unsigned()) return static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), INT64_MAX));
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float() && std::isfinite(v.get<double>())) return static_cast<int64_t>(v.get<double>());
  return def;
}
std::string Str(const json& j, std::string_view key, std::string def = "") {
  const json& v = At(j, key);
  return v.is_string() ? v.get<std::string>() : def;
}
bool Bool(const json& j, std::string_view key) {
  const json& v = At(j, key);
  return v.is_boolean() && v.get<bool>();
}

// A value for a table cell: numbers with separators, strings escaped, anything else as JSON.
std::string Cell(const json& v) {
  if (v.is_null()) return "&ndash;";
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_number_integer())
    return Count(v.is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), INT64_MAX))
                                        : v.get<int64_t>());
  if (v.is_number_float()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", v.get<double>());
    return buf;
  }
  if (v.is_string()) return Esc(v.get<std::string>());
  return Esc(v.dump(-1, ' ', false, json::error_handler_t::replace));
}

// Grid and block shapes as CUDA writes them, "(4096,1,1)": no thousands separators.
std::string Dims(const json& v) {
  if (!v.is_array() || v.empty()) return "&ndash;";
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + (v[i].is_number_integer() ? v[i].dump() : Cell(v[i]));
  return s + ")";
}

std::string DurCell(const json& j, std::string_view key) {
  const json& v = At(j, key);
  return v.is_number() ? Duration(v.get<double>()) : "&ndash;";
}

std::string VerdictLabel(const std::string& v) {
  if (v == "fewer_blocks") return "fewer blocks";
  if (v == "fewer_sms") return "fewer SMs";
  if (v == "reordered") return "reordered";
  if (v == "straggler") return "straggler";
  if (v == "none") return "same structure";
  return v;
}

std::string VerdictBadges(const json& verdicts) {
  std::string h;
  if (!verdicts.is_array()) return h;
  for (const auto& v : verdicts) {
    if (!v.is_string()) continue;
    std::string s = v.get<std::string>();
    std::string cls =
        (s == "fewer_blocks" || s == "fewer_sms" || s == "reordered" || s == "straggler" || s == "none") ? s : "other";
    h += "<span class=\"badge v-" + cls + "\">" + Esc(VerdictLabel(s)) + "</span>";
  }
  return h;
}

constexpr const char* kStretchNote =
    "Shadow times are stretched by the block probe's instrumentation (docs/block-probe.md): compare them "
    "within one launch (as shares of its span), never with the primary's durations.";

// Keys of a "loss" object that count work done rather than work lost.
bool IsContextKey(const std::string& k) {
  return k == "have_counters" || k == "launches_seen" || k == "kernel_records" || k == "kernel_records_in_file";
}

struct Launch {
  int64_t id;
  const json* j;
};

class Renderer {
 public:
  Renderer(const json& join, const ReportOptions& o, ReportInfo* info) : join_(join), o_(o), info_(info) {}

  std::string Render() {
    Prepare();
    std::string h;
    h.reserve(1 << 20);
    std::string targets;
    for (const auto& t : At(summary_, "target_kernels"))
      if (t.is_string()) targets += (targets.empty() ? "" : ", ") + t.get<std::string>();
    h += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
         "<meta name=\"generator\" content=\"twinscope\">\n<title>" +
         Esc(o_.title) + (targets.empty() ? "" : ": " + Esc(Shorten(targets, 120))) + "</title>\n<style>\n";
    h += report_assets::Css();
    h += "</style>\n<script>\n";
    h += report_assets::GuardJs();
    h += "</script>\n</head>\n<body>\n";
    h += "<div id=\"ts-errors\" data-count=\"0\" hidden><strong>This page hit errors:</strong><ul></ul></div>\n";
    Header(h);
    h += "<main>\n";
    Summary(h);
    Requests(h);
    WhySlow(h);
    Blocks(h);
    Launches(h);
    Steps(h);
    Drift(h);
    Loss(h);
    h += "</main>\n";
    Footer(h);
    h += "<script type=\"application/json\" id=\"ts-data\">";
    std::string data = report::JsonForScript(Data());
    h += data;
    h += "</script>\n";
    size_t block_bytes = 0;
    for (size_t i = 0; i < encoded_.size(); ++i) {
      block_bytes += encoded_[i].base64.size();
      h += "<script type=\"application/octet-stream\" id=\"ts-blocks-" + std::to_string(i) + "\">";
      h += encoded_[i].base64;
      h += "</script>\n";
    }
    if (Charts()) {
      h += "<script>\n";
      h += report_assets::ChartJs();
      h += "\n</script>\n";
    }
    h += "<script>\n";
    h += report_assets::ReportJs();
    h += "</script>\n</body>\n</html>\n";
    if (info_) {
      info_->bytes = h.size();
      info_->charts = Charts();
      info_->deflated = !encoded_.empty() && std::string(encoded_[0].codec) == "deflate";
      info_->data_bytes = data.size();
      info_->block_bytes = block_bytes;
    }
    return h;
  }

 private:
  bool Charts() const { return ReportHasCharts() && o_.inline_chartjs; }

  static std::string Shorten(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n) + "..."; }

  // ---- Bounding: which launches, steps, ranges and block pictures reach the page ----------------
  void Prepare() {
    summary_ = At(join_, "summary");
    const json& launches = At(join_, "launches");
    if (launches.is_array()) {
      for (size_t i = 0; i < launches.size(); ++i) {
        const json& l = launches[i];
        if (!l.is_object()) continue;
        int64_t id = Int(l, "id", static_cast<int64_t>(i));
        all_.push_back({id, &l});
        by_id_.emplace(id, &l);
      }
    }
    std::stable_sort(all_.begin(), all_.end(), [](const Launch& a, const Launch& b) {
      return Num(At(*a.j, "primary"), "dur_ns") > Num(At(*b.j, "primary"), "dur_ns");
    });
    rows_ = std::min(all_.size(), o_.max_launch_rows);
    launches_total_ = std::max<int64_t>(Int(join_, "launches_total", static_cast<int64_t>(all_.size())),
                                        static_cast<int64_t>(all_.size()));

    // Why slow: groups and the roles of their launches.
    const json& ws = At(join_, "why_slow");
    if (ws.is_array()) {
      for (size_t g = 0; g < ws.size() && g < o_.max_why_slow_groups; ++g) {
        const json& grp = ws[g];
        if (!grp.is_object()) continue;
        groups_.push_back(&grp);
        if (Has(grp, "reference")) role_.emplace(Int(grp, "reference"), "reference");
        for (const auto& s : At(grp, "slow")) {
          if (!Has(s, "launch")) continue;
          std::string r = "slow";
          if (Has(s, "ratio")) {
            char buf[32];
            std::snprintf(buf, sizeof buf, " %.2f\xC3\x97", Num(s, "ratio"));
            r += buf;
          }
          role_.emplace(Int(s, "launch"), r);
          verdicts_.emplace(Int(s, "launch"), &At(s, "verdicts"));
        }
      }
      groups_left_out_ = ws.size() - groups_.size();
    }

    // Block detail: in the join's order (reference and slow launches first), within both bounds.
    const json& bd = At(join_, "block_detail");
    uint64_t blocks = 0;
    if (bd.is_array()) {
      for (const auto& d : bd) {
        const json& rows = At(d, "blocks");
        uint64_t n = rows.is_array() ? rows.size() : 0;
        if (!Has(d, "launch") || detail_.size() >= o_.max_detail_launches || blocks + n > o_.max_detail_blocks) {
          ++detail_left_out_;
          continue;
        }
        report::EncodedBlocks e = report::EncodeBlocks(rows, o_.deflate_blocks);
        malformed_ += e.malformed;
        blocks += e.count;
        detail_.push_back({Int(d, "launch"), &d});
        detail_ids_.insert(Int(d, "launch"));
        encoded_.push_back(std::move(e));
      }
    }
    PrepareRequests();
    if (info_) {
      info_->request_rows = request_rows_.size();
      info_->request_steps = request_steps_.size();
      info_->launch_rows = rows_;
      info_->launches_total = static_cast<size_t>(launches_total_);
      info_->detail_launches = detail_.size();
      info_->detail_blocks = blocks;
      info_->detail_launches_left_out = detail_left_out_;
      info_->malformed_block_rows = malformed_;
    }
  }

  // A launch's id as a link that shows its blocks, or as plain text when it has no block detail.
  std::string LaunchRef(int64_t id) const {
    std::string text = "#" + std::to_string(id);
    if (detail_ids_.count(id))
      return "<a href=\"#blocks\" class=\"ts-show\" data-launch=\"" + std::to_string(id) + "\">" + text + "</a>";
    return "<span title=\"no block detail for this launch in the report\">" + text + "</span>";
  }

  // ---- Sections ------------------------------------------------------------------------------
  void Header(std::string& h) {
    const json& p = At(join_, "primary");
    const json& s = At(join_, "shadow");
    h += "<header>\n<h1>" + Esc(o_.title) + "</h1>\n";
    std::string cmd = CommandLine(At(p, "command_line"));
    if (!cmd.empty()) h += "<p class=\"cmd\"><code>" + Esc(cmd) + "</code></p>\n";
    h += "<table class=\"sources\"><tr><th></th><th>trace</th><th>pid</th><th>read</th><th>contents</th></tr>\n";
    auto side = [&](const char* name, const json& t, std::string contents) {
      const json& r = At(t, "read");
      std::string end = Str(r, "end", "unknown");
      bool complete = end == "complete";
      h += std::string("<tr><th>") + name + "</th><td><code>" + Esc(Str(t, "path", "-")) + "</code></td><td>" +
           Cell(At(t, "pid")) + "</td><td class=\"" + (complete ? "ok" : "warn") + "\">" + Esc(end) +
           (Str(r, "message").empty() ? "" : ": " + Esc(Str(r, "message"))) + "</td><td>" + contents + "</td></tr>\n";
    };
    side("primary", p, Cell(At(p, "kernels")) + " kernels, " + Cell(At(p, "launches")) + " launches");
    std::string sc = Cell(At(s, "launches_traced")) + " launches traced, " + Cell(At(s, "blocks")) + " blocks";
    if (At(s, "patterns").is_array() && !At(s, "patterns").empty()) {
      sc += "; patterns";
      for (const auto& pt : At(s, "patterns")) sc += " <code>" + Cell(pt) + "</code>";
    }
    std::string sampling = SamplingText();
    if (!sampling.empty()) sc += "; " + sampling;
    side("shadow", s, sc);
    h += "</table>\n";
    h += std::string("<nav><a href=\"#summary\">Summary</a>") +
         (requests_ ? "<a href=\"#requests\">Requests</a>" : "") +
         "<a href=\"#why-slow\">Why slow</a><a href=\"#blocks\">Blocks</a>"
         "<a href=\"#launches\">Launches</a><a href=\"#steps\">Steps</a><a href=\"#drift\">Drift</a>"
         "<a href=\"#loss\">Loss</a></nav>\n</header>\n";
  }

  // The primary's command: a string, or its arguments (quoted where a shell would need it).
  static std::string CommandLine(const json& c) {
    if (c.is_string()) return c.get<std::string>();
    std::string out;
    if (!c.is_array()) return out;
    for (const auto& a : c) {
      if (!a.is_string()) continue;
      std::string arg = a.get<std::string>();
      bool plain = !arg.empty() && arg.find_first_of(" \t\n'\"\\$`<>&|;()*?[]{}!#~") == std::string::npos;
      if (!plain) {
        std::string q = "'";
        for (char ch : arg) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
        arg = q + "'";
      }
      out += (out.empty() ? "" : " ") + arg;
    }
    return out;
  }

  std::string SamplingText() const {
    const json& sm = At(At(join_, "shadow"), "sampling");
    if (!sm.is_object() || sm.empty()) return "";
    std::string t = "sampling";
    for (auto it = sm.begin(); it != sm.end(); ++it) t += " " + Esc(it.key()) + "=" + Cell(it.value());
    return t;
  }

  void Card(std::string& h, const std::string& label, const std::string& value, const std::string& sub,
            const char* cls = "") {
    h += std::string("<div class=\"card ") + cls + "\"><div class=\"label\">" + label + "</div><div class=\"value\">" +
         value + "</div><div class=\"sub\">" + sub + "</div></div>\n";
  }

  void Summary(std::string& h) {
    const json& s = summary_;
    h += "<section id=\"summary\">\n<h2>Summary</h2>\n";
    if (!s.is_object()) {
      h += "<p class=\"warn\">The join holds no summary.</p>\n</section>\n";
      return;
    }
    int64_t shadow = Int(s, "shadow_launches"), exact = Int(s, "exact"), time_only = Int(s, "time_only");
    int64_t unmatched = Int(s, "unmatched_shadow");
    int64_t ptarget = Int(s, "primary_target_launches"), punmatched = Int(s, "primary_target_unmatched");
    const json& acc = At(s, "time_only_accuracy");
    int64_t evaluated = Int(acc, "evaluated"), agree = Int(acc, "agree");
    h += "<div class=\"cards\">\n";
    Card(h, "matched exactly", Count(exact), Percent(exact, shadow) + " of " + Count(shadow) + " shadow launches",
         exact == shadow && shadow > 0 ? "good" : "");
    Card(h, "matched by time only", Count(time_only),
         time_only ? "no key match; nearest launch of the same kernel, labelled <em>time</em>" : "none",
         time_only ? "warn" : "");
    Card(h, "shadow launches unmatched", Count(unmatched), unmatched ? "no primary kernel found" : "none",
         unmatched ? "bad" : "");
    std::string sampling = SamplingText();
    Card(h, "primary target launches without a shadow launch", Count(punmatched),
         "of " + Count(ptarget) + (sampling.empty() ? "" : " (shadow " + sampling + ")"));
    Card(h, "time-only accuracy", evaluated ? Percent(agree, evaluated) : "&ndash;",
         evaluated ? "a join by time alone picks the same kernel for " + Count(agree) + " of " + Count(evaluated) +
                         " exact matches"
                   : "not evaluated",
         evaluated && agree < evaluated ? "warn" : "");
    h += "</div>\n<ul class=\"facts\">\n";
    h += "<li>Target kernels: ";
    const json& tk = At(s, "target_kernels");
    if (tk.is_array() && !tk.empty()) {
      for (size_t i = 0; i < tk.size(); ++i) h += std::string(i ? ", " : "") + "<code>" + Cell(tk[i]) + "</code>";
    } else {
      h += "none named";
    }
    h += "</li>\n";
    h += "<li>Exact matches whose shape differs: " + Count(Int(s, "exact_shape_differs")) +
         "; paired in launch order among launches sharing one key (ambiguous): " + Count(Int(s, "exact_ambiguous")) +
         "</li>\n";
    if (Int(s, "primary_target_without_kernel"))
      h += "<li class=\"warn\">" + Count(Int(s, "primary_target_without_kernel")) +
           " primary launches of the targets have no kernel record (lost by CUPTI: see <a href=\"#loss\">Loss</a>)."
           "</li>\n";
    bool concurrent = Bool(At(join_, "options"), "concurrent");
    if (concurrent) {
      h += "<li class=\"warn\">Primary and shadow ran <strong>at the same time</strong>: " +
           Count(Int(s, "overlapped_primary_kernels")) +
           " primary kernels ran while the shadow had GPU work; their durations may include the shadow's time "
           "slices (flagged <em>overlapped</em> below).</li>\n";
    } else {
      h += "<li>Primary and shadow ran one after the other: the primary's timings are its own.</li>\n";
    }
    // What the reader should look at before trusting the answer.
    std::vector<std::string> warnings;
    for (const auto& w : At(join_, "warnings"))
      if (w.is_string()) warnings.push_back("The join: " + Esc(w.get<std::string>()) + ".");
    if (Int(s, "shadow_without_blocks"))
      warnings.push_back(Count(Int(s, "shadow_without_blocks")) +
                         " traced shadow launches have no block records (lost in the shadow: see its probe counters "
                         "under <a href=\"#loss\">Loss</a>).");
    for (const char* side : {"primary", "shadow"}) {
      const json& r = At(At(join_, side), "read");
      std::string end = Str(r, "end", "unknown");
      if (end != "complete")
        warnings.push_back(std::string("The ") + side + " trace was not read to its end (" + Esc(end) +
                           "): " + "what it held up to there was joined.");
      int64_t lost = 0;
      const json& loss = At(At(join_, side), "loss");
      if (loss.is_object())
        for (auto it = loss.begin(); it != loss.end(); ++it)
          if (!IsContextKey(it.key()) && it.value().is_number() && it.value().get<double>() != 0) ++lost;
      if (std::string(side) == "shadow") {
        const json& pc = At(At(join_, side), "probe_counters");
        if (pc.is_object())
          for (auto it = pc.begin(); it != pc.end(); ++it)
            if (!IsProbeContextKey(it.key()) && it.value().is_number() && it.value().get<double>() != 0) ++lost;
      }
      if (lost)
        warnings.push_back(std::string("The ") + side + " trace reports losses (" + Count(lost) +
                           " counters not zero): see <a href=\"#loss\">Loss</a>.");
    }
    if (DriftingRanges() > 0)
      warnings.push_back(Count(DriftingRanges()) +
                         " ranges drifted (launches matched by time only, unmatched, or with another shape): see "
                         "<a href=\"#drift\">Drift</a>.");
    for (const auto& w : warnings) h += "<li class=\"warn\">" + w + "</li>\n";
    h += "</ul>\n</section>\n";
  }

  static int64_t DriftOf(const json& d) { return Int(d, "time_only") + Int(d, "unmatched") + Int(d, "shape_differs"); }
  int64_t DriftingRanges() const {
    int64_t n = 0;
    for (const auto& d : At(join_, "drift"))
      if (DriftOf(d) > 0) ++n;
    return n;
  }

  // ---- Requests (a serving run: the join's "requests", docs/join.md) -------------------------------
  void PrepareRequests() {
    const json& rq = At(join_, "requests");
    if (!rq.is_object()) return;
    requests_ = &rq;
    const json& rows = At(rq, "rows");
    if (rows.is_array())
      for (const auto& r : rows)
        if (r.is_object() && request_rows_.size() < o_.max_request_rows) request_rows_.push_back(&r);
    std::map<int64_t, const json*> by_step;
    for (const auto& st : At(rq, "steps"))
      if (st.is_object() && Has(st, "step")) by_step.emplace(Int(st, "step"), &st);
    // The listed requests' steps, in their order, while the bound lasts.
    std::set<int64_t> kept;
    for (const json* r : request_rows_) {
      for (const auto& v : At(*r, "steps")) {
        if (!v.is_number_integer() || kept.size() >= o_.max_request_steps) continue;
        auto it = by_step.find(v.get<int64_t>());
        if (it != by_step.end() && kept.insert(it->first).second) request_steps_.push_back(it->second);
      }
    }
    for (size_t i = 0; i < request_rows_.size(); ++i) {
      size_t pictures = 0;
      for (const auto& v : At(*request_rows_[i], "steps")) {
        auto it = v.is_number_integer() ? by_step.find(v.get<int64_t>()) : by_step.end();
        if (it == by_step.end() || !kept.count(it->first)) continue;
        for (const auto& t : At(*it->second, "target_launches"))
          if (t.is_array() && t.size() == 3 && t[2].is_number_integer() && detail_ids_.count(t[2].get<int64_t>()))
            ++pictures;
      }
      request_pictures_[static_cast<int64_t>(i)] = pictures;
    }
  }

  static std::string Micros(const json& j, std::string_view key) {
    const json& v = At(j, key);
    return v.is_number() ? Duration(v.get<double>() * 1000.0) : "&ndash;";
  }

  void Requests(std::string& h) {
    if (!requests_) return;
    const json& rq = *requests_;
    const std::string trace = Str(At(rq, "source"), "trace");
    h += "<section id=\"requests\">\n<h2>Requests</h2>\n<p class=\"note\">Each request the server handled, from "
         "its request trace <code>" +
         Esc(trace) +
         "</code>: the steps it was in, the primary's GPU kernel time in those steps (shared with the other "
         "requests of each step; <em>share</em> splits each step's time by the tokens it fed), the target "
         "kernel's launches there and how many the shadow matched. Pick a request for its steps and the block "
         "pictures of its target launches.</p>\n";
    for (const auto& w : At(rq, "warnings"))
      if (w.is_string()) h += "<p class=\"warn\">" + Esc(w.get<std::string>()) + ".</p>\n";
    const int64_t total = Int(rq, "total", static_cast<int64_t>(request_rows_.size()));
    if (request_rows_.empty()) {
      h += "<p>The request trace holds no request.</p>\n</section>\n";
      return;
    }
    h += "<div class=\"table-wrap short\"><table class=\"requests\"><thead><tr><th>request</th><th "
         "class=\"num\">status</th><th class=\"num\">prompt</th><th class=\"num\">tokens</th><th "
         "class=\"num\">first token</th><th class=\"num\">done</th><th class=\"num\">steps</th><th "
         "class=\"num\">kernel time</th><th class=\"num\">share</th><th class=\"num\">target launches</th><th "
         "class=\"num\">matched</th><th class=\"num\">block pictures</th></tr></thead><tbody>\n";
    for (size_t i = 0; i < request_rows_.size(); ++i) {
      const json& r = *request_rows_[i];
      const int64_t status = Int(r, "status"), launches = Int(r, "target_launches"), exact = Int(r, "shadow_exact");
      const std::string steps = Count(Int(r, "prefill_steps")) + " + " + Count(Int(r, "decode_steps"));
      h += "<tr><td><a href=\"#requests\" class=\"ts-req\" data-request=\"" + std::to_string(i) + "\">" +
           Esc(Str(r, "id")) + "</a></td><td class=\"num" + (status == 200 ? "" : " bad") + "\">" +
           Cell(At(r, "status")) + "</td><td class=\"num\">" + Cell(At(r, "prompt_tokens")) +
           "</td><td class=\"num\">" + Cell(At(r, "completion_tokens")) + "</td><td class=\"num\">" +
           Micros(r, "first_token_us") + "</td><td class=\"num\">" + Micros(r, "done_us") +
           "</td><td class=\"num\" title=\"prefill + decode\">" + steps + "</td><td class=\"num\">" +
           DurCell(r, "kernel_ns") + "</td><td class=\"num\">" + DurCell(r, "kernel_share_ns") +
           "</td><td class=\"num\">" + Count(launches) + "</td><td class=\"num" + (exact < launches ? " warn" : "") +
           "\">" + Count(exact) + " (" + Percent(exact, launches) + ")</td><td class=\"num\">" +
           Count(static_cast<int64_t>(request_pictures_[static_cast<int64_t>(i)])) + "</td></tr>\n";
    }
    h += "</tbody></table></div>\n";
    if (total > static_cast<int64_t>(request_rows_.size()))
      h += "<p class=\"note\">The first " + Count(static_cast<int64_t>(request_rows_.size())) + " of " + Count(total) +
           " requests (the rest are in the join: <code>twinscope stats DIR --json</code>, \"requests\").</p>\n";
    h += "<div class=\"controls\"><label for=\"ts-request-select\">request</label> <select id=\"ts-request-select\">\n";
    for (size_t i = 0; i < request_rows_.size(); ++i) {
      const json& r = *request_rows_[i];
      std::string label = Str(r, "id") + " \xC2\xB7 " + Count(static_cast<int64_t>(At(r, "steps").size())) +
                          " steps \xC2\xB7 " + Duration(Num(r, "kernel_ns"));
      h += "<option value=\"" + std::to_string(i) + "\">" + Esc(label) + "</option>\n";
    }
    h += "</select></div>\n<div id=\"ts-request-detail\"></div>\n";
    if (request_steps_.size() >= o_.max_request_steps)
      h += "<p class=\"note\">Steps of the listed requests are kept up to " +
           Count(static_cast<int64_t>(o_.max_request_steps)) +
           "; later requests' steps past that are named but not detailed here.</p>\n";
    h += "</section>\n";
  }

  json RequestsData() const {
    json out = json::object();
    for (auto it = requests_->begin(); it != requests_->end(); ++it)
      if (it.key() != "rows" && it.key() != "steps") out[it.key()] = it.value();
    json rows = json::array(), steps = json::array();
    for (const json* r : request_rows_) rows.push_back(*r);
    for (const json* st : request_steps_) steps.push_back(*st);
    out["rows"] = std::move(rows);
    out["steps"] = std::move(steps);
    out["rows_in_report"] = request_rows_.size();
    out["steps_in_report"] = request_steps_.size();
    return out;
  }

  void WhySlow(std::string& h) {
    h += "<section id=\"why-slow\">\n<h2>Why slow</h2>\n"
         "<p class=\"note\">Per target kernel and shape, the slowest launches against the launch of median primary "
         "duration (the reference), compared on the shadow's block structure. " +
         std::string(kStretchNote) + "</p>\n";
    if (groups_.empty()) {
      h += Has(join_, "why_slow") ? "<p>No launch was slower than the median of its shape.</p>\n"
                                  : "<p class=\"warn\">The join holds no &ldquo;why slow&rdquo; answer.</p>\n";
    }
    for (const json* gp : groups_) {
      const json& g = *gp;
      h += "<div class=\"group\">\n<h3><code class=\"kernel\" title=\"" + Esc(Str(g, "kernel")) + "\">" +
           Esc(Str(g, "kernel")) + "</code> <span class=\"shape\">grid " + Dims(At(g, "grid")) + " block " +
           Dims(At(g, "block")) + "</span></h3>\n";
      h += "<p class=\"meta\">" + Count(Int(g, "launches")) + " launches of this shape; median primary duration " +
           DurCell(g, "median_dur_ns") + "; reference " +
           (Has(g, "reference") ? LaunchRef(Int(g, "reference")) : std::string("&ndash;")) + "</p>\n";
      const json& slow = At(g, "slow");
      if (!slow.is_array() || slow.empty()) {
        h += "<p>No launch of this shape is slower than its median.</p>\n</div>\n";
        continue;
      }
      h += "<table class=\"slow\"><thead><tr><th>launch</th><th class=\"num\">primary</th><th class=\"num\">vs "
           "median</th><th>verdict</th><th>what differs</th></tr></thead><tbody>\n";
      for (const auto& s : slow) {
        char ratio[32] = "&ndash;";
        if (At(s, "ratio").is_number()) std::snprintf(ratio, sizeof ratio, "%.2f\xC3\x97", Num(s, "ratio"));
        h += "<tr><td>" + (Has(s, "launch") ? LaunchRef(Int(s, "launch")) : std::string("&ndash;")) +
             "</td><td class=\"num\">" + DurCell(s, "dur_ns") + "</td><td class=\"num\">" + ratio + "</td><td>" +
             VerdictBadges(At(s, "verdicts")) + "</td><td>" + Esc(Str(s, "text")) + "</td></tr>\n";
      }
      h += "</tbody></table>\n</div>\n";
    }
    if (groups_left_out_)
      h += "<p class=\"note\">" + Count(groups_left_out_) + " more shape groups are in the join (twinscope stats " +
           "on the join lists them) but not in this report.</p>\n";
    h += "</section>\n";
  }

  void Blocks(std::string& h) {
    h += "<section id=\"blocks\">\n<h2>Blocks of one launch</h2>\n<p class=\"note\">" + std::string(kStretchNote) +
         "</p>\n";
    if (detail_.empty()) {
      h += "<p>No launch has block detail in this " +
           std::string(detail_left_out_ ? "report (over its bounds)." : "join.") + "</p>\n</section>\n";
      return;
    }
    h += "<div class=\"controls\"><button type=\"button\" id=\"ts-prev\" title=\"previous launch\">&larr;</button>"
         "<label for=\"ts-launch-select\">launch</label> <select id=\"ts-launch-select\">\n";
    for (size_t i = 0; i < detail_.size(); ++i) {
      int64_t id = detail_[i].id;
      auto lit = by_id_.find(id);
      std::string label = "#" + std::to_string(id);
      auto rit = role_.find(id);
      if (rit != role_.end()) label += " \xC2\xB7 " + rit->second;
      if (lit != by_id_.end()) label += " \xC2\xB7 " + Duration(Num(At(*lit->second, "primary"), "dur_ns"));
      auto vit = verdicts_.find(id);
      if (vit != verdicts_.end() && vit->second->is_array()) {
        std::string vs;
        for (const auto& v : *vit->second)
          if (v.is_string()) vs += (vs.empty() ? "" : ", ") + VerdictLabel(v.get<std::string>());
        if (!vs.empty()) label += " \xC2\xB7 " + vs;
      }
      label += " \xC2\xB7 " + Count(static_cast<int64_t>(encoded_[i].count)) + " blocks";
      if (lit != by_id_.end()) label += " \xC2\xB7 " + Shorten(Str(*lit->second, "kernel"), 60);
      h += "<option value=\"" + std::to_string(i) + "\">" + Esc(label) + "</option>\n";
    }
    h += "</select><button type=\"button\" id=\"ts-next\" title=\"next launch\">&rarr;</button></div>\n";
    if (detail_left_out_)
      h += "<p class=\"note\">" + Count(static_cast<int64_t>(detail_left_out_)) +
           " more launches have block detail in the join but are over this report's bounds (" +
           Count(static_cast<int64_t>(o_.max_detail_launches)) + " launches, " +
           Count(static_cast<int64_t>(o_.max_detail_blocks)) + " blocks).</p>\n";
    if (malformed_)
      h += "<p class=\"warn\">" + Count(static_cast<int64_t>(malformed_)) +
           " block rows of the join are not [block, sm, enter_ns, exit_ns, order] and are not shown.</p>\n";
    h += "<div id=\"ts-facts\" class=\"facts-grid\"></div>\n"
         "<figure><figcaption><strong>Block heatmap.</strong> One row per SM (the SM's concurrent blocks stacked "
         "inside its row), time on the horizontal axis from the launch's first block entry (shadow clock); each "
         "block is a bar from entry to exit, coloured by block index. The straggler is red; the shaded band is the "
         "tail (median exit to last exit).</figcaption>\n"
         "<div class=\"heat\"><canvas id=\"ts-heatmap\"></canvas><div class=\"tip\" hidden></div></div></figure>\n"
         "<figure><figcaption><strong>Arrival order.</strong> Block index against the order in which blocks "
         "entered; in-order blocks lie on the diagonal. The straggler is red.</figcaption>\n"
         "<div class=\"heat\"><canvas id=\"ts-order\"></canvas><div class=\"tip\" hidden></div></div></figure>\n"
         "<figure id=\"ts-ref-figure\" hidden><figcaption><strong>Reference launch</strong> <span "
         "id=\"ts-ref-label\"></span>: the launch of median duration of the same shape, drawn the same way "
         "(its own time axis).</figcaption>\n"
         "<div class=\"heat\"><canvas id=\"ts-heatmap-ref\"></canvas><div class=\"tip\" hidden></div></div>"
         "</figure>\n</section>\n";
  }

  void Launches(std::string& h) {
    h += "<section id=\"launches\">\n<h2>Launches, slowest first</h2>\n<p class=\"note\">";
    if (all_.empty()) {
      h += "The join holds no matched launches.</p>\n</section>\n";
      return;
    }
    h += "The " + Count(static_cast<int64_t>(rows_)) + " slowest of " + Count(launches_total_) +
         " matched launches by primary duration" +
         (static_cast<int64_t>(rows_) < launches_total_ ? " (the rest are in the join, not in this report)" : "") +
         ". Primary: start from the first kernel, duration (CUPTI). Shadow (shaded columns): blocks seen of expected, "
         "working blocks, SMs used, blocks per SM (min/median/max), Kendall tau of arrival vs index (1 = in order), "
         "the straggler block and its SM, the tail (last exit minus median exit) and the span. * " +
         kStretchNote +
         "</p>\n<p class=\"note\" id=\"ts-launch-status\"></p>\n"
         "<div class=\"table-wrap\" id=\"ts-launch-table\"></div>\n"
         "<noscript><p class=\"warn\">The table and the charts of this report are drawn by its script.</p></noscript>\n"
         "</section>\n";
  }

  void Steps(std::string& h) {
    const json& steps = At(join_, "steps");
    h += "<section id=\"steps\">\n<h2>Kernel time per step</h2>\n";
    if (!steps.is_array() || steps.empty()) {
      h += "<p>The join holds no per-step kernel time (the primary has no top-level NVTX ranges).</p>\n</section>\n";
      return;
    }
    double total = 0, target = 0;
    for (const auto& s : steps) {
      total += Num(s, "kernel_ns");
      target += Num(s, "target_ns");
    }
    int64_t steps_total = Int(join_, "steps_total", static_cast<int64_t>(steps.size()));
    h += "<p class=\"note\">The primary's GPU kernel time in each top-level NVTX range instance (CUPTI): the target "
         "kernels and all others. " +
         Count(static_cast<int64_t>(steps.size())) + " ranges" +
         (steps_total > static_cast<int64_t>(steps.size()) ? " (of " + Count(steps_total) + " in the run)" : "") +
         ", " + Duration(total) + " of kernel time, " + Duration(target) + " (" + Percent(target, total) +
         ") in the target kernels" +
         (steps.size() > o_.max_steps
              ? "; consecutive ranges are merged into " + Count(static_cast<int64_t>(o_.max_steps)) + " bars"
              : "") +
         ".</p>\n<div class=\"chart steps\"><canvas id=\"ts-steps\"></canvas></div>\n</section>\n";
  }

  // Drift rows as shown: drifting ranges first (most drift first), then the rest in order; past the bound
  // the remainder is summed into one row.
  std::vector<const json*> DriftRows(json* rest) const {
    std::vector<const json*> rows;
    for (const auto& d : At(join_, "drift"))
      if (d.is_object()) rows.push_back(&d);
    std::stable_sort(rows.begin(), rows.end(), [](const json* a, const json* b) {
      int64_t da = DriftOf(*a), db = DriftOf(*b);
      if ((da > 0) != (db > 0)) return da > 0;
      return da > db;
    });
    if (rows.size() > o_.max_drift_rows) {
      json r = {{"range", ""}, {"exact", 0}, {"time_only", 0}, {"unmatched", 0}, {"shape_differs", 0}};
      for (size_t i = o_.max_drift_rows; i < rows.size(); ++i)
        for (const char* k : {"exact", "time_only", "unmatched", "shape_differs"})
          r[k] = r[k].get<int64_t>() + Int(*rows[i], k);
      r["range"] = std::to_string(rows.size() - o_.max_drift_rows) + " more ranges";
      *rest = r;
      rows.resize(o_.max_drift_rows);
    }
    return rows;
  }

  void Drift(std::string& h) {
    h += "<section id=\"drift\">\n<h2>Drift</h2>\n<p class=\"note\">Per top-level NVTX range instance: the shadow's "
         "target launches matched exactly by launch key, matched by time only, not matched, and exact matches "
         "whose grid/block shape differs (the two runs diverged there). Drifting ranges first.</p>\n";
    const json& s = summary_;
    json rest;
    std::vector<const json*> rows = DriftRows(&rest);
    h += "<div class=\"table-wrap short\"><table class=\"drift\"><thead><tr><th>range</th><th class=\"num\">exact</th>"
         "<th class=\"num\">time only</th><th class=\"num\">unmatched</th><th class=\"num\">shape differs</th>"
         "</tr></thead><tbody>\n";
    auto row = [&](const std::string& name, int64_t e, int64_t t, int64_t u, int64_t sd, const char* cls) {
      h += std::string("<tr class=\"") + cls + "\"><td>" + name + "</td><td class=\"num\">" + Count(e) +
           "</td><td class=\"num" + (t ? " warn" : "") + "\">" + Count(t) + "</td><td class=\"num" + (u ? " bad" : "") +
           "\">" + Count(u) + "</td><td class=\"num" + (sd ? " warn" : "") + "\">" + Count(sd) + "</td></tr>\n";
    };
    row("<strong>all</strong>", Int(s, "exact"), Int(s, "time_only"), Int(s, "unmatched_shadow"),
        Int(s, "exact_shape_differs"), "total");
    for (const json* d : rows)
      row(Esc(Str(*d, "range")), Int(*d, "exact"), Int(*d, "time_only"), Int(*d, "unmatched"), Int(*d, "shape_differs"),
          DriftOf(*d) ? "drifting" : "");
    if (rest.is_object())
      row(Esc(Str(rest, "range")), Int(rest, "exact"), Int(rest, "time_only"), Int(rest, "unmatched"),
          Int(rest, "shape_differs"), "rest");
    h += "</tbody></table></div>\n";
    if (rows.empty()) h += "<p>The join holds no per-range drift (no top-level NVTX ranges).</p>\n";
    int64_t drift_total = Int(join_, "drift_total", 0), drift_in = static_cast<int64_t>(At(join_, "drift").size());
    if (drift_total > drift_in)
      h += "<p class=\"note\">" + Count(drift_total - drift_in) +
           " more ranges are in the run but not in the join's bounded copy (all of them are in the total).</p>\n";
    h += "</section>\n";
  }

  void Loss(std::string& h) {
    h += "<section id=\"loss\">\n<h2>Loss</h2>\n<p class=\"note\">Each trace's own loss accounting (as "
         "<code>twinscope stats</code> shows it). Any non-zero count means data is missing from that side.</p>\n";
    const json& pl = At(At(join_, "primary"), "loss");
    const json& sl = At(At(join_, "shadow"), "loss");
    std::vector<std::string> keys;
    std::set<std::string> seen;
    for (const json* l : {&pl, &sl})
      if (l->is_object())
        for (auto it = l->begin(); it != l->end(); ++it)
          if (seen.insert(it.key()).second) keys.push_back(it.key());
    std::stable_partition(keys.begin(), keys.end(), [](const std::string& k) { return !IsContextKey(k); });
    if (keys.empty()) {
      h += "<p class=\"warn\">The join holds no loss counters.</p>\n</section>\n";
      return;
    }
    h += "<table class=\"loss\"><thead><tr><th>counter</th><th class=\"num\">primary</th><th "
         "class=\"num\">shadow</th></tr></thead><tbody>\n";
    for (const auto& k : keys) {
      auto cell = [&](const json& l) {
        const json& v = At(l, k);
        bool bad = !IsContextKey(k) && v.is_number() && v.get<double>() != 0;
        return std::string("<td class=\"num") + (bad ? " bad" : "") + "\">" + (l.contains(k) ? Cell(v) : "") + "</td>";
      };
      h += "<tr" + std::string(IsContextKey(k) ? " class=\"ctx\"" : "") + "><td><code>" + Esc(k) + "</code></td>" +
           cell(pl) + cell(sl) + "</tr>\n";
    }
    h += "</tbody></table>\n";
    ProbeCounters(h);
    h += "</section>\n";
  }

  // Counters of the shadow's block probe (docs/block-probe.md, "Nothing is lost silently"): those that
  // count work done rather than work lost.
  static bool IsProbeContextKey(const std::string& k) {
    return k == "launches_seen" || k == "launches_traced" || k == "launches_skipped_by_sampling" ||
           k == "modules_loaded" || k == "modules_patched" || k == "sanitizer_callbacks" || k == "blocks_expected" ||
           k == "blocks_recorded" || k == "blocks_decoder_waits" || k == "drains";
  }
  void ProbeCounters(std::string& h) {
    const json& pc = At(At(join_, "shadow"), "probe_counters");
    if (!pc.is_object() || pc.empty()) return;
    std::vector<std::string> keys;
    for (auto it = pc.begin(); it != pc.end(); ++it) keys.push_back(it.key());
    std::stable_partition(keys.begin(), keys.end(), [](const std::string& k) { return !IsProbeContextKey(k); });
    h += "<p class=\"note\">The shadow's block probe counters: launches it saw, traced and skipped, and blocks it "
         "could not record.</p>\n<table class=\"loss\"><thead><tr><th>probe counter</th><th "
         "class=\"num\">shadow</th></tr></thead><tbody>\n";
    for (const auto& k : keys) {
      const json& v = pc[k];
      bool bad = !IsProbeContextKey(k) && v.is_number() && v.get<double>() != 0;
      h += "<tr" + std::string(IsProbeContextKey(k) ? " class=\"ctx\"" : "") + "><td><code>" + Esc(k) +
           "</code></td><td class=\"num" + (bad ? " bad" : "") + "\">" + Cell(v) + "</td></tr>\n";
    }
    h += "</tbody></table>\n";
  }

  void Footer(std::string& h) {
    h += "<footer><p>Written by twinscope from a join (format " + Esc(Str(join_, "format")) + " version " +
         Cell(At(join_, "version")) + "). ";
    if (Charts())
      h += "Charts by Chart.js " + Esc(report_assets::kChartJsVersion) + " (MIT licence), inlined.";
    else
      h += "Built without Chart.js: the step chart is replaced by a note.";
    h += "</p></footer>\n";
  }

  // ---- The data the page's script draws from -------------------------------------------------
  json Data() const {
    json d = json::object();
    for (auto it = join_.begin(); it != join_.end(); ++it) {
      const std::string& k = it.key();
      if (k == "launches" || k == "block_detail" || k == "steps" || k == "drift" || k == "why_slow" || k == "requests")
        continue;
      d[k] = it.value();
    }
    // Launches: the table's rows, then any other launch the block detail or why-slow refers to.
    json launches = json::array();
    std::set<int64_t> in;
    for (size_t r = 0; r < rows_; ++r) {
      launches.push_back(*all_[r].j);
      in.insert(all_[r].id);
    }
    auto add = [&](int64_t id) {
      auto it = by_id_.find(id);
      if (it != by_id_.end() && in.insert(id).second) launches.push_back(*it->second);
    };
    for (const auto& dl : detail_) add(dl.id);
    for (const auto& [id, role] : role_) add(id);
    d["launches"] = std::move(launches);
    json ws = json::array();
    for (const json* g : groups_) ws.push_back(*g);
    d["why_slow"] = std::move(ws);
    json rest;
    json drift = json::array();
    for (const json* r : DriftRows(&rest)) drift.push_back(*r);
    if (rest.is_object()) drift.push_back(rest);
    d["drift"] = std::move(drift);
    d["steps"] = StepsData();
    if (requests_) d["requests"] = RequestsData();
    json detail = json::array();
    for (size_t i = 0; i < detail_.size(); ++i) {
      const auto& e = encoded_[i];
      detail.push_back({{"launch", detail_[i].id},
                        {"element", "ts-blocks-" + std::to_string(i)},
                        {"count", e.count},
                        {"t0_ns", e.t0_ns},
                        {"unit_ns", e.unit_ns},
                        {"order_implicit", e.order_implicit},
                        {"codec", e.codec},
                        {"role", role_.count(detail_[i].id) ? role_.at(detail_[i].id) : ""}});
    }
    json& r = d["report"];
    r["detail"] = std::move(detail);
    r["launch_rows"] = rows_;
    r["launches_total"] = launches_total_;
    r["detail_left_out"] = detail_left_out_;
    r["chartjs"] = Charts() ? std::string(report_assets::kChartJsVersion) : std::string();
    r["stretch_note"] = std::string(kStretchNote);
    return d;
  }

  // The steps as bars: at most max_steps, consecutive ranges merged (summed) beyond that.
  json StepsData() const {
    const json& steps = At(join_, "steps");
    json out = json::array();
    if (!steps.is_array()) return out;
    size_t n = steps.size(), bars = std::min(n, std::max<size_t>(o_.max_steps, 1));
    for (size_t b = 0; b < bars; ++b) {
      size_t lo = b * n / bars, hi = (b + 1) * n / bars;
      if (hi - lo == 1) {
        out.push_back(steps[lo]);
        continue;
      }
      json bar = {{"range", Str(steps[lo], "range") + " \xE2\x80\xA6 " + Str(steps[hi - 1], "range")},
                  {"steps", hi - lo}};
      double kernels = 0, kernel_ns = 0, target_ns = 0;
      for (size_t i = lo; i < hi; ++i) {
        kernels += Num(steps[i], "kernels");
        kernel_ns += Num(steps[i], "kernel_ns");
        target_ns += Num(steps[i], "target_ns");
      }
      bar["kernels"] = kernels;
      bar["kernel_ns"] = kernel_ns;
      bar["target_ns"] = target_ns;
      out.push_back(std::move(bar));
    }
    return out;
  }

  const json& join_;
  const ReportOptions& o_;
  ReportInfo* info_;
  json summary_;
  std::vector<Launch> all_;
  std::map<int64_t, const json*> by_id_;
  size_t rows_ = 0;
  int64_t launches_total_ = 0;
  std::vector<const json*> groups_;
  size_t groups_left_out_ = 0;
  std::map<int64_t, std::string> role_;
  std::map<int64_t, const json*> verdicts_;
  std::vector<Launch> detail_;
  std::set<int64_t> detail_ids_;
  std::vector<report::EncodedBlocks> encoded_;
  size_t detail_left_out_ = 0;
  uint64_t malformed_ = 0;
  const json* requests_ = nullptr;              // the join's "requests" (a serving run), or null
  std::vector<const json*> request_rows_;       // listed, in the trace's order
  std::vector<const json*> request_steps_;      // steps of the listed requests, within the bound
  std::map<int64_t, size_t> request_pictures_;  // listed request -> its target launches with block detail
};

}  // namespace

bool ReportHasCharts() { return report_assets::kChartJsSize > 0; }

StatusOr<std::string> RenderReport(const json& join, const ReportOptions& options, ReportInfo* info) {
  if (!join.is_object() || Str(join, "format") != "twinscope-join")
    return Status::Error(
        "not a joined model: the report needs the JSON of `twinscope join` (format "
        "\"twinscope-join\", docs/join.md)");
  if (Int(join, "version", -1) != 1)
    return Status::Error("joined model version " + At(join, "version").dump() +
                         " is not one this report knows (1): use the twinscope that wrote the join");
  Renderer r(join, options, info);
  return r.Render();
}

Status WriteReport(const json& join, const std::string& path, const ReportOptions& options, ReportInfo* info) {
  StatusOr<std::string> html = RenderReport(join, options, info);
  if (!html.ok()) return html.status();
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return Status::Error(path + ": cannot write the report (" + std::strerror(errno) + ")");
    f.write(html->data(), static_cast<std::streamsize>(html->size()));
    f.close();
    if (!f) {
      std::remove(tmp.c_str());
      return Status::Error(path + ": writing the report failed (disk full?)");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = std::strerror(errno);
    std::remove(tmp.c_str());
    return Status::Error(path + ": cannot replace the report (" + err + ")");
  }
  return Status::Ok();
}

}  // namespace twinscope
