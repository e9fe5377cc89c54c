"""What a run costs the machine, sampled by the worker once a step: CPU, memory and, where there is one, the GPU.

    sampler = SystemSampler(device)
    sampler.sample()   # {"system/cpu_util": 187.0, "system/rss_gb": 1.2, "system/mem_util": 31.0, ...}

CPU utilisation is the worker process's (its threads and children) over the time since the last sample, in
percent of one core (200 = two cores busy), so a step's figure covers the whole step. Peak resident memory is the
process's high-water mark from the kernel (getrusage), so a peak between two samples (an update's activations)
is not missed: with a real model, what decides whether a run fits a machine. GPU utilisation comes from
NVML (torch.cuda.utilization) when the driver offers it; peak GPU memory from torch's allocator.
"""

from __future__ import annotations

import resource
import time

import psutil
import torch

from workers import metrics as metric


class SystemSampler:
    def __init__(self, device: torch.device):
        self.device, self.process = device, psutil.Process()
        self.last_cpu, self.last_wall = self.cpu_seconds(), time.monotonic()

    @staticmethod
    def cpu_seconds() -> float:
        """CPU seconds of the process (all its threads) and its reaped children so far, user and system.

        The process's own time comes from the kernel's per-process clock (nanoseconds), not /proc's clock ticks:
        a step of the tiny testbed can take less than a tick (10 ms), and a tick-counted figure then reads 0.
        """
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.process_time() + children.ru_utime + children.ru_stime

    def sample(self) -> dict[str, float]:
        now, cpu = time.monotonic(), self.cpu_seconds()
        wall = max(now - self.last_wall, 1e-6)
        rss = self.process.memory_info().rss / 2**30  # the kernel's high-water mark (KiB) lags it: never below
        out = {
            metric.CPU_UTIL: 100.0 * (cpu - self.last_cpu) / wall,
            metric.RSS_GB: rss,
            metric.PEAK_RSS_GB: max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, rss),
            metric.MEM_UTIL: psutil.virtual_memory().percent,
        }
        self.last_cpu, self.last_wall = cpu, now
        if self.device.type == "cuda":
            out[metric.GPU_MEM_GB] = torch.cuda.max_memory_allocated(self.device) / 2**30
            utilization = gpu_utilization(self.device)
            if utilization is not None:
                out[metric.GPU_UTIL] = utilization
        return out


def gpu_utilization(device: torch.device) -> float | None:
    """The GPU's busy percentage over the driver's last sample period, or None without NVML."""
    try:
        return float(torch.cuda.utilization(device))
    except Exception:  # noqa: BLE001 - no NVML (pynvml missing, or a driver without it): the chart goes without
        return None
