"""Advantage estimators against plain-loop references, and each method's defining property."""

import statistics

import pytest
import torch

from workers.config import resolve
from workers.pipeline.advantage import ADVANTAGES


def estimator(name, scale="std"):
    """The estimator's per-group function: rewards (P, n) -> advantages (P, n), in_loss (P, n)."""
    cfg = resolve({"advantage": {"name": name, "scale": scale}})
    return ADVANTAGES.get(name)(cfg).per_group


REWARDS = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.2, 0.9, 0.4, 0.4], [1.0, 1.0, 1.0, 1.0]])


def loop_group_mean(rewards, scale, eps=1e-4):
    out = []
    for group in rewards.tolist():
        mean = sum(group) / len(group)
        std = statistics.stdev(group)
        out.append([(r - mean) / (std + eps) if scale == "std" else r - mean for r in group])
    return torch.tensor(out)


@pytest.mark.parametrize("scale", ["std", "none"])
def test_group_mean_matches_a_plain_loop(scale):
    advantages, in_loss = estimator("group-mean", scale)(REWARDS)
    torch.testing.assert_close(advantages, loop_group_mean(REWARDS, scale))
    assert in_loss.all()


def test_group_mean_of_equal_rewards_is_zero():
    advantages, _ = estimator("group-mean")(REWARDS)
    assert advantages[2].abs().max() == 0


def test_leave_one_out_matches_a_plain_loop():
    advantages, in_loss = estimator("leave-one-out", "none")(REWARDS)
    expected = []
    for group in REWARDS.tolist():
        expected.append([r - (sum(group) - r) / (len(group) - 1) for r in group])
    torch.testing.assert_close(advantages, torch.tensor(expected))
    assert in_loss.all()


def test_leave_one_out_sample_never_enters_its_own_baseline():
    rloo = estimator("leave-one-out", "none")
    rewards = torch.tensor([[0.3, 0.7, 0.1, 0.5]])
    base, _ = rloo(rewards)
    baseline = rewards - base
    for i in range(4):
        changed = rewards.clone()
        changed[0, i] += 10.0
        moved = changed - rloo(changed)[0]
        assert moved[0, i] == pytest.approx(float(baseline[0, i]))  # its own baseline did not move
        others = [j for j in range(4) if j != i]
        assert (moved[0, others] - baseline[0, others]).abs().min() > 1  # everyone else's did


def test_group_median_pivot_has_zero_advantage_and_is_left_out():
    rewards = torch.tensor([[0.9, 0.1, 0.5], [0.0, 1.0, 0.0], [3.0, 1.0, 2.0]])
    advantages, in_loss = estimator("group-median", "none")(rewards)
    pivots = [2, 2, 2]  # the median of each row (of two tied zeros, the later one)
    for row, pivot in enumerate(pivots):
        assert not in_loss[row, pivot] and in_loss[row].sum() == 2
        assert advantages[row, pivot] == 0
    torch.testing.assert_close(advantages[0], torch.tensor([0.4, -0.4, 0.0]))
    torch.testing.assert_close(advantages[2], torch.tensor([1.0, -1.0, 0.0]))


def test_group_median_matches_a_plain_loop_with_std_scaling():
    rewards = torch.rand(50, 5, generator=torch.Generator().manual_seed(0))
    advantages, in_loss = estimator("group-median", "std")(rewards)
    for row, group in enumerate(rewards.tolist()):
        median = sorted(group)[2]
        std = statistics.stdev(group)
        for i, r in enumerate(group):
            expected = 0.0 if not in_loss[row, i] else (r - median) / (std + 1e-4)
            assert advantages[row, i].item() == pytest.approx(expected, abs=1e-5)


def sign_flip_rate(name, group_size, prompts=20000, seed=0):
    """Share of samples in the loss whose advantage sign disagrees with sign(r - E[r]).

    Rewards come from a fixed skewed distribution (exponential, mean 1), where a
    small group's mean is pulled around by its largest sample.
    """
    generator = torch.Generator().manual_seed(seed)
    rewards = torch.empty(prompts, group_size).exponential_(1.0, generator=generator)
    advantages, in_loss = estimator(name, "none")(rewards)
    truth = torch.sign(rewards - 1.0)
    counted = in_loss & (advantages != 0)
    return float(((torch.sign(advantages) != truth) & counted).sum() / counted.sum())


def test_median_baseline_flips_fewer_advantage_signs_than_grpo_at_g2():
    grpo = sign_flip_rate("group-mean", 2)  # G = 2
    mc_grpo = sign_flip_rate("group-median", 3)  # G + 1 = 3, the pivot left out
    # closed forms with q = P(r < 1) = 1 - 1/e: GRPO (q^2 + (1-q)^2) / 2, MC-GRPO (q^3 + (1-q)^3) / 2
    q = 1 - 1 / 2.718281828
    assert grpo == pytest.approx((q**2 + (1 - q) ** 2) / 2, abs=0.01)
    assert mc_grpo == pytest.approx((q**3 + (1 - q) ** 3) / 2, abs=0.01)
    assert mc_grpo < grpo - 0.05


def mc_grpo_estimator():
    from workers.config import METHODS

    cfg = resolve({"method": "mc-grpo"})
    assert METHODS["mc-grpo"][1]["advantage"]["scale"] == "mad"
    return ADVANTAGES.get(cfg.advantage.name)(cfg).per_group


def reference_mc_grpo(group, eps=1e-3):
    """The authors' recipe written as a plain loop: median baseline, MAD + eps scale, then each
    non-zero advantage multiplied by (G+1) / #non-zero; the pivot (sorted position (n-1)//2, ties in
    group order) gets 0."""
    n = len(group)
    median = sorted(group)[(n - 1) // 2]
    mad = sorted(abs(r - median) for r in group)[(n - 1) // 2]
    advantages = [(r - median) / (mad + eps) for r in group]
    nonzero = [a for a in advantages if abs(a) > 1e-6]
    return [a * n / len(nonzero) if abs(a) > 1e-6 else a for a in advantages]


def test_mc_grpo_preset_scales_by_the_mad_and_rescales_the_non_zero_advantages():
    rewards = torch.rand(40, 5, generator=torch.Generator().manual_seed(1)).round(decimals=1)
    rewards[0] = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.5])
    advantages, in_loss = mc_grpo_estimator()(rewards)
    for row, group in enumerate(rewards.tolist()):
        torch.testing.assert_close(advantages[row], torch.tensor(reference_mc_grpo(group)), rtol=1e-5, atol=1e-4)
        assert in_loss[row].sum() == 4


def test_mc_grpo_binary_rewards_have_zero_mad_so_the_eps_sets_the_scale():
    """With 0/1 rewards and G+1 = 3 the majority sits on the median, so the MAD is 0 and the
    authors' code divides by its eps: the lone minority sample gets (G+1) / 1 / 1e-3 = 3000."""
    advantages, _ = mc_grpo_estimator()(torch.tensor([[1.0, 1.0, 0.0], [0.0, 1.0, 0.0]]))
    torch.testing.assert_close(advantages, torch.tensor([[0.0, 0.0, -3000.0], [0.0, 3000.0, 0.0]]))


def test_group_median_pivot_is_the_middle_of_a_stable_sort():
    """Ties keep their group order; the pivot is the sample at sorted position (n-1)//2."""
    _, in_loss = estimator("group-median", "none")(torch.tensor([[1.0, 1.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 1.0]]))
    assert (~in_loss).nonzero().tolist() == [[0, 0], [1, 2], [2, 1]]
