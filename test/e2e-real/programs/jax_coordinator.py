"""What jax.distributed.initialize() needs, without JAX (not packaged).

Reads JAX_NUM_PROCESSES, JAX_PROCESS_ID and JAX_COORDINATOR_ADDRESS as the
TrainJob's runtime gives them; process 0 listens at the coordinator's port
and answers each other process with the sum of every process id once all
have connected; the others resolve the coordinator's name through the
cluster's DNS, connect, send their id and check the sum.
"""

import os
import socket
import sys
import time


def main() -> int:
    n = int(os.environ["JAX_NUM_PROCESSES"])
    pid = int(os.environ["JAX_PROCESS_ID"])
    host, port = os.environ["JAX_COORDINATOR_ADDRESS"].rsplit(":", 1)
    want = n * (n - 1) // 2
    print(f"jax: process {pid} of {n} on {socket.gethostname()}, coordinator {host}:{port}", flush=True)
    if pid == 0:
        with socket.create_server(("", int(port))) as srv:
            peers = [srv.accept()[0] for _ in range(n - 1)]
            ids = [int(p.makefile().readline()) for p in peers]
            total = sum(ids)
            for p in peers:
                p.sendall(f"{total}\n".encode())
                p.close()
        print(f"jax: coordinator heard processes {sorted(ids)}", flush=True)
    else:
        deadline = time.monotonic() + 120
        while True:
            try:
                conn = socket.create_connection((host, int(port)), timeout=5)
                break
            except OSError as err:
                if time.monotonic() > deadline:
                    print(f"jax: FAILED: coordinator unreachable: {err}")
                    return 1
                time.sleep(0.5)
        with conn:
            conn.settimeout(60)
            conn.sendall(f"{pid}\n".encode())
            total = int(conn.makefile().readline())
        print(f"jax: connected to the coordinator {host}:{port}", flush=True)
    if total != want:
        print(f"jax: FAILED: sum of process ids {total}, want {want}")
        return 1
    print(f"jax: sum of process ids {total}: OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
