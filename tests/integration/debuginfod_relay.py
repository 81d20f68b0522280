"""Byte relays for debuginfod_util.py. As a program (run inside debuginfod's
network namespace): starts the server command and relays each connection
accepted on a Unix socket to 127.0.0.1:<port>; it exits when the server does.

usage: debuginfod_relay.py SOCKET PORT COMMAND..."""
import os
import socket
import subprocess
import sys
import threading


def pipe(a, b):
    """Copies a to b until a ends, then shuts both down."""
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    finally:
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def relay(client, connect):
    """Both directions between client and connect()'s socket."""
    try:
        target = connect()
    except OSError:
        client.close()
        return
    threading.Thread(target=pipe, args=(client, target), daemon=True).start()
    pipe(target, client)


def main():
    sock_path, port, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    server = subprocess.Popen(argv)
    threading.Thread(target=lambda: server.wait() or os._exit(0), daemon=True).start()
    ls = socket.socket(socket.AF_UNIX)
    ls.bind(sock_path)
    ls.listen(64)
    while True:
        c, _ = ls.accept()
        threading.Thread(target=relay, args=(c, lambda: socket.create_connection(("127.0.0.1", port))),
                         daemon=True).start()


if __name__ == "__main__":
    main()
