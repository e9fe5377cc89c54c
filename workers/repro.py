"""Seeding and the environment record of a run.

    seed_everything(cfg.seed)                 # Python, NumPy, torch (CPU and CUDA)
    with deterministic(device, threads):      # deterministic kernels and threads, for this block only
        ...
    settings = determinism_record(device, threads)   # what the environment record says was set
    record = capture_environment(cfg, ...)    # before the first step

The record says what produced a result: code revision and uncommitted diff
(its secrets redacted: workers/redaction.py),
Python and package versions, torch/CUDA/cuDNN/driver, devices, CPU, host, the
relevant environment variables, seeds, config hash, dataset and initial-weight
fingerprints, and the determinism settings.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
import platform as host_platform  # the standard-library module, aliased for clarity
import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from workers.redaction import redact_secrets

RELEVANT_ENV = (
    "CUDA_VISIBLE_DEVICES",
    "CUBLAS_WORKSPACE_CONFIG",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "PYTHONHASHSEED",
    "TOKENIZERS_PARALLELISM",
    "NCCL_ALGO",
    "ROLLOUTLAB_CACHE",
)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA device


def global_random_state() -> dict:
    """The process-wide random streams seed_everything sets (a resume checkpoint carries them)."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_global_random_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


class DataStream:
    """The fingerprint of every training example a run draws, in order: the exact data it used.

    Chained, one link per draw (digest = sha256(previous digest, the draw's examples)), because a running
    hashlib object has no state a checkpoint could carry: a resumed run goes on from the saved digest and ends
    with the fingerprint of the undisturbed run.
    """

    def __init__(self, digest: str = "", examples: int = 0):
        self.digest, self.examples = digest, examples

    def add(self, examples) -> None:
        link = hashlib.sha256(self.digest.encode())
        for example in examples:
            link.update(f"{example.prompt}\0{example.answer}\n".encode())
        self.digest = link.hexdigest()
        self.examples += len(examples)

    def hexdigest(self) -> str:
        return self.digest or hashlib.sha256().hexdigest()  # nothing drawn: the digest of no bytes

    def state_dict(self) -> dict:
        return {"digest": self.digest, "examples": self.examples}

    def load_state_dict(self, state: dict) -> None:
        self.digest, self.examples = state["digest"], state["examples"]


@contextmanager
def deterministic(device: torch.device, threads: int) -> Iterator[None]:
    """Deterministic kernels and a fixed thread count inside the block; what was set before, after it.

    The settings are global to the process, so they are scoped to the trainer's own work: other code
    in the same process (a peer trainer in a benchmark, a notebook around a run) keeps its own
    choice instead of inheriting ours (e.g. torch's NaN fill of uninitialised memory under
    deterministic algorithms). Blocks nest: an inner one restores what the outer one set.
    """
    before = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.get_num_threads(),
        torch.backends.cudnn.benchmark,
        torch.backends.cudnn.deterministic,
    )
    if device.type == "cuda":
        # cuBLAS needs a fixed workspace to be deterministic; it reads this at initialisation
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True, warn_only=True)
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        enabled, warn_only, previous_threads, benchmark, cudnn_deterministic = before
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)
        if torch.get_num_threads() != previous_threads:
            torch.set_num_threads(previous_threads)
        torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = benchmark, cudnn_deterministic


def determinism_record(device: torch.device, threads: int) -> dict[str, object]:
    """The settings `deterministic` applies, as the environment record states them."""
    cuda = device.type == "cuda"
    return {
        "torch.use_deterministic_algorithms": True,
        "scope": "the trainer's own work (set on entry, restored on exit)",
        "cudnn.deterministic": True if cuda else torch.backends.cudnn.deterministic,
        "cudnn.benchmark": False if cuda else torch.backends.cudnn.benchmark,
        "torch_threads": threads,
        "bit_identical_expected": device.type == "cpu",
    }


def _git(*args: str, cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def code_state(root: Path | None = None) -> dict[str, object]:
    """The revision of the checkout that holds this code, and any uncommitted change to it.

    The diff is kept with each secret that detect-secrets finds in it redacted (a key or a
    password being tried out must not travel with the run's record, bundle and pages);
    diff_redactions says how many, and diff_sha256 is the hash of the diff as kept."""
    root = root or Path(__file__).resolve().parent.parent
    revision = _git("rev-parse", "HEAD", cwd=root)
    if revision is None:
        return {"revision": None, "dirty": None, "diff_sha256": None, "diff": None, "diff_redactions": None}
    diff = _git("diff", "HEAD", "--binary", cwd=root) or ""
    kept, redactions = redact_secrets(diff) if diff else ("", 0)
    return {
        "revision": revision.strip(),
        "dirty": bool(diff),
        "diff_sha256": hashlib.sha256(kept.encode()).hexdigest() if kept else None,
        "diff": kept or None,
        "diff_redactions": redactions,
    }


def packages() -> dict[str, str]:
    """{name: version} of every installed distribution; where two copies are on the path, the one
    Python imports (the first on sys.path) is the one recorded.

    Read once per state of the path's folders: parsing ~300 metadata files takes a fifth of a second, which
    was most of the start of a short run; installing or removing a package changes its folder's mtime."""
    return dict(_packages_on(tuple(sys.path), _mtimes(sys.path)))


def _mtimes(paths: list[str]) -> tuple[int, ...]:
    return tuple(_mtime(p) for p in paths)


def _mtime(path: str) -> int:
    """A folder's or a zip's modification time; 0 for an entry that is not there."""
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0


@functools.lru_cache(maxsize=4)
def _packages_on(path: tuple[str, ...], mtimes: tuple[int, ...]) -> tuple[tuple[str, str], ...]:
    found: dict[str, str] = {}
    for dist in importlib.metadata.distributions(path=list(path)):  # in sys.path order
        metadata = dist.metadata  # parsed on each access: once here
        if metadata["Name"]:
            found.setdefault(metadata["Name"].lower().replace("_", "-"), metadata["Version"])
    return tuple(sorted(found.items()))


def cpu_fields() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo ({} where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        name, _, value = line.partition(":")
        fields[name.strip()] = value.strip()
    return fields


def cpu_model() -> str:
    return cpu_fields().get("model name") or host_platform.processor() or host_platform.machine()


WIDEST_VECTORS = ("avx512f", "avx2", "avx", "sse2")  # the widest names the generation's speed on float32 math


def cpu_generation() -> str | None:
    """The processor's generation: one model name ("AMD EPYC") covers parts years apart whose step times differ
    twofold, so step times compare only where this agrees (e.g. "family 23 model 1, avx2")."""
    fields = cpu_fields()
    if "cpu family" not in fields:
        return None
    flags = set(fields.get("flags", "").split())
    widest = next((name.removesuffix("f") for name in WIDEST_VECTORS if name in flags), "scalar")
    return f"family {fields['cpu family']} model {fields.get('model', '?')}, {widest}"


def gpu_state() -> dict[str, object]:
    if not torch.cuda.is_available():
        return {"cuda": torch.version.cuda, "cudnn": None, "driver": None, "devices": [], "device_count": 0}
    driver = None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        driver = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.TimeoutExpired):
        pass
    return {
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "driver": driver,
        "devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
        "device_count": torch.cuda.device_count(),
    }


def capture_environment(cfg, *, dataset_fingerprint: str, weights_fingerprint: str, determinism: dict) -> dict:
    """The reproducibility record of a run, taken before its first step. It reads the machine and
    draws no random number, so taking it cannot change what the run computes."""
    started = time.perf_counter()
    record = {
        "code": code_state(),
        "python": sys.version,
        "packages": packages(),
        "torch": torch.__version__,
        "gpu": gpu_state(),
        "cpu": {"model": cpu_model(), "generation": cpu_generation(), "count": os.cpu_count()},
        "host": socket.gethostname(),
        "platform": host_platform.platform(),
        "env": {name: os.environ[name] for name in RELEVANT_ENV if name in os.environ},
        # a pretrained model has no init seed: 0, as its hash counts it (config/legacy.py), so records stay comparable
        "seeds": {"run": cfg.seed, "model_init": getattr(cfg.model, "init_seed", 0)},
        "config": cfg.model_dump(mode="json"),
        "config_hash": cfg.config_hash(),
        "dataset_fingerprint": dataset_fingerprint,
        "initial_weights_sha256": weights_fingerprint,
        "determinism": determinism,
    }
    record["capture_seconds"] = time.perf_counter() - started
    return record
