"""`agentrl bench learner`: its tracker counts live tensor bytes exactly, and the chunked variant needs less."""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from agentrl.bench.learner_bench import LiveTensorBytes, run_benchmark

pytestmark = pytest.mark.unit


def test_tracker_counts_live_storages_once_and_frees_them():
    with FakeTensorMode(), LiveTensorBytes() as tracker:
        a = torch.empty(1000)  # 4000 bytes
        view = a[:10]
        a.add_(1.0)  # in place: no new storage
        b = torch.empty(500, dtype=torch.float64)  # 4000 more
        assert tracker.live_bytes == 8000
        del a, view
        c = torch.empty(250)  # 1000, after 4000 were freed
        assert tracker.live_bytes == 5000
        del b, c
    assert tracker.peak_bytes == 8000 and tracker.live_bytes == 0


def test_chunked_variant_peaks_lower_and_both_hold_at_least_their_logits():
    result = run_benchmark(tokens=512, vocab=4096, hidden=32, chunk=64)
    logits_bytes = 512 * 4096 * 4
    assert result["full"]["peak_bytes"] > 2 * logits_bytes
    assert result["chunked"]["peak_bytes"] < logits_bytes / 2
    assert result["full_over_chunked"] >= 4.0 and result["meets_target"]
