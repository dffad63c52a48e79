"""An MPI program mpirun starts on every host of the launcher's hostfile.

Each rank reports its host to rank 0 (an allgather) and adds rank + 1 to an
allreduce; rank 0 prints every rank's host and checks that the ranks span
EXPECT_HOSTS distinct hosts and that the sum is right.
"""

import os
import socket
import sys

from mpi4py import MPI


def main() -> int:
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    host = socket.gethostname()
    hosts = comm.allgather(host)
    total = comm.allreduce(rank + 1, op=MPI.SUM)
    if rank != 0:
        return 0
    for r, h in enumerate(hosts):
        print(f"mpi: rank {r} of {size} on {h}", flush=True)
    want_hosts = int(os.environ.get("EXPECT_HOSTS", size))
    if total != size * (size + 1) // 2 or len(set(hosts)) != want_hosts:
        print(f"mpi: FAILED: sum {total}, {len(set(hosts))} hosts (want {want_hosts})", flush=True)
        return 1
    print(f"mpi: {size} ranks on {len(set(hosts))} hosts, sum {total}: OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
