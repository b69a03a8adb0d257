// Helpers for the demo server's tests: a fake-engine server on loopback
// (ServingCore + CpuEngine + HttpServer), a blocking HTTP client, raw socket
// exchanges for malformed requests, and an SSE reply splitter.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "net/beast.h"
#include "server/cpu_engine.h"
#include "server/http_server.h"
#include "server/serving.h"
#include "server/text.h"

namespace twinscope::demo::testing {

inline ModelShape TinyModel() {
  auto m = ModelPreset("small");
  return *m;
}

inline CpuEngineOptions TinyEngine(std::chrono::microseconds step = std::chrono::microseconds(500),
                                   int max_batch = 16) {
  CpuEngineOptions o;
  o.model = TinyModel();
  o.block_size = 16;
  o.num_blocks = 2048;
  o.max_batch = max_batch;
  o.max_step_tokens = 4096;
  o.max_model_len = 2048;
  o.graph_sizes = DefaultGraphSizes(max_batch);
  o.step_time = step;
  return o;
}

// Records every step an engine ran (thread-safe).
struct StepRecorder {
  std::mutex mu;
  std::vector<EngineStep> steps;
  void Attach(CpuEngine& e) {
    e.on_step = [this](const EngineStep& s) {
      std::lock_guard<std::mutex> lock(mu);
      steps.push_back(s);
    };
  }
  std::vector<EngineStep> Get() {
    std::lock_guard<std::mutex> lock(mu);
    return steps;
  }
};

template <typename Pred>
bool WaitUntil(Pred pred, std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return pred();
}

// A demo server with the CPU engine, on 127.0.0.1:<ephemeral>.
struct FakeServer {
  explicit FakeServer(ServingOptions so = {}, CpuEngineOptions eo = TinyEngine(), HttpOptions ho = {})
      : engine(eo), core(so, engine) {
    recorder.Attach(engine);
    ho.port = 0;
    http = std::make_unique<HttpServer>(ho, core);
    Status s = core.Start();
    EXPECT_TRUE(s.ok()) << s.message();
    s = http->Start();
    EXPECT_TRUE(s.ok()) << s.message();
  }
  ~FakeServer() { Stop(); }
  void Stop() {
    if (stopped) return;
    stopped = true;
    core.Drain();
    core.Wait();
    // As main does: a live follower gets the schedule's end line before the doors close.
    WaitUntil(
        [&] { return !http->schedule_polled_recently(std::chrono::milliseconds(500)) || http->schedule_end_served(); },
        std::chrono::milliseconds(3000));
    http->Shutdown();
    if (!http->WaitFor(std::chrono::seconds(5))) {
      http->ShutdownNow();
      http->Wait();
    }
  }
  uint16_t port() const { return http->port(); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port()); }

  CpuEngine engine;
  StepRecorder recorder;
  ServingCore core;
  std::unique_ptr<HttpServer> http;
  bool stopped = false;
};

struct Reply {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;
  std::string error;  // transport error
};

// One request on a fresh connection (blocking, 10 s deadline).
inline Reply Request(uint16_t port, http::verb method, const std::string& target, const std::string& body = "",
                     const std::vector<std::pair<std::string, std::string>>& headers = {}) {
  Reply r;
  try {
    asio::io_context ioc;
    beast::tcp_stream s(ioc);
    s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    http::request<http::string_body> req{method, target, 11};
    req.set(http::field::host, "127.0.0.1");
    for (const auto& [k, v] : headers) req.set(k, v);
    req.body() = body;
    if (!body.empty() || method == http::verb::post) req.prepare_payload();
    http::write(s, req);
    beast::flat_buffer buf;
    http::response_parser<http::string_body> p;
    p.body_limit(64u << 20);
    http::read(s, buf, p);
    r.status = p.get().result_int();
    r.body = p.get().body();
    for (const auto& f : p.get()) r.headers[std::string(f.name_string())] = std::string(f.value());
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

inline Reply Post(uint16_t port, const std::string& body,
                  const std::vector<std::pair<std::string, std::string>>& headers = {}) {
  auto h = headers;
  h.push_back({"Content-Type", "application/json"});
  return Request(port, http::verb::post, "/v1/chat/completions", body, h);
}

// Sends raw bytes, reads until the server closes (or 5 s); returns what came back.
inline std::string RawExchange(uint16_t port, const std::string& bytes, bool half_close = true) {
  asio::io_context ioc;
  tcp::socket s(ioc);
  s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  asio::write(s, asio::buffer(bytes));
  if (half_close) s.shutdown(tcp::socket::shutdown_send);
  std::string out;
  std::array<char, 4096> buf;
  beast::error_code ec;
  // A plain blocking read loop; the server closes after an error reply.
  struct timeval tv {
    5, 0
  };
  setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  for (;;) {
    size_t n = s.read_some(asio::buffer(buf), ec);
    if (ec) break;
    out.append(buf.data(), n);
  }
  return out;
}

inline int StatusOfRaw(const std::string& reply) {
  if (reply.rfind("HTTP/1.1 ", 0) != 0 || reply.size() < 12) return 0;
  return std::stoi(reply.substr(9, 3));
}

// The data payloads of an SSE body.
inline std::vector<std::string> SseData(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    size_t end = body.find("\n\n", pos);
    out.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end;
  }
  return out;
}

// The reply a demo server gives a one-message chat request.
inline std::string ExpectedFor(const std::string& content, uint64_t seed, int max_tokens, int vocab) {
  auto prompt = TokenizeChat({{"user", content}}, vocab);
  return ExpectedReply(RequestSampleSeed(seed, prompt), max_tokens, vocab);
}

inline std::string ChatBody(const std::string& content, int max_tokens, bool stream,
                            std::optional<uint64_t> seed = {}) {
  nlohmann::json j = {{"model", "m"},
                      {"messages", {{{"role", "user"}, {"content", content}}}},
                      {"max_tokens", max_tokens},
                      {"stream", stream}};
  if (seed) j["seed"] = *seed;
  return j.dump();
}

}  // namespace twinscope::demo::testing
