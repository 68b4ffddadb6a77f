"""The in-process sampler on a GPU: decoding speed by batch size against transformers' `generate`, the device's
synchronisations per step, and the sampler-learner log-prob gap, on a random Qwen3 of a real size (no download).

    python scripts/sampler_gpu_check.py --size 0.6b --device cuda --dtype bfloat16      # on a GPU machine
    python scripts/sampler_gpu_check.py --size tiny --device cpu --steps 8              # a smoke test

For each number of rows: milliseconds per decoding step and tokens/s of `DecodeLoop` (after a few warm-up steps),
the same for `model.generate` (sampling, same rows and prompt length), and the synchronising CUDA calls the loop's
steps made (`torch.cuda.set_sync_debug_mode`: the loop's one wait per step is an event, which it does not count,
so anything counted is a hidden synchronisation). Then the learner's teacher-forced log-probs of what the loop
sampled, in the same dtype, and their largest and mean difference from the sampler's. Printed as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    import random

    import torch
    from gpu_parts import build_model, logprob_gap, time_generate, time_loop
    from transformers import AutoModelForCausalLM

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="0.6b", help="a size of scripts/gpu_parts.py: tiny, 0.6b, 1.7b")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--rows", default="1,8,32", help="comma-separated numbers of rows")
    parser.add_argument("--prompt-len", type=int, default=256)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--out", default="/tmp/sampler_gpu_check")
    args = parser.parse_args(argv)
    path, parameters = build_model(args.size, Path(args.out))
    model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, args.dtype)).to(args.device).eval()
    rng = random.Random(0)
    out: dict[str, Any] = {"size": args.size, "parameters": parameters, "device": args.device, "dtype": args.dtype}
    for rows in (int(r) for r in args.rows.split(",")):
        prompts = [[rng.randrange(10, 2000) for _ in range(args.prompt_len)] for _ in range(rows)]
        loop = time_loop(model, prompts, args.steps, args.device)
        results = loop.pop("results")
        out[f"rows_{rows}"] = {"loop": loop, "generate": time_generate(model, prompts, args.steps, args.device)}
        if rows == max(int(r) for r in args.rows.split(",")):
            out["sampler_learner_logprob_gap"] = logprob_gap(model, prompts, results)
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
