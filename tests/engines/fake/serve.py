"""The fake continuous-batching engine behind a tiny OpenAI-style HTTP server, as `transformers serve` puts it: GET /health, POST /v1/chat/completions (streamed or not), the client's X-Request-Id kept as the engine's request id; SIGTERM/SIGINT stop it cleanly (tests/engines)."""

import argparse
import json
import os
import signal
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import transformers  # noqa: F401  (the package first, as transformers serve imports it)
from transformers.generation.continuous_batching import continuous_api


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=int(os.environ.get("TWINSCOPE_PORT", "0") or 0))
    # transformers serve's own names too (--cb-num-blocks, --cb-max-batch-tokens: what `twin` copies between the sides).
    ap.add_argument("--num-blocks", "--cb-num-blocks", dest="num_blocks", type=int, default=64)
    ap.add_argument("--max-batch-tokens", "--cb-max-batch-tokens", dest="max_batch_tokens", type=int, default=32)
    a = ap.parse_args()
    m = continuous_api.ContinuousBatchingManager(num_blocks=a.num_blocks, max_batch_tokens=a.max_batch_tokens)
    m.start()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _send(self, code, body, ctype="application/json", rid=None):
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            if rid:
                self.send_header("X-Request-Id", rid)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/health":
                self._send(200, '{"status":"ok"}')
            else:
                self._send(404, '{"error":"not found"}')

        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(n) or b"{}")
            except ValueError:
                return self._send(400, '{"error":"the body is not JSON"}')
            rid = self.headers.get("X-Request-Id") or str(uuid.uuid4())
            text = " ".join(str(x.get("content", "")) for x in body.get("messages") or []) or str(body.get("prompt", ""))
            prompt = [(7 * i + len(w)) % 40 + 1 for i, w in enumerate(text.split() or ["x"])]
            m.add_request(prompt, request_id=rid, max_new_tokens=int(body.get("max_tokens") or 16))
            m.done[rid].wait(120)
            tokens = m.results.get(rid)
            if tokens is None:
                return self._send(500, json.dumps({"error": "the engine did not finish the request"}), rid=rid)
            usage = {"prompt_tokens": len(prompt), "completion_tokens": len(tokens)}
            if body.get("stream"):
                chunks = ["data: " + json.dumps({"choices": [{"delta": {"content": "t%d " % t}}]}) for t in tokens]
                chunks.append("data: " + json.dumps({"choices": [], "usage": usage}))
                chunks.append("data: [DONE]")
                return self._send(200, "\n\n".join(chunks) + "\n\n", "text/event-stream", rid)
            text = "".join("t%d " % t for t in tokens)
            self._send(200, json.dumps({"choices": [{"message": {"content": text}}], "usage": usage}), rid=rid)

    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    srv.daemon_threads = True

    def stop(signum, frame):
        threading.Thread(target=srv.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    sys.stderr.write("fake engine: serving on port %d\n" % srv.server_address[1])
    sys.stderr.flush()
    srv.serve_forever()
    m.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
