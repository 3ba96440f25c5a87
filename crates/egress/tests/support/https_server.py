"""A loopback file server for the egress tests: serves DIR over HTTPS (CERT, KEY) or plain
HTTP ("-" for both), prints its port on one line, then serves until killed."""
import functools
import http.server
import ssl
import sys

cert, key, root = sys.argv[1:4]


class Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(
    ("127.0.0.1", 0), functools.partial(Handler, directory=root)
)
if cert != "-":
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
