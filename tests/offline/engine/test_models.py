"""Models: the tiny preset is deterministic and cached; any local causal LM loads without a network."""

import time

import pytest
import torch

from tests.conftest import small_config
from workers.errors import ConfigError
from workers.models import check_model_source
from workers.models.policy import load_policy
from workers.models.tiny import char_tokenizer, warm_start
from workers.reporting import MemoryReporter
from workers.tasks import build_task
from workers.training.trainer import Trainer


def test_tiny_warm_start_is_deterministic_and_cached(tmp_path, monkeypatch):
    cfg = small_config(model={"warmup_steps": 40})
    task = build_task(cfg)
    fingerprints = []
    for cache in ("a", "b"):
        monkeypatch.setenv("ROLLOUTLAB_CACHE", str(tmp_path / cache))
        fingerprints.append(load_policy(cfg, task, torch.device("cpu")).weights_fingerprint())
    assert fingerprints[0] == fingerprints[1]  # built twice from scratch: the same weights
    started = time.perf_counter()
    again = load_policy(cfg, task, torch.device("cpu"))
    assert again.weights_fingerprint() == fingerprints[0]
    assert time.perf_counter() - started < 5  # loaded from the cache, not trained again
    assert len(list((tmp_path / "b" / "tiny").iterdir())) == 1  # no staging directory left behind


def test_tiny_init_seed_changes_the_weights_and_the_run_seed_does_not():
    base = small_config(model={"warmup_steps": 0})
    task = build_task(base)
    weights = lambda cfg: load_policy(cfg, task, torch.device("cpu")).weights_fingerprint()  # noqa: E731
    assert weights(base) == weights(small_config(model={"warmup_steps": 0}, seed=5))
    assert weights(base) != weights(small_config(model={"warmup_steps": 0, "init_seed": 1}))


def test_warm_start_makes_the_tiny_model_better_than_random():
    # 100 held-out problems and 600 warm-up steps: at 40 and 300 the margin was one problem
    cold = small_config(model={"warmup_steps": 0}, eval={"every": 1, "size": 100, "k": 2})
    warm = small_config(model={"warmup_steps": 600}, eval={"every": 1, "size": 100, "k": 2})
    scores = [Trainer(cfg, MemoryReporter()).evaluate(0)["eval/pass@1"] for cfg in (cold, warm)]
    assert scores[1] > scores[0] + 0.1


def save_gpt2_with_bpe(path, cfg):
    """A GPT-2 architecture and a byte-level BPE tokenizer trained here: nothing like the tiny preset.

    A short supervised phase teaches it to answer and to stop, so RL has a signal."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    core = Tokenizer(models.BPE(unk_token=None))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    corpus = [f"{a}+{b}={a + b}" for a in range(10) for b in range(10)] + [
        f"{a}-{b}={a - b}" for a in range(10) for b in range(10)
    ]
    core.train_from_iterator(
        corpus,
        trainers.BpeTrainer(
            vocab_size=300, special_tokens=["<|end|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|end|>", pad_token="<|end|>")
    model = GPT2LMHeadModel(
        GPT2Config(
            vocab_size=len(tokenizer),
            n_embd=32,
            n_layer=2,
            n_head=2,
            n_positions=64,
            eos_token_id=tokenizer.eos_token_id,
            bos_token_id=tokenizer.eos_token_id,
        )
    )
    warm_start(model, tokenizer, build_task(cfg), cfg)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)


def test_a_local_pretrained_directory_trains(tmp_path):
    save_gpt2_with_bpe(tmp_path / "gpt2-bpe", small_config(model={"warmup_steps": 150}))
    cfg = small_config(model={"name": str(tmp_path / "gpt2-bpe")}, schedule={"steps": 2, "save_final": True})
    reporter = MemoryReporter()
    trainer = Trainer(cfg, reporter, artifacts_dir=tmp_path / "run")
    before = {n: p.detach().clone() for n, p in trainer.policy.model.named_parameters()}
    assert trainer.run() == "succeeded"
    assert trainer.policy.source == str((tmp_path / "gpt2-bpe").resolve())
    changed = [not torch.equal(before[n], p) for n, p in trainer.policy.model.named_parameters()]
    assert all(changed)
    assert "checkpoint" in {kind for _, kind in reporter.artifacts}
    assert (tmp_path / "run" / "checkpoints" / "step-2" / "run_config.yaml").is_file()


def test_the_tiny_char_tokenizer_round_trips_text():
    tokenizer = char_tokenizer()
    ids = tokenizer("12+3=\n", add_special_tokens=True)["input_ids"]
    assert ids[0] == tokenizer.bos_token_id and len(ids) == 7
    assert tokenizer.decode(ids, skip_special_tokens=True) == "12+3=\n"


def test_a_model_name_that_is_no_directory_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="model.name: .* is neither 'tiny' nor a directory"):
        check_model_source(small_config(model={"name": str(tmp_path / "nothing")}))


@pytest.mark.parametrize("hidden_size, layers, heads", [(32, 2, 2), (64, 3, 4)])
def test_the_size_formula_counts_the_tiny_networks_parameters(hidden_size, layers, heads):
    """The web side sizes a tiny model by formula (no torch there); it must be the network's real count."""
    from workers.models.shape import VOCAB_SIZE, tiny_parameters
    from workers.models.tiny import tiny_network

    cfg = small_config(model={"hidden_size": hidden_size, "layers": layers, "heads": heads})
    network = tiny_network(cfg, VOCAB_SIZE)
    assert tiny_parameters(hidden_size, layers) == sum(p.numel() for p in network.parameters())
