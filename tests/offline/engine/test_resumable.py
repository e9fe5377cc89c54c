"""Resumable generation: a stop rule cuts rows short; a prefix continues them exactly where they stopped."""

import pytest
import torch

from tests.conftest import small_config
from workers.models.policy import load_policy
from workers.rollout import Prefix, SamplingParams, StopRule
from workers.rollout.hf import HFBackend
from workers.tasks import build_task


@pytest.fixture(scope="module")
def policy():
    cfg = small_config(model={"warmup_steps": 0})  # random weights: long completions that rarely stop
    return load_policy(cfg, build_task(cfg), torch.device("cpu"))


def prompts(policy):
    return [policy.encode_prompt(p) for p in ("1+2=", "12+7-3=")]


def teacher_forced(policy, prompt, tokens):
    ids = torch.tensor([prompt + tokens])
    with torch.no_grad():
        logits = policy.model(input_ids=ids).logits[0, len(prompt) - 1 : -1]
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(tokens)[:, None])[:, 0]


def test_an_abort_predicate_is_asked_every_k_tokens_and_cuts_the_rows_it_names(policy):
    asked = []

    def abort(partial):
        asked.append(partial.tokens.shape[1])
        cut = torch.zeros_like(partial.finished)
        cut[0] = partial.tokens.shape[1] >= 4  # stop row 0 at its fourth token
        return cut

    out = HFBackend(policy).generate(
        prompts(policy),
        2,
        SamplingParams(10, 1.0),
        torch.Generator().manual_seed(0),
        stop=StopRule(abort=abort, every=2),
    )
    assert asked[:2] == [2, 4] and all(n % 2 == 0 for n in asked)
    assert out.stopped.tolist()[0] and int(out.lengths[0]) == 4
    assert not out.truncated[0]  # cut short is not the same as out of room
    assert not out.stopped[1:].any()


def test_a_stopped_row_continues_from_its_prefix_as_if_never_interrupted(policy):
    backend, ps = HFBackend(policy), prompts(policy)
    cut_at_3 = StopRule(abort=lambda partial: torch.full_like(partial.finished, partial.tokens.shape[1] >= 3))
    first = backend.generate(ps, 2, SamplingParams(9, 1.0), torch.Generator().manual_seed(1), stop=cut_at_3)
    assert first.stopped.any()
    prefixes = [
        Prefix(
            tuple(first.tokens[r, : first.lengths[r]].tolist()), tuple(first.logprobs[r, : first.lengths[r]].tolist())
        )
        if first.stopped[r]
        else None
        for r in range(4)
    ]
    second = backend.generate(ps, 2, SamplingParams(9, 1.0), torch.Generator().manual_seed(2), prefixes=prefixes)
    for r, prefix in enumerate(prefixes):
        length = int(second.lengths[r])
        assert length <= 9  # the limit counts the prefix
        if prefix is None:
            continue
        assert second.tokens[r, :3].tolist() == list(prefix.tokens)  # the stored prefix, untouched
        assert second.logprobs[r, :3].tolist() == pytest.approx(list(prefix.logprobs))  # with its stored log-probs
        expected = teacher_forced(policy, ps[r // 2], second.tokens[r, :length].tolist())
        torch.testing.assert_close(second.logprobs[r, :length], expected, atol=1e-4, rtol=1e-4)


def test_finished_rows_stops_the_rest_once_enough_have_ended(policy):
    cfg = small_config()  # warm-started: most answers end within a few tokens
    warm = load_policy(cfg, build_task(cfg), torch.device("cpu"))
    out = HFBackend(warm).generate(
        prompts(warm), 8, SamplingParams(12, 1.0), torch.Generator().manual_seed(0), stop=StopRule(finished_rows=4)
    )
    ended = ~out.stopped & ~out.truncated
    assert int(ended.sum()) >= 4 and out.stopped.any()
    assert (out.lengths[out.stopped] <= out.lengths[ended].max()).all()  # cut no later than the last to end


def test_a_stop_rule_can_see_the_policy_hidden_state(policy):
    seen = []

    def abort(partial):
        seen.append(None if partial.hidden is None else tuple(partial.hidden.shape))
        return torch.zeros_like(partial.finished)

    HFBackend(policy).generate(
        prompts(policy), 3, SamplingParams(4, 1.0), torch.Generator().manual_seed(0),
        stop=StopRule(abort=abort, wants_hidden=True),
    )  # fmt: skip
    assert seen[0] is None and set(seen[1:]) == {(6, 32)}  # after the first token: (rows, hidden size)
