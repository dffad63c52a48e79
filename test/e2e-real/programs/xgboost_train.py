"""Distributed XGBoost through the tracker the TrainJob's runtime names.

Worker DMLC_TASK_ID 0 runs the tracker (RabitTracker) on DMLC_TRACKER_PORT,
as Kubeflow's XGBoost runtime expects of node 0, until every worker is done; every worker connects to
DMLC_TRACKER_URI:DMLC_TRACKER_PORT, generates its own shard of a data set
(y = 3 x0 - 2 x1 + noise), and trains a model together with the others:
the histograms are all-reduced, so every worker ends with the same model.
Each checks the world size, that its model fits its shard, and that its
model is the one every other worker has.
"""

import hashlib
import os
import sys
import threading

import numpy as np
import xgboost as xgb
from xgboost import collective
from xgboost.tracker import RabitTracker


def main() -> int:
    uri, port = os.environ["DMLC_TRACKER_URI"], int(os.environ["DMLC_TRACKER_PORT"])
    task, workers = int(os.environ["DMLC_TASK_ID"]), int(os.environ["DMLC_NUM_WORKER"])
    print(f"xgboost {xgb.__version__}: worker {task} of {workers}, tracker {uri}:{port}", flush=True)
    tracker = None
    if task == 0:
        rabit = RabitTracker(host_ip="0.0.0.0", n_workers=workers, port=port)
        rabit.start(workers)
        tracker = threading.Thread(target=rabit.join, daemon=True)
        tracker.start()

    args = {"dmlc_tracker_uri": uri, "dmlc_tracker_port": port, "dmlc_task_id": str(task)}
    with collective.CommunicatorContext(**args):
        world, rank = collective.get_world_size(), collective.get_rank()
        rng = np.random.default_rng(task)
        x = rng.uniform(-1, 1, size=(2000, 2))
        y = 3 * x[:, 0] - 2 * x[:, 1] + rng.normal(0, 0.05, size=2000)
        booster = xgb.train({"objective": "reg:squarederror", "tree_method": "hist", "max_depth": 4},
                            xgb.DMatrix(x, label=y), num_boost_round=30)
        rmse = float(np.sqrt(np.mean((booster.predict(xgb.DMatrix(x)) - y) ** 2)))
        digest = hashlib.sha256(bytes(booster.save_raw("json"))).hexdigest()[:16]
        digests = collective.allreduce(np.array([int(digest, 16) % (1 << 52)], dtype=np.float64), collective.Op.MAX)
        same = int(digests[0]) == int(digest, 16) % (1 << 52)
    if tracker is not None:
        # The tracker runs until every worker has said goodbye.
        tracker.join(timeout=60)
    print(f"xgboost: worker {rank} of {world}: rmse {rmse:.3f}, model {digest}, same as the others: {same}", flush=True)
    if world != workers or rmse > 0.2 or not same:
        print(f"xgboost: FAILED: world {world} (want {workers}), rmse {rmse:.3f}, same model {same}")
        return 1
    print("xgboost: OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
