"""A torch all-reduce across every process torchrun starts.

torchrun reads the node count, the node's rank, the processes per node and
the master's address from the PET_* environment the TrainJob's runtime
gives each node; every process joins the gloo process group through the
master (rank 0's node, by its name under the TrainJob's headless Service),
adds its rank + 1 to an all-reduce and checks the sum. Run without
torchrun, it is one process per node, placed by the same environment. With
CRASH_RANK set, that rank exits 1 in restart attempt 0 (RESTART_ATTEMPT, the
Pod's restart-attempt label through the downward API), before joining.
"""

import os
import socket
import sys

import torch
import torch.distributed as dist


def main() -> int:
    launched = "RANK" in os.environ
    if not launched:
        # Run without torchrun: one process per node, placed by the PET_*
        # environment as torchrun would place it.
        os.environ.update(RANK=os.environ["PET_NODE_RANK"], WORLD_SIZE=os.environ["PET_NNODES"], LOCAL_RANK="0",
                          MASTER_ADDR=os.environ["PET_MASTER_ADDR"], MASTER_PORT=os.environ["PET_MASTER_PORT"])
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])
    host = socket.gethostname()
    attempt = os.environ.get("RESTART_ATTEMPT", "")
    print(f"allreduce: rank {rank} of {world} (local {local}) on {host}, attempt {attempt or '-'},"
          f" master {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}", flush=True)
    if os.environ.get("CRASH_RANK") == str(rank) and attempt == "0":
        print(f"allreduce: rank {rank} crashes in attempt 0", flush=True)
        return 1

    want_world = int(os.environ["PET_NNODES"]) * (int(os.environ["PET_NPROC_PER_NODE"]) if launched else 1)
    if world != want_world:
        print(f"allreduce: FAILED: world size {world}, want {want_world} from PET_NNODES and PET_NPROC_PER_NODE")
        return 1
    dist.init_process_group("gloo")
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    want = world * (world + 1) / 2
    hosts = [None] * world
    dist.all_gather_object(hosts, host)
    dist.destroy_process_group()
    if t.item() != want:
        print(f"allreduce: FAILED: rank {rank} got sum {t.item()}, want {want}")
        return 1
    print(f"allreduce: rank {rank} sum {t.item():g} = {want:g} over {len(set(hosts))} hosts: OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
