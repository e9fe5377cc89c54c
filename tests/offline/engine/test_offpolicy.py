"""Off-policy corrections of the token clip (TIS, MinPRO, VCPO) on constructed log-probabilities."""

import math

import pytest
import torch

from tests.conftest import small_config
from workers import metrics
from workers.config import resolve
from workers.errors import ConfigError
from workers.pipeline.objective import OBJECTIVES
from workers.pipeline.objective.base import KL_ESTIMATORS, aggregator, effective_sample_size, off_policy_stats
from workers.pipeline.stages import LossInputs
from workers.reporting import MemoryReporter
from workers.training.trainer import Trainer


def objective(method=None, **knobs):
    raw = {"method": method} if method else {}
    if knobs:
        raw["objective"] = knobs
    cfg = resolve(raw)
    return OBJECTIVES.get(cfg.objective.name)(cfg)


def loss_inputs(new, old, mask, adv, sampler=None, group=None, how="token-mean"):
    return LossInputs(new, old, adv, mask, aggregator(how, mask, mask.shape[1]), sampler, group)


# ------------------------------------------------------------------ truncated importance sampling
TIS = {"name": "truncated-is", "is_bound": 2.0}
OLD = torch.full((2, 5), -1.0)  # (B, T): the trainer's pi_old
TOKEN_W = torch.tensor([[0.5, 1.5, 1.9, 3.0, 10.0], [1.0, 1.2, 0.8, 1.0, 1.0]])  # pi_old / pi_sampler
SAMPLER = OLD - TOKEN_W.log()
ONES = torch.ones(2, 5)


def test_tis_truncates_each_token_weight_exactly_at_the_bound():
    tis = objective(**TIS)
    weight, stats = tis.behaviour_weights(loss_inputs(OLD, OLD, ONES, torch.ones(2), SAMPLER))
    expected = torch.tensor([[0.5, 1.5, 1.9, 2.0, 2.0], [1.0, 1.2, 0.8, 1.0, 1.0]])
    torch.testing.assert_close(weight, expected)
    assert stats[metrics.IS_OVER_BOUND] == pytest.approx(2 / 10)


def test_tis_loss_is_the_token_clip_surrogate_times_the_truncated_weight():
    gen = torch.Generator().manual_seed(3)
    new = OLD + 0.1 * torch.randn(2, 5, generator=gen)
    adv = torch.tensor([1.0, -2.0])
    out = objective(**TIS, clip_low=0.2, clip_high=0.2)(loss_inputs(new, OLD, ONES, adv, SAMPLER))
    total = 0.0
    for b in range(2):
        for t in range(5):
            ratio, a = math.exp(new[b, t] - OLD[b, t]), adv[b].item()
            surrogate = -min(ratio * a, min(max(ratio, 0.8), 1.2) * a)
            total += surrogate * min(TOKEN_W[b, t].item(), 2.0)
    assert out.loss.item() == pytest.approx(total / 10, rel=1e-5)


def test_tis_mask_mode_zeroes_the_tokens_over_the_bound_and_their_gradient():
    tis = objective(**TIS, is_mode="mask")
    new = OLD.clone().requires_grad_(True)
    x = loss_inputs(new, OLD, ONES, torch.tensor([1.0, 1.0]), SAMPLER)
    weight, _ = tis.behaviour_weights(x)
    torch.testing.assert_close(weight, torch.tensor([[0.5, 1.5, 1.9, 0.0, 0.0], [1.0, 1.2, 0.8, 1.0, 1.0]]))
    tis(x).loss.backward()
    assert (new.grad[0, 3:] == 0).all()
    assert (new.grad[0, :3] != 0).all() and (new.grad[1] != 0).all()


def test_tis_sequence_level_weight_is_the_product_of_the_token_weights_over_the_loss_tokens():
    mask = torch.tensor([[1.0, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    token_w = torch.tensor([[1.2, 1.5, 1.1, 50.0, 50.0], [1.5, 1.5, 1.5, 1.0, 1.0]])  # padding ignored
    x = loss_inputs(OLD, OLD, mask, torch.ones(2), OLD - token_w.log())
    truncate, _ = objective(**TIS, is_level="sequence").behaviour_weights(x)
    masked, _ = objective(**TIS, is_level="sequence", is_mode="mask").behaviour_weights(x)
    assert truncate[0, :3].tolist() == pytest.approx([1.2 * 1.5 * 1.1] * 3, rel=1e-5)  # 1.98: under the bound
    assert truncate[1].tolist() == pytest.approx([2.0] * 5)  # 1.5^3 = 3.375, truncated for every token
    assert masked[0, :3].tolist() == pytest.approx([1.98] * 3, rel=1e-5)
    assert masked[1].tolist() == [0.0] * 5


def test_tis_weights_are_one_when_the_sampler_agrees_with_the_trainer():
    weight, stats = objective(**TIS).behaviour_weights(loss_inputs(OLD, OLD, ONES, torch.ones(2), OLD.clone()))
    assert (weight == 1).all() and stats[metrics.IS_WEIGHT_MEAN] == 1.0


def test_tis_refuses_a_run_whose_pi_old_is_the_samplers():
    with pytest.raises(ConfigError, match="objective.old_logprobs"):
        resolve({"objective": {"name": "truncated-is", "old_logprobs": "sampler"}})
    assert resolve({"objective": {"name": "truncated-is", "old_logprobs": "recompute"}}).objective.is_bound == 2
    assert resolve({"method": "tis"}).objective.old_logprobs == "auto"


def test_a_run_weighs_the_trainers_recomputed_pi_old_against_a_skewed_samplers():
    """The trainer keeps the sampler's log-probabilities when it recomputes pi_old: a sampler off by bf16-sized
    noise gives weights around 1, and a bound of 1.01 truncates some of them."""
    from tests.offline.engine.test_logprobs import SkewedSampler

    cfg = small_config(method="tis", objective={"old_logprobs": "recompute", "is_bound": 1.01}, schedule={"steps": 1})
    trainer = Trainer(cfg, MemoryReporter())
    trainer.backends.own = SkewedSampler(trainer.backends.own)
    trainer.run()
    row = trainer.reporter.metric_rows[-1]
    assert 0 < row[metrics.IS_OVER_BOUND] < 1
    assert row[metrics.IS_WEIGHT_MEAN] != pytest.approx(1.0, abs=1e-4) and row[metrics.IS_WEIGHT_MEAN] < 1.01


# ------------------------------------------------------------------ MinPRO
LOG_RATIO = torch.tensor(
    [
        [0.1, -0.2, 0.3, -0.5, 0.2, -3.0],  # the last token is padding: its low ratio must not count
        [0.3, 0.1, -0.4, 0.2, -0.1, 0.0],  # the third token is outside the loss (an advantage stage's mask)
    ]
)
MINPRO_MASK = torch.tensor([[1.0, 1, 1, 1, 1, 0], [1, 1, 0, 1, 1, 1]])


def test_minpro_ratio_is_the_tokens_own_ratio_times_the_smallest_ratio_before_it():
    old = torch.full((2, 6), -1.0)
    ratio = objective(name="min-prefix-ratio").ratio(loss_inputs(old + LOG_RATIO, old, MINPRO_MASK, torch.ones(2)))
    for b in range(2):  # a plain loop over the tokens in the loss
        smallest_before = math.inf
        for t in range(6):
            if MINPRO_MASK[b, t]:
                own = math.exp(LOG_RATIO[b, t])
                prefix = 1.0 if smallest_before == math.inf else smallest_before  # the first token: its own alone
                assert ratio[b, t].item() == pytest.approx(prefix * own, rel=1e-6)
                smallest_before = min(smallest_before, own)
    assert ratio[1, 3].item() == pytest.approx(math.exp(0.1) * math.exp(0.2))  # the masked -0.4 did not count


def test_minpro_differs_from_the_running_minimum_that_replaced_the_tokens_own_ratio():
    # row 0 at token 4: before it the smallest ratio is exp(-0.5), its own exp(0.2). The paper's form gives
    # exp(-0.3) = 0.74; the former form (prefix = inclusive) gave the running minimum itself, exp(-0.5) = 0.61.
    old = torch.full((2, 6), -1.0)
    x = loss_inputs(old + LOG_RATIO, old, MINPRO_MASK, torch.ones(2))
    paper = objective(name="min-prefix-ratio").ratio(x)
    inclusive = objective(name="min-prefix-ratio", prefix="inclusive").ratio(x)
    assert paper[0, 4].item() == pytest.approx(math.exp(-0.3))
    assert inclusive[0, 4].item() == pytest.approx(math.exp(-0.5))
    # token 2 of row 0: its own ratio exp(0.3) after exp(-0.2); inside the clip for the paper, clipped before
    assert paper[0, 2].item() == pytest.approx(math.exp(0.1))
    assert inclusive[0, 2].item() == pytest.approx(math.exp(-0.2))


def test_with_a_negative_advantage_a_low_ratio_early_no_longer_gates_every_later_token():
    # one completion, A < 0, clip 0.2: token 0's ratio is 0.7 (below 0.8); the later tokens' own ratios are 1.3.
    # The former running minimum held 0.7 for every later token: all clipped, no gradient after token 0. The
    # paper's form gives them 0.7 x 1.3 = 0.91, inside the clip: they keep their gradient.
    old = torch.full((1, 4), -1.0)
    new = (old + torch.tensor([[math.log(0.7), math.log(1.3), math.log(1.3), math.log(1.3)]])).requires_grad_(True)
    mask, adv = torch.ones(1, 4), torch.tensor([-1.0])
    objective(name="min-prefix-ratio")(loss_inputs(new, old, mask, adv)).loss.backward()
    assert (new.grad[0, 1:] != 0).all() and new.grad[0, 0] == 0
    former = new.detach().clone().requires_grad_(True)
    objective(name="min-prefix-ratio", prefix="inclusive")(loss_inputs(former, old, mask, adv)).loss.backward()
    assert (former.grad == 0).all()


def test_minpro_gradient_reaches_each_token_scaled_by_its_ratio():
    old = torch.full((2, 6), -1.0)
    new = (old + LOG_RATIO).requires_grad_(True)
    adv = torch.tensor([1.0, -1.0])
    minpro = objective(name="min-prefix-ratio", clip_low=0.99, clip_high=100.0)  # nothing clipped
    minpro(loss_inputs(new, old, MINPRO_MASK, adv)).loss.backward()
    ratio = minpro.ratio(loss_inputs(new.detach(), old, MINPRO_MASK, adv))  # the prefix minimum is a constant
    torch.testing.assert_close(new.grad, -adv[:, None] * ratio * MINPRO_MASK / MINPRO_MASK.sum())


def test_minpro_is_the_token_clip_on_policy():
    old = torch.full((2, 6), -1.0)
    adv = torch.tensor([1.0, -0.5])
    grads = []
    for name in ("min-prefix-ratio", "token-clip"):
        new = old.clone().requires_grad_(True)
        objective(name=name)(loss_inputs(new, old, MINPRO_MASK, adv)).loss.backward()
        grads.append(new.grad)
    torch.testing.assert_close(grads[0], grads[1])


# ------------------------------------------------------------------ VCPO
def sequences_off_by(spread: float, rows: int = 8, width: int = 4):
    """log pi - log pi_old = spread x a fixed pattern per sequence: 0 is on-policy, larger is further off."""
    gen = torch.Generator().manual_seed(11)
    pattern = torch.randn(rows, width, generator=gen)
    old = -torch.rand(rows, width, generator=gen) - 0.5
    return old + spread * pattern, old


def test_ess_is_the_squared_sum_over_n_times_the_sum_of_squares():
    w = torch.tensor([0.2, 1.0, 3.0, 0.5])
    assert effective_sample_size(w.log()) == pytest.approx(float(w.sum() ** 2 / (4 * (w**2).sum())), rel=1e-6)
    assert effective_sample_size(torch.zeros(5)) == pytest.approx(1.0)
    assert effective_sample_size(torch.tensor([0.0, -200.0, -200.0, -200.0])) == pytest.approx(1 / 4)


def test_vcpo_step_shrinks_as_the_ess_falls_and_is_reported():
    vcpo = objective(name="variance-controlled")
    mask, adv = torch.ones(8, 4), torch.linspace(-1, 1, 8)
    scales, esses = [], []
    for spread in (0.0, 0.2, 0.5, 1.0, 2.0):
        new, old = sequences_off_by(spread)
        out = vcpo(loss_inputs(new, old, mask, adv))
        log_w = (new - old).sum(-1)
        assert out.stats[metrics.ESS] == pytest.approx(effective_sample_size(log_w), rel=1e-6)
        assert out.stats[metrics.STEP_SCALE] == out.step_scale
        scales.append(out.step_scale)
        esses.append(out.stats[metrics.ESS])
    assert scales[0] == pytest.approx(1.0)
    assert all(a > b for a, b in zip(scales, scales[1:]))
    assert scales == pytest.approx(esses)  # ess_power 1
    new, old = sequences_off_by(1.0)
    half = objective(name="variance-controlled", ess_power=0.5)(loss_inputs(new, old, mask, adv))
    assert half.step_scale == pytest.approx(half.stats[metrics.ESS] ** 0.5)


def test_vcpo_baseline_is_the_squared_weight_mean_of_each_groups_advantages():
    new, old = sequences_off_by(0.7, rows=5)
    group = torch.tensor([0, 0, 0, 1, 2])  # group 2 has one sequence in this minibatch
    adv = torch.tensor([1.0, -0.5, 0.25, 2.0, 3.0])
    mask = torch.ones(5, 4)
    vcpo = objective(name="variance-controlled", clip_low=0.99, clip_high=100.0)
    plain = objective(name="token-clip", clip_low=0.99, clip_high=100.0)
    w2 = ((new - old).sum(-1) * 2).exp()
    b0 = float((w2[:3] * adv[:3]).sum() / w2[:3].sum())
    shifted = adv - torch.tensor([b0, b0, b0, 0.0, 0.0])  # groups 1 and 2: fewer than two rows, no baseline
    got = vcpo(loss_inputs(new, old, mask, adv, group=group)).loss
    want = plain(loss_inputs(new, old, mask, shifted)).loss
    assert got.item() == pytest.approx(want.item(), rel=1e-5)
    assert b0 != pytest.approx(0.0, abs=1e-3)


def test_vcpo_on_policy_with_group_centred_advantages_is_the_token_clip():
    old = -torch.rand(6, 4, generator=torch.Generator().manual_seed(5))
    adv = torch.tensor([1.0, -1.0, 0.0, 0.5, -0.25, -0.25])  # each group of three sums to 0
    group = torch.tensor([0, 0, 0, 1, 1, 1])
    grads = []
    for name in ("variance-controlled", "token-clip"):
        new = old.clone().requires_grad_(True)
        out = objective(name=name)(loss_inputs(new, old, torch.ones(6, 4), adv, group=group))
        out.loss.backward()
        grads.append(new.grad)
        assert out.step_scale == pytest.approx(1.0)
    torch.testing.assert_close(grads[0], grads[1])


def test_the_trainer_scales_the_learning_rate_by_the_objectives_step_scale():
    """vcpo's preset: two passes; the first is on-policy (rate as planned), the second's rate is lr x ESS < lr."""
    cfg = small_config(method="vcpo", schedule={"steps": 1})
    trainer = Trainer(cfg, MemoryReporter())
    rates = []
    step = trainer.learner.optimizer.step

    def record(*args, **kwargs):
        rates.append(trainer.learner.optimizer.param_groups[0]["lr"])
        return step(*args, **kwargs)

    trainer.learner.optimizer.step = record
    trainer.run()
    row = trainer.reporter.metric_rows[-1]
    second_ess = 2 * row[metrics.ESS] - 1  # the step's metrics are the mean over its two updates; the first's is 1
    assert len(rates) == 2 and rates[0] == pytest.approx(1e-3, rel=1e-5)
    assert rates[1] < 1e-3 and rates[1] == pytest.approx(1e-3 * second_ess, rel=1e-4)


# ------------------------------------------------------------------ diagnostics every objective reports
def test_off_policy_stats_are_neutral_on_policy_and_follow_the_ratios_off_it():
    old = torch.zeros(2, 3)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    on = off_policy_stats(loss_inputs(old.clone(), old, mask, torch.ones(2)))
    assert on[metrics.ESS] == pytest.approx(1.0) and on[metrics.TOKEN_RATIO_OUTSIDE] == 0.0
    assert on[metrics.TOKEN_RATIO_MAX] == on[metrics.TOKEN_RATIO_MIN] == pytest.approx(1.0)
    new = torch.tensor([[math.log(2.0), 0.0, 5.0], [math.log(0.5), 0.0, math.log(1.1)]])  # [0, 2] is masked out
    off = off_policy_stats(loss_inputs(new, old, mask, torch.ones(2)))
    assert off[metrics.TOKEN_RATIO_MAX] == pytest.approx(2.0) and off[metrics.TOKEN_RATIO_MIN] == pytest.approx(0.5)
    assert off[metrics.TOKEN_RATIO_MEAN] == pytest.approx((2 + 1 + 0.5 + 1 + 1.1) / 5)
    assert off[metrics.TOKEN_RATIO_OUTSIDE] == pytest.approx(2 / 5)
    w = torch.tensor([2.0, 0.5 * 1.1])  # the sequence weights: products over each row's loss tokens
    assert off[metrics.ESS] == pytest.approx(float(w.sum() ** 2 / (2 * (w**2).sum())), rel=1e-6)


@pytest.mark.parametrize("method", ["grpo", "gspo", "minpro"])
def test_every_objective_reports_how_far_off_policy_its_updates_were(method):
    """Two passes: the first update of a batch is on-policy (ESS 1), the second not, so the step's mean is < 1."""
    trainer = Trainer(small_config(method=method, schedule={"steps": 2, "updates_per_batch": 2}), MemoryReporter())
    trainer.run()
    row = trainer.reporter.metric_rows[-1]
    assert 0 < row[metrics.ESS] < 1 and row[metrics.TOKEN_RATIO_MAX] > 1 > row[metrics.TOKEN_RATIO_MIN]


# ------------------------------------------------------------------ KL estimators
def test_the_kl_estimators_agree_at_zero_and_differ_as_documented():
    logp = torch.tensor([[-1.0, -2.0, -0.5]], requires_grad=True)
    ref = torch.tensor([[-1.0, -1.0, -1.0]])
    d = (logp - ref).detach()
    assert torch.allclose(KL_ESTIMATORS["k1"](logp, ref), d)
    assert torch.allclose(KL_ESTIMATORS["k2"](logp, ref), d**2 / 2)
    assert torch.allclose(KL_ESTIMATORS["k3"](logp, ref), torch.exp(-d) + d - 1)
    for name, estimate in KL_ESTIMATORS.items():
        assert float(estimate(ref, ref).abs().max()) == 0.0, name
    KL_ESTIMATORS["k2"](logp, ref).sum().backward()
    assert torch.allclose(logp.grad, d)  # k2's gradient per token is the log-gap itself


def test_a_run_with_a_kl_term_uses_the_chosen_estimator():
    reported = {}
    for name in ("k3", "k1"):
        cfg = small_config(schedule={"steps": 2, "minibatches": 2}, objective={"kl_coef": 0.1, "kl_estimator": name})
        trainer = Trainer(cfg, MemoryReporter())
        trainer.run()
        reported[name] = [v for _, v in trainer.reporter.series("policy/kl_ref")]
    assert all(v >= 0 for v in reported["k3"])  # k3 never negative; k1 is the signed log-gap
    assert reported["k1"] != reported["k3"]
