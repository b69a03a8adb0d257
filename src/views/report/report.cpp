// Renders the join's typed document (src/views/join_doc.h) as one self-contained HTML report (docs/report.md).
// Text and tables are written by the Renderer (renderer.h), escaped; the charts are drawn by
// assets/report.js from a bounded copy of the model embedded as JSON, and the block detail from
// report::EncodeBlocks' compact form. This file: the entry points and the page skeleton (head, inlined
// CSS, JS and Chart.js, header, footer).
#include "views/report/report.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string_view>

#include "views/report/html.h"
#include "views/report/renderer.h"
#include "views/report/report_assets.h"

namespace twinscope {
namespace report {
namespace {

// The primary's command: a string, or its arguments (quoted where a shell would need it).
std::string CommandLine(const views::CommandLineDoc& c) {
  if (c.text) return *c.text;
  std::string out;
  for (std::string arg : c.args) {
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

}  // namespace

std::string Renderer::Render() {
  Prepare();
  std::string h;
  h.reserve(1 << 20);
  std::string targets;
  if (summary_)
    for (const auto& t : summary_->target_kernels) targets += (targets.empty() ? "" : ", ") + t;
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
  Processes(h);
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
  std::string data = JsonForScript(Data());
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

void Renderer::Header(std::string& h) {
  const std::optional<views::PrimarySideDoc>& p = join_.primary;
  const std::optional<views::ShadowSideDoc>& s = join_.shadow;
  h += "<header>\n<h1>" + Esc(o_.title) + "</h1>\n";
  std::string cmd = p ? CommandLine(p->command_line) : "";
  if (!cmd.empty()) h += "<p class=\"cmd\"><code>" + Esc(cmd) + "</code></p>\n";
  h += "<table class=\"sources\"><tr><th></th><th>trace</th><th>pid</th><th>read</th><th>contents</th></tr>\n";
  // A side the join does not have: no path, pid or read.
  auto side = [&](const char* name, const std::string* path, const std::optional<int64_t>& pid, const views::ReadDoc& r,
                  std::string contents) {
    bool complete = r.end == "complete";
    h += std::string("<tr><th>") + name + "</th><td><code>" + Esc(path ? *path : "-") + "</code></td><td>" + Cell(pid) +
         "</td><td class=\"" + (complete ? "ok" : "warn") + "\">" + Esc(r.end) +
         (r.message.empty() ? "" : ": " + Esc(r.message)) + "</td><td>" + contents + "</td></tr>\n";
  };
  const views::ReadDoc unread;
  if (p)
    side("primary", &p->path, p->pid, p->read, Cell(p->kernels) + " kernels, " + Cell(p->launches) + " launches");
  else
    side("primary", nullptr, std::nullopt, unread, "&ndash; kernels, &ndash; launches");
  std::string sc = s ? Cell(s->launches_traced) + " launches traced, " + Cell(s->blocks) + " blocks"
                     : "&ndash; launches traced, &ndash; blocks";
  if (s && !s->patterns.empty()) {
    sc += "; patterns";
    for (const auto& pt : s->patterns) sc += " <code>" + Esc(pt) + "</code>";
  }
  std::string sampling = SamplingText();
  if (!sampling.empty()) sc += "; " + sampling;
  if (s)
    side("shadow", &s->path, s->pid, s->read, sc);
  else
    side("shadow", nullptr, std::nullopt, unread, sc);
  h += "</table>\n";
  h += std::string("<nav><a href=\"#summary\">Summary</a>") +
       (o_.processes ? "<a href=\"#processes\">Processes</a>" : "") +
       (requests_ ? "<a href=\"#requests\">Requests</a>" : "") +
       "<a href=\"#why-slow\">Why slow</a><a href=\"#blocks\">Blocks</a>"
       "<a href=\"#launches\">Launches</a><a href=\"#steps\">Steps</a><a href=\"#drift\">Drift</a>"
       "<a href=\"#loss\">Loss</a></nav>\n</header>\n";
}

void Renderer::Footer(std::string& h) {
  h += "<footer><p>Written by twinscope from a join (format " + Esc(views::kJoinFormat) + " version " +
       Cell(views::kJoinVersion) + "). ";
  if (Charts())
    h += "Charts by Chart.js " + Esc(report_assets::kChartJsVersion) + " (MIT licence), inlined.";
  else
    h += "Charts drawn by the report's own code (built without Chart.js).";
  h += "</p></footer>\n";
}

}  // namespace report

bool ReportHasCharts() { return report_assets::kChartJsSize > 0; }

StatusOr<std::string> RenderReport(const views::JoinDoc& join, const ReportOptions& options, ReportInfo* info) {
  report::Renderer r(join, options, info);
  return r.Render();
}

StatusOr<std::string> RenderReport(const nlohmann::json& join, const ReportOptions& options, ReportInfo* info) {
  StatusOr<views::JoinDoc> doc = views::JoinDocFromJson(join);
  if (!doc.ok()) return doc.status();
  return RenderReport(*doc, options, info);
}

namespace {

Status WriteHtml(StatusOr<std::string> html, const std::string& path) {
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

}  // namespace

Status WriteReport(const views::JoinDoc& join, const std::string& path, const ReportOptions& options,
                   ReportInfo* info) {
  return WriteHtml(RenderReport(join, options, info), path);
}

Status WriteReport(const nlohmann::json& join, const std::string& path, const ReportOptions& options,
                   ReportInfo* info) {
  return WriteHtml(RenderReport(join, options, info), path);
}

}  // namespace twinscope
