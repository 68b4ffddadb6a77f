"""The weight hand-off from the learner to vLLM's workers: safetensors files, loaded by a worker extension.

vLLM runs agentrl code inside its workers the supported way: the engine argument `worker_extension_cls` names
`WeightLoadingExtension`, which vLLM adds to its worker class's bases in every worker process, and
`collective_rpc("agentrl_load_weights", args=(path,))` calls the method by name on every worker. Only a method
name and a path cross the process boundaries, so nothing is pickled and vLLM's V1 engine needs no insecure
serialization (it refuses Python functions in `collective_rpc` without `VLLM_ALLOW_INSECURE_SERIALIZATION`).

The tensors travel as files: the learner writes each bucket of parameters (full tensors, Hugging Face names, every
tensor of a layer in the same bucket) as one safetensors file in a fresh temporary directory, on /dev/shm (memory, no
disk) when it has room; each worker reads the file on the CPU and hands the tensors to vLLM's own in-place reload
(`Worker.reload_weights(weights_iterator=...)`), which puts each layer back into checkpoint form, loads the tensors
with the model's `load_weights` (a tensor-parallel worker takes its shard of each full tensor, as when vLLM loads a
checkpoint) and re-runs the processing vLLM applies after loading (the CPU build repacks its linear weights; online
quantization requantizes). Calling `load_weights` on the processed model instead fits only engines that keep
weights as loaded. A layer missing from a file keeps its weights, so a layer is never split between two files.
The learner then deletes the file, and the directory when the update ends. Only a method name and a path cross the
process boundaries: no process group to set up, no CUDA IPC handles, the same code for every tensor-parallel size,
on one node.

An engine that serves quantized weights (a GPTQ/AWQ/FP8 checkpoint, `quantization=...`) cannot take the learner's
full-precision tensors: `agentrl_engine_info` reports it, and the policy refuses before the first update.

This module imports without vLLM: the learner side is torch and safetensors, and the extension's methods run only
inside vLLM's workers.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from typing import Any

EXTENSION = "agentrl.policy.vllm_worker.WeightLoadingExtension"
"""The engine argument `worker_extension_cls`."""
LOAD_WEIGHTS = "agentrl_load_weights"
"""`collective_rpc` method: load one weight file (its path the one argument)."""
ENGINE_INFO = "agentrl_engine_info"
"""`collective_rpc` method: the dtype the engine keeps its weights in (`bfloat16`, ...) and its quantization."""
SHARED_MEMORY = "/dev/shm"


class WeightLoadingExtension:
    """Mixed into vLLM's worker class, whose `model_runner.model` (the served model), `model_config` and
    `device` it uses. vLLM refuses an extension with an attribute its worker already has, hence the `agentrl_`
    prefix on every name (recent workers have an `update_weights` of their own)."""

    model_runner: Any
    model_config: Any

    def agentrl_engine_info(self) -> dict[str, Any]:
        """The dtype the served model holds its weights in, by name (the learner casts to it before writing), and
        the engine's quantization method (None for full-precision weights)."""
        return {
            "dtype": str(self.model_config.dtype).removeprefix("torch."),
            "quantization": getattr(self.model_config, "quantization", None),
        }

    def agentrl_load_weights(self, path: str) -> int:
        """Load every tensor of the safetensors file at `path` into the served model through vLLM's in-place reload
        (the model's own `load_weights` where the installed vLLM has none); returns how many. The tensors stay on
        the CPU, as vLLM's checkpoint loading gives them; floating-point ones are cast to the model's dtype first."""
        from safetensors import safe_open

        dtype = self.model_config.dtype
        loaded = 0

        def tensors() -> Iterator[tuple[str, Any]]:
            nonlocal loaded
            with safe_open(path, framework="pt", device="cpu") as file:
                for name in file.keys():
                    tensor = file.get_tensor(name)
                    if tensor.is_floating_point() and tensor.dtype != dtype:
                        tensor = tensor.to(dtype)
                    loaded += 1
                    yield name, tensor

        reload = getattr(self, "reload_weights", None)  # vLLM's Worker, mixed into this class
        if reload is not None:
            reload(weights_iterator=tensors(), is_checkpoint_format=True)
        else:
            self.model_runner.model.load_weights(weights=tensors())
        return loaded


def staging_root(bucket_bytes: int) -> str:
    """/dev/shm when it can hold two buckets (it is memory: writing and reading cost no disk I/O; containers often
    give it only 64 MiB), else the system's temporary directory."""
    try:
        if os.access(SHARED_MEMORY, os.W_OK) and shutil.disk_usage(SHARED_MEMORY).free >= 2 * bucket_bytes:
            return SHARED_MEMORY
    except OSError:
        pass
    return tempfile.gettempdir()


def host_copy(tensor: Any, dtype: Any | None = None) -> Any:
    """A contiguous CPU copy with storage of its own (safetensors refuses tensors that share storage, as tied
    embeddings do), cast to `dtype` first when it is floating-point (on the learner's device: less to copy)."""
    tensor = tensor.detach()
    if dtype is not None and tensor.is_floating_point():
        tensor = tensor.to(dtype=dtype)
    return tensor.to("cpu", copy=True).contiguous()


class WeightFiles:
    """The files of one weight update: a fresh temporary directory (removed on exit, with anything left in it)
    and one safetensors file per bucket, deleted as soon as the workers have loaded it."""

    def __init__(self, bucket_bytes: int, root: str | None = None) -> None:
        self.root = root or staging_root(bucket_bytes)
        self.directory = ""
        self._written = 0

    def __enter__(self) -> WeightFiles:
        self.directory = tempfile.mkdtemp(prefix="agentrl-weights-", dir=self.root)
        return self

    def __exit__(self, *exc_info: object) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    def write(self, named_tensors: Iterable[tuple[str, Any]], dtype: Any | None = None) -> str:
        """Write the tensors to a new file of the directory, kept until the update ends; its path."""
        from safetensors.torch import save_file

        path = os.path.join(self.directory, f"bucket-{self._written:05d}.safetensors")
        self._written += 1
        save_file({name: host_copy(tensor, dtype) for name, tensor in named_tensors}, path)
        return path

    @contextlib.contextmanager
    def bucket(self, named_tensors: Iterable[tuple[str, Any]], dtype: Any | None = None) -> Iterator[str]:
        """Write the tensors to a file and give its path; the file is deleted when the block ends."""
        path = os.path.join(self.directory, f"bucket-{self._written:05d}.safetensors")
        try:
            path = self.write(named_tensors, dtype)
            yield path
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
