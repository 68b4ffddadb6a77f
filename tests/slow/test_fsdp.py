"""`trainer.sharding=fsdp` (FSDP2 on gloo, CPU) against the unsharded learner.

Sharded, each rank holds a slice of every parameter, gradient and AdamW moment, and the gradients are reduce-
scattered instead of all-reduced: the same sums in another order. So two sharded processes must train the weights
one unsharded process trains, to the tolerance of `test_data_parallel.py` (Adam turns rounding differences of
near-zero gradients into weight differences of a fraction of the learning rate), and checkpoints must move between
shardings and process counts.
"""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
from test_data_parallel import ATOL, REFERENCE, kill_after_step_2, largest_difference, mean_difference, train, weights
from test_learner import PAD, config, make_samples, tiny_model

pytestmark = pytest.mark.slow

FSDP = "trainer.sharding=fsdp"


def rewards(run_dir: Path) -> list[float]:
    return [json.loads(line).get("reward/mean") for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_two_sharded_processes_train_the_weights_one_process_trains(tmp_path, one_process_run):
    alone = one_process_run(*REFERENCE)
    train(tmp_path, "fsdp", *REFERENCE, FSDP, nproc=2)
    one, sharded = weights(alone, 2), weights(tmp_path / "fsdp", 2)
    moved = largest_difference(one, weights(alone, 1))
    assert moved > 10 * ATOL, moved  # the step changed the weights, so agreeing is not trivial
    assert largest_difference(one, sharded) < ATOL  # averaged gradients (FSDP's default) are off by ~lr
    assert mean_difference(one, sharded) < 1e-8
    assert rewards(tmp_path / "fsdp") == rewards(alone)  # step 2 sampled from the written-back weights


def test_a_killed_sharded_run_resumes_unsharded_and_back(tmp_path, one_process_run):
    straight = one_process_run("trainer.steps=3")
    kill_after_step_2(tmp_path, "killed", FSDP)
    train(tmp_path, "", "--resume", str(tmp_path / "killed"), "trainer.sharding=none")
    assert largest_difference(weights(straight, 3), weights(tmp_path / "killed", 3)) < ATOL
    # and an unsharded checkpoint resumes sharded (one process: a process group of one)
    shutil.copytree(straight, tmp_path / "back")
    shutil.rmtree(tmp_path / "back" / "checkpoints" / f"step_{3:06d}")
    train(tmp_path, "", "--resume", str(tmp_path / "back"), FSDP)
    assert largest_difference(weights(straight, 3), weights(tmp_path / "back", 3)) < ATOL


# --- the optimizer state, in process (float64, so the only differences are summation order) -------------------

SETTINGS = {"minibatches_per_step": 2, "update_epochs": 2, "max_tokens_per_microbatch": 30}


def _sharded_rank(rank: int, world: int, port: int, folder: str) -> None:
    import torch.distributed as dist

    from agentrl.train.distributed import DataParallel
    from agentrl.train.learner import Learner

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    dp = DataParallel(rank, world)
    model = tiny_model()
    learner = Learner(model, config(sharding="fsdp", **SETTINGS), pad_token_id=PAD, data_parallel=dp)
    learner.update(make_samples(7))
    state = learner.state_dict()
    # an unsharded learner's state, loaded into a sharded one, continues as the unsharded one does
    plain = torch.load(Path(folder) / "plain.pt", weights_only=False)
    resumed = tiny_model(seed=1)
    resumed_learner = Learner(resumed, config(sharding="fsdp", **SETTINGS), pad_token_id=PAD, data_parallel=dp)
    resumed.load_state_dict(plain["weights"])  # as `load_checkpoint` does: the weights after the learner is built
    resumed_learner.load_state_dict(plain["state"])
    resumed_learner.update(make_samples(5, seed=1))
    if rank == 0:
        torch.save({"state": state, "resumed": resumed.state_dict()}, Path(folder) / "sharded.pt")
    # As the trainer's last checkpoint does, meet before tearing down: on torch 2.11 gloo's worker thread releases
    # a finished all-gather's tensors after `wait` returns, and a rank that reaches interpreter exit first aborts
    # ("terminate called without an active exception") when that thread then asks for the GIL.
    dist.barrier()
    dist.destroy_process_group()


def test_the_sharded_optimizer_state_is_an_unsharded_adamw_state(tmp_path):
    from agentrl.train.learner import Learner

    model = tiny_model()
    learner = Learner(model, config(**SETTINGS), pad_token_id=PAD)
    learner.update(make_samples(7))
    torch.save({"state": learner.state_dict(), "weights": model.state_dict()}, tmp_path / "plain.pt")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    mp.spawn(_sharded_rank, args=(2, port, str(tmp_path)), nprocs=2)
    sharded = torch.load(tmp_path / "sharded.pt", weights_only=False)
    full, plain = sharded["state"]["optimizer"], learner.state_dict()["optimizer"]
    assert full["param_groups"] == plain["param_groups"]
    assert full["state"].keys() == plain["state"].keys()
    for index, entry in plain["state"].items():
        assert entry.keys() == full["state"][index].keys()
        for key, value in entry.items():
            torch.testing.assert_close(full["state"][index][key], value, rtol=0, atol=1e-15)
    adamw = torch.optim.AdamW(tiny_model().parameters())
    adamw.load_state_dict(full)  # it loads as it is into a plain AdamW
    for index, entry in enumerate(adamw.state_dict()["state"].values()):
        torch.testing.assert_close(entry["exp_avg"], plain["state"][index]["exp_avg"], rtol=0, atol=1e-15)

    learner.update(make_samples(5, seed=1))  # the unsharded learner, on: the sharded one resumed from its state
    for name, value in model.state_dict().items():
        torch.testing.assert_close(sharded["resumed"][name], value, rtol=0, atol=1e-12, msg=name)
