"""A small HTTP/2 cleartext client for the tests, on the python `h2` library
(Debian python3-h2, an implementation independent of nghttp2): prior
knowledge or `Upgrade: h2c`, many streams at once, trailers, and raw frames
(hyperframe) for the abuse tests."""
import base64
import socket
import time

import h2.config
import h2.connection
import h2.events
import h2.settings


class Reply:
    def __init__(self, stream_id):
        self.stream_id = stream_id
        self.status = None
        self.headers = {}
        self.trailers = {}
        self.body = bytearray()
        self.reset = None       # error code if the server reset the stream
        self.done = False

    def header(self, name, default=None):
        return self.headers.get(name.lower(), default)

    def __repr__(self):
        return f"<h2 {self.status} {self.headers} {bytes(self.body[:200])!r} trailers={self.trailers} reset={self.reset}>"


class H2Client:
    """One HTTP/2 connection to 127.0.0.1:port."""

    def __init__(self, port, timeout=30.0, upgrade_path=None, window=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                                        header_encoding="utf-8"))
        self.replies = {}
        self.goaway = None
        self.upgrade_reply = None
        if window is not None:
            self.conn.local_settings = h2.settings.Settings(client=True, initial_values={
                h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
        if upgrade_path is None:
            self.conn.initiate_connection()
            self.flush()
        else:
            self._upgrade(port, upgrade_path)

    def _upgrade(self, port, path):
        settings = self.conn.initiate_upgrade_connection()
        req = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: Upgrade, HTTP2-Settings\r\n"
               f"Upgrade: h2c\r\nHTTP2-Settings: {settings.decode()}\r\n\r\n").encode()
        self.sock.sendall(req)
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed during upgrade")
            head += chunk
        line, rest = head.split(b"\r\n\r\n", 1)
        self.upgrade_status = int(line.split(b" ")[1])
        self.replies[1] = Reply(1)
        self.flush()
        if rest:
            self._feed(rest)

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def send(self, method, path, headers=(), body=b"", end=True):
        sid = self.conn.get_next_available_stream_id()
        hdrs = [(":method", method), (":path", path), (":scheme", "http"), (":authority", "127.0.0.1")]
        hdrs += [(k.lower(), v) for k, v in headers]
        self.replies[sid] = Reply(sid)
        self.conn.send_headers(sid, hdrs, end_stream=not body and end)
        if body:
            self._send_body(sid, body, end)
        self.flush()
        return sid

    def _send_body(self, sid, body, end):
        view = memoryview(body)
        while view and not self.replies[sid].done:
            window = min(self.conn.local_flow_control_window(sid), self.conn.max_outbound_frame_size)
            if window <= 0:
                self.flush()
                self._read_once()
                continue
            n = min(window, len(view))
            self.conn.send_data(sid, bytes(view[:n]), end_stream=end and n == len(view))
            view = view[n:]
            self.flush()

    def _feed(self, data):
        for ev in self.conn.receive_data(data):
            if isinstance(ev, h2.events.ResponseReceived):
                r = self.replies.setdefault(ev.stream_id, Reply(ev.stream_id))
                r.headers = dict(ev.headers)
                r.status = int(r.headers.pop(":status"))
            elif isinstance(ev, h2.events.DataReceived):
                self.replies[ev.stream_id].body += ev.data
                self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.TrailersReceived):
                self.replies[ev.stream_id].trailers = dict(ev.headers)
            elif isinstance(ev, h2.events.StreamEnded):
                self.replies[ev.stream_id].done = True
            elif isinstance(ev, h2.events.StreamReset):
                r = self.replies.setdefault(ev.stream_id, Reply(ev.stream_id))
                r.reset, r.done = ev.error_code, True
            elif isinstance(ev, h2.events.ConnectionTerminated):
                self.goaway = ev.error_code
        self.flush()

    def _read_once(self):
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("server closed the connection")
        self._feed(data)

    def wait(self, sids, timeout=30.0):
        deadline = time.monotonic() + timeout
        while not all(self.replies[s].done for s in sids):
            if time.monotonic() > deadline:
                raise TimeoutError(f"streams not answered: {[s for s in sids if not self.replies[s].done]}")
            self._read_once()
        return [self.replies[s] for s in sids]

    def request(self, method, path, headers=(), body=b"", timeout=30.0):
        return self.wait([self.send(method, path, headers, body)], timeout)[0]

    def close(self):
        try:
            self.conn.close_connection()
            self.flush()
        except Exception:
            pass
        self.sock.close()


def settings_header(settings_payload: bytes) -> str:
    return base64.urlsafe_b64encode(settings_payload).rstrip(b"=").decode()
