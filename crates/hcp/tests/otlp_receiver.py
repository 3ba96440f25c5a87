#!/usr/bin/env python3
"""A small OTLP/HTTP traces receiver for hcp's tests (crates/hcp/tests/audit_export.rs).

It decodes every request with the official OpenTelemetry protobuf definitions (the
`opentelemetry-proto` package from PyPI) and appends each span it takes to DIR/spans.jsonl
(one JSON object a line, written and synced before the answer), each request's fate to
DIR/requests.jsonl. Before each request it reads DIR/control.json, when there is one:

    {"status": 500}            answer that status and keep nothing
    {"delay": 3.0}             wait that long before answering (the spans are kept)
    {"status": 200, "rejected": 2}   a partial success

It prints `listening URL` on stdout once it listens on 127.0.0.1 (an unused port, or
--port), and serves until it is killed.
"""

import argparse
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.trace.v1 import trace_pb2


def any_value(v):
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, kind)


def attributes(kvs):
    return {kv.key: any_value(kv.value) for kv in kvs}


def span_json(resource, rs_schema, scope, scope_schema, span):
    return {
        "trace_id": span.trace_id.hex(),
        "span_id": span.span_id.hex(),
        "parent_span_id": span.parent_span_id.hex(),
        "name": span.name,
        "kind": trace_pb2.Span.SpanKind.Name(span.kind),
        "start": span.start_time_unix_nano,
        "end": span.end_time_unix_nano,
        "status_code": trace_pb2.Status.StatusCode.Name(span.status.code),
        "status_message": span.status.message,
        "attributes": attributes(span.attributes),
        "resource": attributes(resource.attributes),
        "resource_schema_url": rs_schema,
        "scope": scope.name,
        "scope_schema_url": scope_schema,
    }


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def control(self):
        try:
            with open(os.path.join(self.server.dir, "control.json")) as f:
                return json.load(f)
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    def note(self, entry):
        with open(os.path.join(self.server.dir, "requests.jsonl"), "a") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def answer(self, status, body=b"", ctype="application/x-protobuf"):
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        c = self.control()
        status = int(c.get("status", 200))
        if self.path != "/v1/traces":
            self.note({"status": 404, "path": self.path})
            return self.answer(404, b"not found", "text/plain")
        if self.headers.get("Content-Type") != "application/x-protobuf":
            self.note({"status": 415, "type": self.headers.get("Content-Type")})
            return self.answer(415, b"protobuf only", "text/plain")
        if status != 200:
            self.note({"status": status})
            return self.answer(status, b"told to fail", "text/plain")
        req = trace_service_pb2.ExportTraceServiceRequest()
        try:
            req.ParseFromString(body)
        except DecodeError as e:
            self.note({"status": 400, "error": str(e)})
            return self.answer(400, str(e).encode(), "text/plain")
        lines = []
        for rs in req.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    lines.append(
                        json.dumps(
                            span_json(rs.resource, rs.schema_url, ss.scope, ss.schema_url, span)
                        )
                    )
        delay = float(c.get("delay", 0))
        if delay:
            self.note({"status": "started", "delay": delay})
            time.sleep(delay)
        with open(os.path.join(self.server.dir, "spans.jsonl"), "a") as f:
            for line in lines:
                f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.note({"status": 200, "spans": len(lines), "delay": delay})
        resp = trace_service_pb2.ExportTraceServiceResponse()
        rejected = int(c.get("rejected", 0))
        if rejected:
            resp.partial_success.rejected_spans = rejected
            resp.partial_success.error_message = "told to reject"
        self.answer(200, resp.SerializeToString())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--port", type=int, default=0)
    a = p.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    server.daemon_threads = True
    server.dir = a.dir
    print(f"listening http://127.0.0.1:{server.server_port}/v1/traces", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
