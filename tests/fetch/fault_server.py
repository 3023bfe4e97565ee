#!/usr/bin/python3
"""A loopback HTTP server that injects the faults a crawler meets, for fetcher_test.cc.

Run: /usr/bin/python3 fault_server.py [DATA_DIR]. Binds 127.0.0.1:0 and prints the
port on the first line of stdout. Every request is logged (path with query -> count);
GET /__log returns the log as JSON (with "referers": path -> Referer header, for requests
that sent one), GET /__reset clears it.

Routes (<name> is a file in DATA_DIR, default Debian's OpenCV sample photos):
  /img/<name>             200, the file as image/jpeg (query strings ignored)
  /redirect/<name>        302 to /img/<name>
  /404, /410              that status
  /500-then-200/<key>     500 the first time per key, then 200 with messi5.jpg
  /429/<key>              429 with Retry-After: 1 the first time per key, then 200
  /503-date/<key>         503 with an HTTP-date Retry-After (30 s ahead), every time
  /503-forever/<key>      503 with Retry-After: 999999999 (31 years), every time
  /503-far-date/<key>     503 with an HTTP-date Retry-After ten years ahead, every time
  /drip                   a JPEG head, then one byte every 100 ms, never ending
  /slow                   sleeps 10 s before answering
  /cut                    declares Content-Length 100000, sends 1000 bytes, closes
  /big                    starry_night.jpg (~300 KB) with Content-Length
  /big-chunked            a JPEG head then filler, chunked (no Content-Length), up to
                          200 MB; logs how many bytes it managed to send under "sent"
  /loop                   302 to /loop
  /to-file                302 to file:///etc/passwd
  /html-as-jpeg           an HTML page with Content-Type: image/jpeg
  /conc/<key>/<name>      like /img but holds the request 100 ms; "max_concurrent"
                          in the log is the most such requests in progress at once
"""
import email.utils
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

DATA = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/doc/opencv-doc/examples/data"
LOCK = threading.Lock()
STATE = {"counts": {}, "sent": {}, "concurrent": 0, "max_concurrent": 0, "referers": {}}


def read(name):
    with open(os.path.join(DATA, os.path.basename(name)), "rb") as f:
        return f.read()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers do

    def log_message(self, *args):
        pass

    def start_reply(self, code, ctype="image/jpeg", headers=()):
        """The status line and headers (Content-Type, then `headers`), ended."""
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()

    def send_body(self, code, body, ctype="image/jpeg", headers=()):
        self.start_reply(code, ctype, (("Content-Length", str(len(body))),) + tuple(headers))
        self.wfile.write(body)

    def redirect(self, location):
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        path = urlsplit(self.path).path
        if path == "/__log":
            with LOCK:
                body = json.dumps(STATE).encode()
            return self.send_body(200, body, "application/json")
        if path == "/__reset":
            with LOCK:
                STATE.update(counts={}, sent={}, concurrent=0, max_concurrent=0, referers={})
            return self.send_body(200, b"{}", "application/json")
        with LOCK:
            n = STATE["counts"].get(self.path, 0) + 1
            STATE["counts"][self.path] = n
            if self.headers.get("Referer"):
                STATE["referers"][self.path] = self.headers.get("Referer")
        parts = path.strip("/").split("/")
        try:
            self.route(parts, n)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def route(self, parts, n):
        head = parts[0]
        if head == "img" and len(parts) == 2:
            return self.send_body(200, read(parts[1]))
        if head == "redirect":
            return self.redirect("/img/" + parts[1])
        if head in ("404", "410"):
            return self.send_body(int(head), b"<html>gone</html>", "text/html")
        if head == "500-then-200":
            if n == 1:
                return self.send_body(500, b"oops", "text/plain")
            return self.send_body(200, read("messi5.jpg"))
        if head == "429":
            if n == 1:
                return self.send_body(429, b"slow down", "text/plain", [("Retry-After", "1")])
            return self.send_body(200, read("messi5.jpg"))
        if head == "503-date":
            when = email.utils.formatdate(time.time() + 30, usegmt=True)
            return self.send_body(503, b"busy", "text/plain", [("Retry-After", when)])
        if head == "503-forever":
            return self.send_body(503, b"busy", "text/plain", [("Retry-After", "999999999")])
        if head == "503-far-date":
            when = email.utils.formatdate(time.time() + 10 * 365 * 86400, usegmt=True)
            return self.send_body(503, b"busy", "text/plain", [("Retry-After", when)])
        if head == "drip":
            self.start_reply(200)
            self.wfile.write(read("messi5.jpg")[:64])
            while True:
                self.wfile.write(b"\0")
                self.wfile.flush()
                time.sleep(0.1)
        if head == "slow":
            time.sleep(10)
            return self.send_body(200, read("messi5.jpg"))
        if head == "cut":
            self.start_reply(200, headers=(("Content-Length", "100000"),))
            self.wfile.write(read("messi5.jpg")[:1000])
            self.wfile.flush()
            self.close_connection = True
            return
        if head == "big":
            return self.send_body(200, read("starry_night.jpg"))
        if head == "big-chunked":
            self.start_reply(200, headers=(("Transfer-Encoding", "chunked"),))
            jpeg = read("messi5.jpg")
            filler = b"\0" * 65536
            sent = 0
            try:
                for chunk in [jpeg] + [filler] * (200 * 16):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    sent += len(chunk)
                self.wfile.write(b"0\r\n\r\n")
            finally:
                with LOCK:
                    STATE["sent"][self.path] = sent
            return
        if head == "loop":
            return self.redirect("/loop")
        if head == "to-file":
            return self.redirect("file:///etc/passwd")
        if head == "html-as-jpeg":
            page = b"<!doctype html><html><head><title>Not an image</title></head>" \
                   b"<body><p>Sorry, this is a web page.</p></body></html>"
            return self.send_body(200, page, "image/jpeg")
        if head == "conc" and len(parts) == 3:
            with LOCK:
                STATE["concurrent"] += 1
                STATE["max_concurrent"] = max(STATE["max_concurrent"], STATE["concurrent"])
            try:
                time.sleep(0.1)
                return self.send_body(200, read(parts[2]))
            finally:
                with LOCK:
                    STATE["concurrent"] -= 1
        return self.send_body(404, b"no such route", "text/plain")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256


if __name__ == "__main__":
    srv = Server(("127.0.0.1", 0), Handler)
    print(srv.server_address[1], flush=True)
    srv.serve_forever()
