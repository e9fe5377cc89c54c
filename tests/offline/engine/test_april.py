"""APRIL: over-provisioned groups, a step that stops once enough are finished, unfinished completions continued."""

import numpy as np
import pytest
import torch

from tests.conftest import small_config
from workers.config import resolve
from workers.pipeline.generate import GENERATORS
from workers.pipeline.history import PromptHistory
from workers.pipeline.stages import Budget, StageContext
from workers.reporting import MemoryReporter
from workers.rollout import Generations, Partial
from workers.tasks import Example
from workers.training.trainer import Trainer

PAD, EOS = 0, 1


class LongTailBackend:
    """A scripted sampler (a test double of a backend, honouring its whole protocol): every new completion
    gets an id (its first token) and a length from a heavy-tailed (Pareto) distribution; it emits one token per
    decoding step, each with a distinct log-probability remembered by (id, position), ends with EOS at its
    length, and obeys limits, prefixes and stop rules as the hf backend does."""

    def __init__(self, seed=0):
        self.rng = np.random.default_rng(seed)
        self.length: dict[int, int] = {}  # completion id -> the length it will end at
        self.logprob: dict[tuple[int, int], float] = {}
        self.calls: list[list] = []  # per call: the prefixes it was asked to continue

    def new_row(self) -> int:
        row_id = len(self.length) + 2
        self.length[row_id] = int(min(60, 2 + self.rng.pareto(1.2) * 3))
        return row_id

    def token(self, row: list[int], row_id: int) -> tuple[int, float]:
        position = len(row)
        value = float(np.float32(-self.rng.uniform(0.01, 3)))  # as a float32 tensor will hold it
        self.logprob[(row_id, position)] = value
        if position == 0:
            return row_id, value
        return (EOS if position + 1 >= self.length[row_id] else 100 + position), value

    def generate(self, prompts, n, params, generator, limits=None, prefixes=None, stop=None):
        sizes = [n] * len(prompts) if isinstance(n, int) else list(n)
        limits = limits or [params.max_new_tokens] * len(prompts)
        row_limits = [limit for limit, size in zip(limits, sizes) for _ in range(size)]
        prefixes = prefixes or [None] * sum(sizes)
        self.calls.append(list(prefixes))
        rows = [list(p.tokens) if p else [] for p in prefixes]
        lps = [list(p.logprobs) if p else [] for p in prefixes]
        ids = [row[0] if row else self.new_row() for row in rows]
        start = [len(r) for r in rows]
        finished = [len(r) >= lim for r, lim in zip(rows, row_limits)]
        stopped, truncated = [False] * len(rows), [False] * len(rows)
        t = 0
        while not all(finished):
            for k, row in enumerate(rows):
                if finished[k]:
                    continue
                token, value = self.token(row, ids[k])
                row.append(token)
                lps[k].append(value)
                if token == EOS:
                    finished[k] = True
                elif len(row) >= row_limits[k]:
                    finished[k], truncated[k] = True, True
            t += 1
            if stop and stop.abort and t % stop.every == 0:
                new = [torch.tensor(r[s:] + [PAD] * (t - len(r) + s)) for r, s in zip(rows, start)]
                cut = stop.abort(Partial(torch.stack(new), torch.zeros(len(rows), t), torch.tensor(finished), None))
                for k in cut.nonzero().flatten().tolist():
                    if not finished[k]:
                        finished[k] = stopped[k] = True
        width = max(1, max(len(r) for r in rows))
        tokens = torch.tensor([r + [PAD] * (width - len(r)) for r in rows])
        logprobs = torch.tensor([v + [0.0] * (width - len(v)) for v in lps])
        mask = torch.tensor([[1.0] * len(r) + [0.0] * (width - len(r)) for r in rows])
        return Generations(tokens, logprobs, mask, torch.tensor(truncated), torch.tensor(stopped))


class TextPolicy:
    pad_id, device = PAD, torch.device("cpu")

    def encode_prompt(self, prompt):
        return [ord(c) for c in prompt]

    def decode_completions(self, out):
        return [" ".join(map(str, row[: int(n)].tolist())) for row, n in zip(out.tokens, out.lengths)]


def context(backend, step, draw):
    return StageContext(TextPolicy(), backend, torch.Generator(), 1.0, 1.0, 0, step, PromptHistory(), draw)


def test_no_started_completion_is_dropped_and_each_continues_from_its_stored_prefix():
    cfg = resolve({"method": "april", "rollout": {"prompts_per_step": 4, "group_size": 4, "max_new_tokens": 64}})
    april, backend = GENERATORS.get("april")(cfg), LongTailBackend()
    counter = iter(range(10_000))
    budget = Budget(prompts=4, group_size=4, max_new_tokens=64)

    def draw(n):
        return [Example(f"p{next(counter)}", "0") for _ in range(n)], budget

    returned: list[list[int]] = []  # every completion trained on, as its tokens
    stored: dict[int, tuple] = {}  # completion id -> the tokens and log-probabilities APRIL kept for it
    resumed = 0
    for step in range(1, 41):
        examples, granted = draw(4)
        batch = april(context(backend, step, draw), examples, granted)
        assert batch.num_groups == 4 and batch.group_sizes == [4, 4, 4, 4]
        for prefix in backend.calls[-1]:  # what this step continued matches what was stored for it
            if prefix is not None:
                resumed += 1
                assert stored[prefix.tokens[0]] == (prefix.tokens, prefix.logprobs)
        for row in range(batch.num_samples):
            n = int(batch.lengths[row])
            tokens = batch.tokens[row, :n].tolist()
            returned.append(tokens)
            # every token's log-probability is the one the sampler gave when it drew that token
            expected = [backend.logprob[(tokens[0], i)] for i in range(n)]
            assert batch.logprobs[row, :n].tolist() == expected
            assert tokens[-1] == EOS or n == 64
        stored = {row.tokens[0]: (row.tokens, row.logprobs) for g in april.pool for row in g.rows if row.tokens}
    assert resumed > 20, "the long tail should leave completions to continue"
    in_pool = sum(len(g.rows) for g in april.pool)
    started = len(backend.length)
    # nothing dropped: every completion ever begun was trained on exactly once, or is still in the pool
    assert len(returned) + in_pool == started
    assert len({tuple(t[:1]) for t in returned}) == len(returned)
    assert all(len(t) == backend.length[t[0]] for t in returned)  # each ran to its own end, never cut short


def test_the_step_stops_once_its_groups_are_finished():
    cfg = resolve({"method": "april", "rollout": {"prompts_per_step": 2, "group_size": 2, "max_new_tokens": 64}})
    april, backend = GENERATORS.get("april")(cfg), LongTailBackend(seed=3)
    budget = Budget(prompts=2, group_size=2, max_new_tokens=64)
    counter = iter(range(100))

    def draw(n):
        return [Example(f"q{next(counter)}", "0") for _ in range(n)], budget

    april(context(backend, 1, draw), *draw(2))
    assert len(april.pool) == 2  # 2 x oversample groups in flight, 2 returned
    assert april.metrics()["pipeline/generate/stopped_rows"] > 0
    assert any(not row.ended for g in april.pool for row in g.rows)


def test_an_april_run_trains_on_whole_groups_and_counts_only_decoded_tokens():
    cfg = small_config(method="april", model={"warmup_steps": 0}, rollout={"max_new_tokens": 12}, schedule={"steps": 3})
    reporter = MemoryReporter()
    trainer = Trainer(cfg, reporter)
    trainer.run()
    rows = reporter.metric_rows[-3:]
    assert all(r["pipeline/filter/kept_groups"] == 4 for r in rows)
    assert sum(r["pipeline/generate/resumed_rows"] for r in rows) > 0
    decoded = sum(r["pipeline/generate/decoded_tokens"] for r in rows)
    assert decoded > 0 and rows[-1]["counters/rollout_tokens"] == decoded
    # tokens are conserved: every token decoded is in a completion trained on or still in the pool
    trained = sum(r["completions/mean_length"] * 16 for r in rows)
    pooled = sum(len(row.tokens) for g in trainer.stages.generate.pool for row in g.rows)
    assert trained + pooled == pytest.approx(decoded)
    assert trainer.state.data_stream.examples == 4 + 4 * 3  # 8 groups in flight at the first step, 4 new per step after
