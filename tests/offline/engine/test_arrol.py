"""arrol: over-sampled groups pruned to G correctness-balanced rollouts by a success head trained online."""

import torch

from tests.conftest import small_config
from workers.config import resolve
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.generate import GENERATORS
from workers.pipeline.generate.arrol.component import HIDDEN_AT_CHECK, balanced_survivors
from workers.reporting import MemoryReporter
from workers.training.trainer import Trainer


def test_the_survivors_are_balanced_between_likely_right_and_likely_wrong():
    predicted = torch.tensor([0.9, 0.8, 0.85, 0.7, 0.95, 0.75, 0.1, 0.2])  # 6 likely right, 2 likely wrong
    chosen = balanced_survivors(predicted, 4)
    assert sorted(chosen) == [0, 4, 6, 7]  # the two surest right and the two likely wrong
    assert balanced_survivors(torch.tensor([0.5, 0.6, 0.4]), 3) == [0, 1, 2]
    assert len(balanced_survivors(torch.rand(9), 5)) == 5


class Batch:
    def __init__(self, correct, states):
        self.correct = torch.tensor(correct)
        self.num_samples = len(correct)
        self.attached = {HIDDEN_AT_CHECK: states}


def test_the_head_learns_a_separable_signal_from_the_scored_survivors():
    cfg = resolve({"method": "arrol", "generate": {"warmup_steps": 2, "head_steps": 50}})
    arrol = GENERATORS.get("arrol")(cfg)
    g = torch.Generator().manual_seed(0)
    direction = torch.randn(16, generator=g)
    accuracies = []
    for _ in range(10):
        x = torch.randn(64, 16, generator=g)
        correct = (x @ direction > 0).tolist()
        assert arrol.predict(x) is None or arrol.trained >= 2  # no predictions during the warm-up
        arrol.observe(Batch(correct, x))
        accuracies.append(arrol.metrics()["pipeline/generate/head_accuracy"])
    assert accuracies[-1] > 0.9 and accuracies[-1] > accuracies[0]
    x = torch.randn(200, 16, generator=g)
    assert ((arrol.predict(x) > 0.5) == (x @ direction > 0)).float().mean() > 0.9


def test_an_arrol_run_keeps_g_rows_per_prompt_and_decodes_fewer_tokens_than_all_started():
    cfg = small_config(
        method="arrol",
        model={"warmup_steps": 0},  # an untrained policy: long rollouts, so pruning saves tokens
        rollout={"max_new_tokens": 12},
        generate={"warmup_steps": 1},
        schedule={"steps": 4},
    )
    reporter = MemoryReporter()
    trainer = Trainer(cfg, reporter)
    trainer.run()
    rows = reporter.metric_rows
    assert all(r["pipeline/generate/samples_per_prompt"] == cfg.rollout.group_size for r in rows)
    assert all(r["pipeline/generate/pruned"] == cfg.rollout.prompts_per_step * cfg.rollout.group_size for r in rows)
    assert all(0 <= r["pipeline/generate/head_accuracy"] <= 1 for r in rows[1:])
    assert trainer.stages.generate.trained == 4
    # the pruned half stopped at the check: far fewer tokens than 8 full rollouts per prompt
    started = 2 * cfg.rollout.prompts_per_step * cfg.rollout.group_size
    per_step = rows[-1]["counters/rollout_tokens"] / len(rows)
    assert per_step < started * 12 * 0.75


def test_the_head_trains_on_each_rows_own_state_when_a_control_stage_adds_rollouts():
    """2 prompts x 4 rollouts, then 2 extras for prompt 0 (a control stage's second stage). Each row's state at the
    check is +1 in one coordinate when it ends correct, -1 when wrong: paired with its own row, a pair's state
    always agrees with its label. Stacked in generation order (this component's former pairing), 6 of the 10
    pairs took another row's correctness."""
    first = RolloutBatch.concat([single_group(correct) for correct in ([1, 0, 0, 1], [0, 1, 1, 1])])
    extra = single_group([1, 1])
    extra.examples = [first.examples[0]]
    grown = first.add_to_groups([0], extra)
    assert grown.group_sizes == [6, 4]
    arrol = GENERATORS.get("arrol")(resolve({"method": "arrol"}))
    x, y = arrol.training_pairs(grown)
    assert torch.equal(x[:, 0] > 0, y > 0.5)  # every state beside its own row's correctness
    assert torch.equal(x[:, 1], grown.attached[HIDDEN_AT_CHECK][:, 1])  # and in the rows' order
    # the former pairing: the states in generation order beside the grown batch's rows
    stacked = torch.cat([first.attached[HIDDEN_AT_CHECK], extra.attached[HIDDEN_AT_CHECK]])
    assert int((stacked[:, 1] != x[:, 1]).sum()) == 6  # 6 of 10 states beside another rollout
    assert not torch.equal(stacked[:, 0] > 0, y > 0.5)  # and some of them beside the other correctness


def single_group(correct: list[int]) -> RolloutBatch:
    """One group as arrol returns it: each row's state at the check is (+1 or -1 for its correctness, an id, 0)."""
    from tests.offline.engine.test_ragged import scored

    batch = scored([len(correct)], seed=len(correct) + sum(correct))
    batch.correct = torch.tensor(correct, dtype=torch.bool)
    states = torch.zeros(len(correct), 3)
    states[:, 0] = batch.correct.float() * 2 - 1
    states[:, 1] = torch.rand(len(correct))  # which row it is
    batch.attached[HIDDEN_AT_CHECK] = states
    return batch


def test_in_a_dars_run_every_rows_state_is_the_policys_own_hidden_state_of_that_row():
    """arrol under DARS: the states the head learns from are those of the rows beside them, recomputed by the policy
    from each row's own prompt and tokens (rows shorter than the check are not checked: their state has none)."""
    cfg = small_config(
        method="arrol",
        control={"name": "dars", "mass": "without-std", "max_extra": 4},
        model={"warmup_steps": 0},  # an untrained policy: long rollouts reach the check
        rollout={"max_new_tokens": 6},
        generate={"check_at": 3},
        schedule={"steps": 2},
    )
    trainer = Trainer(cfg, MemoryReporter())
    checked = []
    observe = trainer.stages.generate.observe

    def observe_and_check(batch):
        states, lengths = batch.attached[HIDDEN_AT_CHECK], batch.lengths
        for row in range(batch.num_samples):
            if lengths[row] >= 3:
                assert torch.allclose(states[row], hidden_at_check(trainer, batch, row, 3), atol=1e-4), row
                checked.append(max(batch.group_sizes))
        observe(batch)

    trainer.stages.generate.observe = observe_and_check
    assert trainer.run() == "succeeded"
    assert checked and max(checked) > cfg.rollout.group_size  # grown groups were among the rows checked


@torch.no_grad()
def hidden_at_check(trainer, batch, row: int, check_at: int) -> torch.Tensor:
    """The last layer's state the stop rule read after `check_at` tokens: at the token before the latest."""
    prompt = batch.prompt_ids[int(batch.group_index[row])]
    ids = torch.tensor([prompt + batch.tokens[row, : check_at - 1].tolist()])
    out = trainer.policy.model(input_ids=ids, output_hidden_states=True)
    return out.hidden_states[-1][0, -1].float()


def test_a_row_that_ended_before_its_check_has_no_state_and_the_rest_have_their_own():
    """Rows shorter than `check_at` were never checked: their state is NaN, so the head takes no pair from them
    (the state read at the check would be of an earlier token). The rows that reached it keep the policy's."""
    cfg = small_config(method="arrol", rollout={"max_new_tokens": 6}, generate={"check_at": 3}, schedule={"steps": 2})
    trainer = Trainer(cfg, MemoryReporter())
    seen = {"short": 0, "checked": 0}
    observe = trainer.stages.generate.observe

    def observe_and_check(batch):
        states, lengths = batch.attached[HIDDEN_AT_CHECK], batch.lengths
        for row in range(batch.num_samples):
            if lengths[row] < 3:
                assert torch.isnan(states[row]).all(), row
                seen["short"] += 1
            else:
                assert torch.allclose(states[row], hidden_at_check(trainer, batch, row, 3), atol=1e-4), row
                seen["checked"] += 1
        observe(batch)

    trainer.stages.generate.observe = observe_and_check
    assert trainer.run() == "succeeded"
    assert seen["short"] > 0 and seen["checked"] > 0, seen
