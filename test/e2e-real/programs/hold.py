"""A training process the test holds: it runs until told to finish.

It connects to the test at REPORT_ADDR (host:port, on this machine) and
says "start <host> <attempt>", then waits, up to an hour, for the line
"finish", and exits 0. On SIGTERM (a suspend, a deadline) it says
"sigterm <host> <attempt>" on a new connection and exits 143, as a
process killed by SIGTERM does.
"""

import os
import signal
import socket
import sys

HOST = socket.gethostname()
ATTEMPT = os.environ.get("RESTART_ATTEMPT", "-")


def report(line: str) -> socket.socket:
    addr, port = os.environ["REPORT_ADDR"].rsplit(":", 1)
    conn = socket.create_connection((addr, int(port)), timeout=10)
    conn.sendall(f"{line} {HOST} {ATTEMPT}\n".encode())
    return conn


def on_sigterm(signum, frame):
    print(f"hold: {HOST} got SIGTERM", flush=True)
    try:
        report("sigterm").close()
    finally:
        os._exit(143)


def main() -> int:
    signal.signal(signal.SIGTERM, on_sigterm)
    conn = report("start")
    print(f"hold: {HOST} started, attempt {ATTEMPT}", flush=True)
    conn.settimeout(3600)
    line = conn.makefile().readline().strip()
    if line != "finish":
        print(f"hold: FAILED: the test said {line!r}")
        return 1
    print(f"hold: {HOST} told to finish: OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
