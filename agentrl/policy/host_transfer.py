"""`HostTransfer`: a decoding step's results brought to the host in one copy and one synchronisation.

On a GPU the packed results are copied without blocking into pinned host memory that is reused from step to
step, and the host waits on an event recorded after the copy (the only wait of the step); on the CPU the tensor
is already where the host reads it. Either way the step's numbers arrive as one `tolist()`.
"""

from __future__ import annotations

import torch


class HostTransfer:
    def __init__(self, device: torch.device):
        self.device = device
        self._pinned: torch.Tensor | None = None
        self.transfers = 0

    def read(self, packed_R_K: torch.Tensor) -> list[list[float]]:
        self.transfers += 1
        if self.device.type != "cuda":
            return packed_R_K.tolist()
        numel = packed_R_K.numel()
        if self._pinned is None or self._pinned.numel() < numel or self._pinned.dtype != packed_R_K.dtype:
            self._pinned = torch.empty(max(numel, 4096), dtype=packed_R_K.dtype, pin_memory=True)
        host = self._pinned[:numel].view(packed_R_K.shape)
        host.copy_(packed_R_K, non_blocking=True)
        done = torch.cuda.Event()
        done.record(torch.cuda.current_stream(self.device))
        done.synchronize()
        return host.tolist()
