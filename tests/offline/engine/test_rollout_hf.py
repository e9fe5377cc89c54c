"""The hf rollout backend: grouping, masks, log-probabilities, sampling knobs, determinism."""

import pytest
import torch

from tests.conftest import small_config
from workers.models.policy import load_policy
from workers.rollout import SamplingParams, StopRule
from workers.rollout.hf import HFBackend, ShrinkingBatch, finish, restrict
from workers.tasks import build_task


@pytest.fixture(scope="module")
def policy():
    cfg = small_config(model={"warmup_steps": 0})  # random weights: long, varied completions
    return load_policy(cfg, build_task(cfg), torch.device("cpu"))


PROMPTS = ["1+2=", "12+7-3=", "9="]


def encoded(policy):
    return [policy.encode_prompt(p) for p in PROMPTS]


def teacher_forced_logprobs(policy, prompt, tokens, temperature):
    """log pi(token_t | prompt, tokens_<t) from one full forward pass, no cache, no padding."""
    ids = torch.tensor([prompt + tokens])
    with torch.no_grad():
        logits = policy.model(input_ids=ids).logits[0, len(prompt) - 1 : -1]
    return torch.log_softmax(logits / temperature, -1).gather(-1, torch.tensor(tokens)[:, None])[:, 0]


def test_each_group_is_conditioned_on_its_own_prompt_and_logprobs_match_a_full_forward(policy):
    out = HFBackend(policy).generate(encoded(policy), 3, SamplingParams(6, 1.0), torch.Generator().manual_seed(0))
    assert out.tokens.shape[0] == 9 and out.tokens.shape == out.logprobs.shape == out.mask.shape
    for row in range(9):
        prompt = encoded(policy)[row // 3]
        length = int(out.lengths[row])
        expected = teacher_forced_logprobs(policy, prompt, out.tokens[row, :length].tolist(), 1.0)
        torch.testing.assert_close(out.logprobs[row, :length], expected, atol=1e-4, rtol=1e-4)
        assert (out.logprobs[row, length:] == 0).all()


def test_greedy_is_the_argmax_and_top_k_one_is_greedy(policy):
    backend, gen = HFBackend(policy), torch.Generator().manual_seed(0)
    greedy = backend.generate(encoded(policy), 1, SamplingParams(5, 0.0), gen)
    top1 = backend.generate(encoded(policy), 1, SamplingParams(5, 1.0, top_k=1), gen)
    assert torch.equal(greedy.tokens, top1.tokens)
    prompt, first = encoded(policy)[0], int(greedy.tokens[0, 0])
    with torch.no_grad():
        logits = policy.model(input_ids=torch.tensor([prompt])).logits[0, -1]
    assert first == int(logits.argmax())


def test_same_generator_seed_same_samples_other_seed_other_samples(policy):
    backend, params = HFBackend(policy), SamplingParams(6, 1.0)
    a = backend.generate(encoded(policy), 4, params, torch.Generator().manual_seed(1))
    b = backend.generate(encoded(policy), 4, params, torch.Generator().manual_seed(1))
    c = backend.generate(encoded(policy), 4, params, torch.Generator().manual_seed(2))
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.logprobs, b.logprobs)
    assert not torch.equal(a.tokens, c.tokens)


def test_top_k_samples_only_the_k_likeliest_tokens(policy):
    out = HFBackend(policy).generate(
        encoded(policy)[:1], 64, SamplingParams(1, 1.0, top_k=3), torch.Generator().manual_seed(0)
    )
    with torch.no_grad():
        logits = policy.model(input_ids=torch.tensor([encoded(policy)[0]])).logits[0, -1]
    assert set(out.tokens[:, 0].tolist()) <= set(logits.topk(3).indices.tolist())


def test_top_p_keeps_the_smallest_set_reaching_the_mass():
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    kept = restrict(probs.log(), top_k=0, top_p=0.7).isfinite()
    assert kept.tolist() == [[True, True, False, False]]
    kept = restrict(probs.log(), top_k=0, top_p=0.5).isfinite()
    assert kept.tolist() == [[True, False, False, False]]


def test_masks_end_at_the_first_end_of_sequence_token():
    eos = 2
    tokens = torch.tensor([[5, 6, eos, 0, 0], [5, eos, 0, 0, 0], [5, 6, 7, 8, 9]])
    out = finish(tokens, torch.full((3, 5), -1.0), eos)
    assert out.mask.tolist() == [[1, 1, 1, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1]]
    assert out.truncated.tolist() == [False, False, True]
    assert out.lengths.tolist() == [3, 2, 5]
    assert out.logprobs[0].tolist() == [-1, -1, -1, 0, 0]


def rows_fed(policy, monkeypatch) -> list[int]:
    """The batch size of every forward the policy's model runs from now on."""
    fed, forward = [], policy.model.forward

    def counting(*args, **kwargs):
        fed.append(kwargs["input_ids"].shape[0])
        return forward(*args, **kwargs)

    monkeypatch.setattr(policy.model, "forward", counting)
    return fed


def test_ended_rows_leave_the_batch_and_every_row_keeps_the_tokens_of_decoding_them_all(policy, monkeypatch):
    backend, params = HFBackend(policy), SamplingParams(24, 1.0)
    prompts, limits = encoded(policy), [24, 6, 16]  # rows end by end-of-sequence and by their own limits
    fed = rows_fed(policy, monkeypatch)
    shrunk = backend.generate(prompts, 8, params, torch.Generator().manual_seed(3), limits=limits)
    shrunk_fed, fed[:] = list(fed), []
    monkeypatch.setattr(ShrinkingBatch, "SHRINK_AT", 0.0)  # never: every row decodes to the end
    whole = backend.generate(prompts, 8, params, torch.Generator().manual_seed(3), limits=limits)
    assert set(fed[1:]) == {24}  # the prefill is per prompt (3 rows), then all 24 rows every token
    assert min(shrunk_fed[1:]) < 24 and len(shrunk_fed) == len(fed)
    assert shrunk_fed[1:] == sorted(shrunk_fed[1:], reverse=True)  # rows leave, none comes back
    assert torch.equal(shrunk.tokens, whole.tokens) and torch.equal(shrunk.mask, whole.mask)
    torch.testing.assert_close(shrunk.logprobs, whole.logprobs, atol=1e-5, rtol=0)  # rounding of other batch sizes
    assert torch.equal(shrunk.truncated, whole.truncated)


def test_rows_leave_the_batch_under_a_stop_rule_that_reads_hidden_states_and_it_sees_every_rows_state(
    policy, monkeypatch
):
    """A stop rule reading the hidden state (arrol's head) gets one state per row, as when every row decodes to the
    end, while the rows that ended leave the batch: the rows still going have the states of decoding them all."""

    def generate():
        seen = []

        def keep_all(partial):
            seen.append((partial.hidden.clone(), partial.finished.clone()))
            return torch.zeros_like(partial.finished)

        rule = StopRule(abort=keep_all, every=2, wants_hidden=True)
        out = HFBackend(policy).generate(
            encoded(policy), 8, SamplingParams(24, 1.0), torch.Generator().manual_seed(3), limits=[24, 6, 16], stop=rule
        )
        return out, seen

    fed = rows_fed(policy, monkeypatch)
    shrunk, seen_shrunk = generate()
    shrunk_fed, fed[:] = list(fed), []
    monkeypatch.setattr(ShrinkingBatch, "SHRINK_AT", 0.0)  # never: every row decodes to the end
    whole, seen_whole = generate()
    assert min(shrunk_fed[1:]) < 24 and set(fed[1:]) == {24}
    assert torch.equal(shrunk.tokens, whole.tokens) and len(seen_shrunk) == len(seen_whole) > 2
    for (states, finished), (states_whole, _) in zip(seen_shrunk, seen_whole):
        assert states.shape == states_whole.shape and states.shape[0] == 24
        going = ~finished
        torch.testing.assert_close(states[going], states_whole[going], atol=1e-4, rtol=0)
    assert not seen_shrunk[-1][1].all() and seen_shrunk[-1][1].any()  # the last check saw rows ended and going
