"""Held-out evaluation: pass@1 (greedy), pass@k (unbiased, from n samples) and maj@k.

    Evaluator(cfg, task, policy, backends)(step)   # {"eval/pass@1": ..., "eval/pass@k": ..., "eval/maj@k": ...}
    score_eval(task, examples, greedy_texts, sampled_texts, n=16, k=8)

The Evaluator samples the completions through the run's backends; score_eval only judges
them, so each estimator can be checked on completions whose answers are known.
"""

from __future__ import annotations

import time
from collections import Counter

import numpy as np
import torch

from workers import metrics as metric
from workers import progress, repro, stopping
from workers.environments import build_environment
from workers.environments.episodes import Sampler, run_episodes
from workers.rollout import SamplingParams


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that k of n samples, c of them correct, drawn without replacement include a correct one.

    1 - C(n-c, k) / C(n, k), the unbiased estimator of Chen et al. 2021 ("Evaluating Large
    Language Models Trained on Code", eq. 1), as a product so that large n stays exact in floats.
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def majority_correct(task, example, completions: list[str]) -> bool:
    """Whether the answer most completions commit to is the right one (ties: the first answer seen wins)."""
    votes = Counter(key for key in (task.answer_key(example, text) for text in completions) if key is not None)
    return bool(votes) and votes.most_common(1)[0][0] == example.answer


def maj_at_k(task, example, completions: list[str], k: int) -> float:
    """maj@k averaged over the len(completions) // k disjoint blocks of k samples (each an independent draw)."""
    blocks = [completions[i : i + k] for i in range(0, len(completions) - k + 1, k)]
    return float(np.mean([majority_correct(task, example, block) for block in blocks]))


def score_eval(task, examples, greedy: list[str], sampled: list[str], n: int, k: int,
               solved: tuple[list[bool], list[bool]] | None = None,
               unsolved_at_start: list[int] | None = None) -> dict[str, float]:  # fmt: skip
    """Mean pass@1 over the greedy completions (one per example); pass@k and maj@k over n samples per example.

    `solved`: for episodes, whether the environment said each greedy and each sampled episode was solved (the
    correctness of an episode, which its last turn alone may not show: a puzzle is solved by its moves); maj@k
    still votes on the answers the last turns commit to. `unsolved_at_start`: the indices of the examples no
    completion solved at the first evaluation (unsolved_problems), over which pass@k is reported too."""
    greedy_correct, sampled_correct = judge(task, examples, greedy, sampled, n, solved)
    pass1, passk, majk = [], [], []
    for i, example in enumerate(examples):
        pass1.append(greedy_correct[i])
        group = sampled[i * n : (i + 1) * n]
        passk.append(pass_at_k(n, sum(sampled_correct[i * n : (i + 1) * n]), k))
        majk.append(maj_at_k(task, example, group, k))
    scores = {
        metric.PASS_AT_1: float(np.mean(pass1)),
        metric.PASS_AT_K: float(np.mean(passk)),
        metric.MAJ_AT_K: float(np.mean(majk)),
    }
    if unsolved_at_start is not None:
        scores[metric.UNSOLVED_AT_START] = len(unsolved_at_start) / len(examples)
        if unsolved_at_start:  # none left unsolved: nothing to report pass@k over
            scores[metric.PASS_AT_K_UNSOLVED] = float(np.mean([passk[i] for i in unsolved_at_start]))
    return scores


def judge(task, examples, greedy: list[str], sampled: list[str], n: int,
          solved: tuple[list[bool], list[bool]] | None = None) -> tuple[list[bool], list[bool]]:  # fmt: skip
    """Whether each greedy completion (one per example) and each sample (n per example) is correct."""
    return solved or (
        [task.is_correct(e, text) for e, text in zip(examples, greedy)],
        [task.is_correct(examples[i // n], text) for i, text in enumerate(sampled)],
    )


def unsolved_problems(greedy_correct: list[bool], sampled_correct: list[bool], n: int) -> list[int]:
    """The indices of the examples whose greedy completion and n samples are all wrong."""
    return [i for i, right in enumerate(greedy_correct) if not right and not any(sampled_correct[i * n : (i + 1) * n])]


class Evaluator:
    """The held-out evaluation of the learner's policy, sampled where `backends.evaluator()` says."""

    def __init__(self, cfg, task, policy, backends, device: torch.device):
        self.cfg, self.task, self.policy, self.backends, self.device = cfg, task, policy, backends, device
        self.environment = build_environment(cfg, task)  # with one, a completion is an episode's final turn
        # the held-out problems nothing solved at step 0; None until then (a run not evaluated at step 0 has none).
        # Saved in a resume checkpoint: a resumed run does not evaluate step 0 again
        self.unsolved_at_start: list[int] | None = None

    @torch.no_grad()
    def __call__(self, step: int) -> dict[str, float]:
        """eval/pass@1 (greedy), eval/pass@k and eval/maj@k (from eval.samples samples) on the held-out split, and
        the seconds it took (for an ETA that counts the evaluations still due)."""
        began = time.perf_counter()
        with repro.deterministic(self.device, self.cfg.resources.threads):
            scores = self.held_out(step)
        return {**scores, metric.EVAL_S: time.perf_counter() - began}

    def held_out(self, step: int) -> dict[str, float]:
        examples = self.task.eval_examples()
        e, max_new = self.cfg.eval, self.cfg.rollout.max_new_tokens
        generator = torch.Generator(self.device).manual_seed(self.cfg.seed * 1_000_003 + step)
        with progress.phase("evaluating", total=len(examples) * (1 + e.n), unit="completions") as evaluating:
            greedy, greedy_solved = self.texts(examples, 1, SamplingParams(max_new, 0.0), generator, evaluating)
            sampled, sampled_solved = self.texts(examples, e.n, SamplingParams(max_new, e.temperature), generator,
                                                 evaluating)  # fmt: skip
        solved = (greedy_solved, sampled_solved) if self.environment is not None else None
        correct = judge(self.task, examples, greedy, sampled, e.n, solved)  # once: the scores take it as given
        if step == 0:
            self.unsolved_at_start = unsolved_problems(*correct, e.n)
        return score_eval(self.task, examples, greedy, sampled, e.n, e.k, correct, self.unsolved_at_start)

    def state_dict(self) -> dict:
        return {"unsolved_at_start": self.unsolved_at_start}

    def load_state_dict(self, state: dict) -> None:
        self.unsolved_at_start = state.get("unsolved_at_start")

    def texts(self, examples, n: int, params: SamplingParams, generator, evaluating: progress.Phase,
              rows_per_call: int = 1024) -> tuple[list[str], list[bool]]:  # fmt: skip
        """n completions per example; with an environment, each episode's last turn and whether it was solved."""
        prompts = [self.policy.encode_prompt(e.prompt) for e in examples]
        per_call, backend = max(1, rows_per_call // n), self.backends.evaluator()
        texts, solved = [], []
        for start in range(0, len(prompts), per_call):
            stopping.checkpoint()
            chunk = prompts[start : start + per_call]
            if self.environment is None:
                texts += self.policy.decode_completions(backend.generate(chunk, n, params, generator))
            else:
                records = self.episodes(examples[start : start + per_call], chunk, n, params, generator, backend)
                texts += [record.final_turn for record in records]
                solved += [record.solved for record in records]
            evaluating.advance(len(chunk) * n)
        return texts, solved

    def episodes(self, examples, prompts, n: int, params: SamplingParams, generator, backend) -> list:
        """n episodes per example: their records (the last turn, the answer the task reads, and whether solved)."""
        sampler = Sampler(self.policy, backend, generator)
        sizes, limits = [n] * len(prompts), [params.max_new_tokens] * len(prompts)
        return run_episodes(sampler, self.environment, examples, prompts, sizes, params, limits).records
