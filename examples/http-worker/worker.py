#!/usr/bin/env python3
"""A keel HTTP-target worker in plain Python (standard library only).

keel serve POSTs each task's JSON payload here, with the headers
Keel-Task-Id, Keel-Attempt, Keel-Delivery (never repeats for a task, unlike
Keel-Attempt), Keel-Task-Type and Idempotency-Key. Answer 2xx
when the work is done (a JSON body becomes the task's result), 408/429/5xx
to have keel retry it with backoff (Retry-After is honoured), any other 4xx
to dead-letter it at once.

    python3 examples/http-worker/worker.py 8081
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Worker(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            payload = json.loads(body or b"null")
        except ValueError:
            self.send_response(400)  # a payload we can never handle: dead at once
            self.end_headers()
            return
        task = self.headers["Keel-Task-Id"]
        attempt = self.headers["Keel-Attempt"]
        delivery = self.headers["Keel-Delivery"]
        print(f"task {task} attempt {attempt} delivery {delivery}: {payload}", flush=True)
        result = json.dumps({"greeting": f"hello, {(payload or {}).get('name', 'world')}"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(result)))
        self.end_headers()
        self.wfile.write(result)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8081
    ThreadingHTTPServer(("127.0.0.1", port), Worker).serve_forever()
