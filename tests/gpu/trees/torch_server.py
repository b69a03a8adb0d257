"""A tiny PyTorch HTTP server for `twinscope twin --serve` on the GPU machine: GET /health, POST /work
runs NVTX-ranged steps of silu and a matmul on the GPU. On SIGTERM it leaves through os._exit, as some
serving engines do: no atexit handler runs, so a tracer's summary exists only if it was written at the
stop request.

usage: torch_server.py --port PORT
"""
import argparse
import json
import os
import signal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch

DEV = torch.device("cuda")
W = torch.randn(1024, 1024, device=DEV) / 32
STEP = [0]


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def _reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._reply(200 if self.path == "/health" else 404, {"ok": self.path == "/health"})

    def do_POST(self):
        n = int(self.headers.get("content-length", "0"))
        self.rfile.read(n)
        x = torch.randn(512, 1024, device=DEV)
        for _ in range(4):
            torch.cuda.nvtx.range_push(f"decode step {STEP[0]}")
            STEP[0] += 1
            x = torch.nn.functional.silu(x @ W)
            torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        self._reply(200, {"sum": float(x.sum())})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    ThreadingHTTPServer(("127.0.0.1", a.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
