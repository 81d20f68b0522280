"""Debian's `debuginfod` server for the symbol tests (issue 31), reachable
only on 127.0.0.1.

debuginfod 0.188 has no listen-address option: it binds every interface. So
it runs in a network namespace of its own (`unshare -n`, loopback only), and
two small relays carry connections to it: one inside the namespace from a
Unix socket (the file system is shared) to debuginfod's port, one here from
127.0.0.1:<free port> to that socket."""
import os
import socket
import subprocess
import sys
import threading
import urllib.request

import debuginfod_relay
import harness as h


def available():
    """Why the server cannot run here, or None."""
    import shutil
    if not shutil.which("debuginfod"):
        return "no debuginfod (scripts/install-deps.sh installs it)"
    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0:
        return "cannot make a network namespace (unshare -n) for debuginfod"
    return None


class Debuginfod:
    """debuginfod -F serving `directory`; .url is http://127.0.0.1:<port>."""

    def __init__(self, directory):
        self.dir = h.temp_dir("ember-debuginfod-")
        self.sock_path = os.path.join(self.dir, "relay.sock")
        relay = os.path.join(os.path.dirname(os.path.abspath(__file__)), "debuginfod_relay.py")
        cmd = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh",
               sys.executable, relay, self.sock_path, "8002",
               "debuginfod", "-F", "-p", "8002", "-d", os.path.join(self.dir, "db.sqlite"),
               "-t", "1", "-g", "0", directory]
        self.log = open(os.path.join(self.dir, "debuginfod.log"), "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        def connect():
            u = socket.socket(socket.AF_UNIX)
            u.connect(self.sock_path)
            return u
        debuginfod_relay.relay(c, connect)

    def wait_serving(self, build_id, timeout=60, kind="debuginfo"):
        """Until the server has indexed build_id's debug file (or kind: executable)."""
        def ok():
            try:
                with urllib.request.urlopen(f"{self.url}/buildid/{build_id}/{kind}",
                                            timeout=5) as r:
                    return r.status == 200
            except OSError:
                return False
        h.wait_for(ok, timeout=timeout, interval=0.5, what="debuginfod to index the debug file")

    def stop(self):
        self.listener.close()
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)    # the session this helper started
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
        self.log.close()
