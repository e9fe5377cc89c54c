"""Runs on a Ray cluster: one learner and resources.rollout_actors rollout actors, placed together.

    cfg = resolve({"method": "grpo", "resources": {"executor": "ray", "rollout_actors": 4}})
    run_on_ray(cfg, reporter)   # -> "succeeded" | "cancelled"; raises what ended the run otherwise

This process is the driver (the platform's Celery task, or the CLI). It joins the cluster at
RAY_ADDRESS (or starts a local one for the run), reserves a placement group of 1 + N bundles and
places in it:

    bundle 0       the Learner: the ordinary Trainer, unchanged, whose sampler is RolloutActors
                   (they evaluate too: the learner holds no backend, no engine) and whose reporter
                   is a RelayReporter
    bundles 1..N   RolloutWorkers: each a copy of the policy with its own backend (hf or vllm)

Every step the learner splits its prompts between the actors (contiguous groups, each actor
seeded from the trainer's sampling stream) and joins their completions; after every update it
puts its weights into the object store once and each actor loads them (a vllm actor's backend
then loads them into its engine in place): that is the step's timing/sync_s. The driver replays
the learner's reporter calls into its own reporter every POLL_S, so a Ray run reaches the platform
exactly as a single-process one does, and passes its reporter's stop back to the learner.

A run on Ray samples with N generators instead of one, so it is reproducible for a given N but
not bit-equal to the same config run locally (resources.executor and rollout_actors are hashed).
Nothing restarts a dead actor: a lost actor fails the run, naming the actor, its host and pid.
"""

from __future__ import annotations

import bisect
import itertools
import math
import os
import socket
import sys
import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from workers import repro, stopping
from workers.errors import ConfigError
from workers.rollout import Generations, SamplingParams, StopRule, build_backend

POLL_S = 0.2  # how often the driver forwards the learner's reports and its own stop
PLACEMENT_TIMEOUT_S = float(os.environ.get("RAY_PLACEMENT_TIMEOUT_S", 300))
# what the actors need of the driver's environment (a cluster's nodes run the same image; these say where things are)
FORWARDED_ENV = ("ROLLOUTLAB_CACHE", "HF_HOME", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "CUBLAS_WORKSPACE_CONFIG")


class RolloutActorLost(RuntimeError):
    """A rollout actor died (its process was killed, or its node went away): the run cannot go on."""


class LearnerLost(RuntimeError):
    """The learner actor died: nothing of the run is left on the cluster."""


class ArtifactOutOfReach(RuntimeError):
    """The learner wrote a file where the driver cannot read it (a cluster without shared storage)."""


def require_ray():
    try:
        import ray
    except ImportError:
        message = "resources.executor 'ray' needs Ray, which is not installed here: pip install 'rolloutlab[ray]'"
        raise ConfigError(message, {"resources.executor": message}) from None
    return ray


# ---------------------------------------------------------------------------------------------- the driver
def run_on_ray(cfg, reporter, artifacts_dir: Path | None = None, resume=None) -> str:
    """Train `cfg` on a Ray cluster to its final state, reporting through `reporter` as the Trainer would;
    `resume` (a workers.training.checkpoint.ResumePoint under the shared artifacts directory): go on from it."""
    ray = require_ray()
    started_here = connect(ray, cfg)
    group = learner = None
    try:
        group = place(ray, cfg, reporter)
        learner = spawn_learner(ray, cfg, group, artifacts_dir)
        return follow(ray, learner, reporter, resume)
    finally:  # whatever ended the run (its end, an error, the time limit), nothing of it stays on the cluster
        if learner is not None:
            ray.kill(learner)  # its rollout actors are its own: they go with it
        if group is not None:
            ray.util.remove_placement_group(group)
        if started_here:
            ray.shutdown()


def connect(ray, cfg) -> bool:
    """Join the cluster at RAY_ADDRESS, or start a local one big enough for the run; True when this call started it.

    A process already connected (a test's, a notebook's) is used as it is."""
    if ray.is_initialized():
        return False
    address = os.environ.get("RAY_ADDRESS")
    with real_std_streams():
        if address:
            ray.init(address=address, logging_level="WARNING")
        else:
            cpus = max(os.cpu_count() or 1, math.ceil(sum(bundle.get("CPU", 0) for bundle in bundles(cfg))))
            # "local": a new cluster of the run's own, never one that `ray start` left on this machine
            ray.init(address="local", num_cpus=cpus, include_dashboard=False, logging_level="WARNING")
    return True


@contextmanager
def real_std_streams():
    """sys.stdout and sys.stderr as the process's own files while Ray starts: it asks them for their file
    descriptors, which a Celery worker's logging proxies do not have."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def bundles(cfg) -> list[dict[str, float]]:
    """The placement group's bundles: the learner's first, then one per rollout actor."""
    r = cfg.resources
    learner = {"CPU": float(r.threads), **({"GPU": r.learner_gpus} if r.gpus > 0 else {})}
    actor = {"CPU": r.actor_cpus, **({"GPU": r.actor_gpus} if r.actor_gpus > 0 else {})}
    return [learner] + [dict(actor) for _ in range(r.rollout_actors)]


def place(ray, cfg, reporter):
    """A ready placement group for the run: packed on one node, or spread over resources.nodes nodes.

    Waits for the cluster to have room (another run may hold it), answering a stop meanwhile; gives up
    after PLACEMENT_TIMEOUT_S with what the run asked for and what the cluster has."""
    from ray.util.placement_group import placement_group

    wanted = bundles(cfg)
    group = placement_group(wanted, strategy="SPREAD" if cfg.resources.nodes > 1 else "PACK")
    deadline, waited = time.monotonic() + PLACEMENT_TIMEOUT_S, False
    while not ray.wait([group.ready()], timeout=0.5)[0]:
        if not waited:
            reporter.log(f"waiting for room on the Ray cluster: the run asks for {wanted}")
            waited = True
        if reporter.should_stop() or time.monotonic() > deadline:
            ray.util.remove_placement_group(group)
            if reporter.should_stop():
                raise stopping.Cancelled()
            raise RuntimeError(
                f"the Ray cluster could not place the run in {PLACEMENT_TIMEOUT_S:g} s: it asks for {wanted} "
                f"(resources.threads, learner_gpus, rollout_actors, actor_cpus, actor_gpus); "
                f"the cluster has {ray.cluster_resources()}"
            )
    reporter.log(f"placed on Ray: learner {wanted[0]}, {len(wanted) - 1} rollout actors of {wanted[1]} each")
    return group


def in_bundle(group, index: int) -> dict[str, Any]:
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    strategy = PlacementGroupSchedulingStrategy(placement_group=group, placement_group_bundle_index=index)
    return {"scheduling_strategy": strategy, "max_restarts": 0}


def spawn_learner(ray, cfg, group, artifacts_dir: Path | None):
    wanted = bundles(cfg)[0]
    env = {name: os.environ[name] for name in FORWARDED_ENV if name in os.environ}
    return (
        ray.remote(Learner)
        .options(
            num_cpus=wanted["CPU"],
            num_gpus=wanted.get("GPU", 0),
            max_concurrency=3,
            runtime_env={"env_vars": env},
            **in_bundle(group, 0),
        )  # fmt: skip
        .remote(cfg.model_dump(mode="json"), str(artifacts_dir) if artifacts_dir else None, group, env)
    )


def follow(ray, learner, reporter, resume=None) -> str:
    """Replay the learner's reports into `reporter` until it ends, passing a stop on; its final state."""
    from ray.exceptions import RayActorError, RayTaskError

    running, stop_sent = learner.run.remote(resume), False
    while True:
        finished = bool(ray.wait([running], timeout=POLL_S)[0])
        try:
            if replay(ray.get(learner.drain.remote()), reporter):
                learner.flushed.remote()  # what the learner reported is stored: its checkpoint may follow
        except RayActorError as exc:
            raise LearnerLost(f"the learner actor died: {exc}") from None
        if finished:
            break
        if not stop_sent and reporter.should_stop():
            learner.stop.remote()
            stop_sent = True
    try:
        return ray.get(running)
    except RayTaskError as exc:  # the trainer raised: raise what it raised, with the remote traceback logged
        reporter.log(str(exc))
        raise exc.cause from None
    except RayActorError as exc:
        raise LearnerLost(f"the learner actor died: {exc}") from None


def replay(events: list[tuple[str, tuple]], reporter) -> bool:
    """Make the learner's calls on `reporter`; whether one was a flush (it is done when this returns)."""
    flushed = False
    for method, args in events:
        if method == "flush":
            flush = getattr(reporter, "flush", None)
            if callable(flush):
                flush()
            flushed = True
            continue
        if method == "artifact" and not Path(args[0]).exists():
            raise ArtifactOutOfReach(
                f"the learner wrote {args[0]} on its machine, and this driver cannot read it: STORAGE_ROOT (the run's "
                "artifacts directory) must be one directory shared by every machine of the cluster"
            )
        getattr(reporter, method)(*args)
    return flushed


# ---------------------------------------------------------------------------------------------- the learner
class RelayReporter:
    """The learner's reporter: it keeps every call for the driver, which replays them (Learner.drain), and stops
    when the driver passes its reporter's stop on."""

    def __init__(self):
        self.events: deque[tuple[str, tuple]] = deque()  # appended by the run's thread, taken by drain's
        self.stopped = threading.Event()
        self.stored = threading.Event()  # set by the driver once a flush it replayed is done

    def metrics(self, step, values):
        self.events.append(("metrics", (step, values)))

    def samples(self, step, samples):
        self.events.append(("samples", (step, samples)))

    def groups(self, step, groups):
        self.events.append(("groups", (step, groups)))

    def log(self, line):
        self.events.append(("log", (line,)))

    def status(self, state, detail=""):
        self.events.append(("status", (state, detail)))

    def artifact(self, path, kind):
        self.events.append(("artifact", (path, kind)))

    def should_stop(self):
        return self.stopped.is_set()

    def flush(self):
        """Wait until the driver has stored every call made so far (a resume checkpoint follows)."""
        self.stored.clear()
        self.events.append(("flush", ()))
        while not self.stored.wait(timeout=1.0) and not self.stopped.is_set():
            pass

    def drain(self) -> list[tuple[str, tuple]]:
        taken = []
        while self.events:
            taken.append(self.events.popleft())
        return taken


class Learner:
    """The Ray actor that trains: the Trainer of a single-process run, sampling through the run's rollout actors.

    Threaded (max_concurrency): `run` trains in one thread while the driver calls `drain` and `stop`."""

    def __init__(self, config: dict, artifacts_dir: str | None, group, env: dict[str, str]):
        self.config, self.group, self.env = config, group, env
        self.artifacts_dir = Path(artifacts_dir) if artifacts_dir else None
        self.relay = RelayReporter()

    def run(self, resume=None) -> str:
        from workers.config import RunConfig
        from workers.training.trainer import Trainer

        cfg = RunConfig.model_validate(self.config)

        def samplers(policy) -> RolloutActors:
            return RolloutActors(policy, cfg, self.group, self.env, self.relay)

        try:
            trainer = Trainer(cfg, self.relay, artifacts_dir=self.artifacts_dir, samplers=samplers)
        except stopping.Cancelled:
            self.relay.status("cancelled", "cancelled while the model was being prepared")
            return "cancelled"
        return trainer.run(resume=resume)

    def drain(self) -> list[tuple[str, tuple]]:
        return self.relay.drain()

    def stop(self) -> None:
        self.relay.stopped.set()

    def flushed(self) -> None:
        self.relay.stored.set()


# ---------------------------------------------------------------------------------------------- rollout actors
class RolloutActors:
    """A RolloutBackend whose rows Ray actors sample, each with its own copy of the policy and its own backend.

    A call's prompts are split into one contiguous share per actor (balanced by rows); actor i samples its
    share with a generator seeded by one draw from the trainer's stream, plus i. A stop rule that ends a
    call once some rows have finished is scaled to each share."""

    def __init__(self, policy, cfg, group, env: dict[str, str], reporter):
        import ray

        self.ray, self.policy = ray, policy
        r = cfg.resources
        snapshot = ray.put(cpu_copy(policy))
        self.places: list[tuple[str, int, str]] = []  # (host, pid, device) of each actor, once they are up
        worker, threads = ray.remote(RolloutWorker), max(1, int(r.actor_cpus))
        self.actors = [
            worker.options(num_cpus=r.actor_cpus, num_gpus=r.actor_gpus, runtime_env={"env_vars": env},
                           **in_bundle(group, 1 + i)).remote(snapshot, cfg.rollout.backend, r.device, threads)
            for i in range(r.rollout_actors)
        ]  # fmt: skip
        self.places = self.gather([actor.where.remote() for actor in self.actors], PLACEMENT_TIMEOUT_S)
        for i, (host, pid, device) in enumerate(self.places):
            reporter.log(f"rollout actor {i}: pid {pid} on {host}, {device}")

    def generate(self, prompts, n, params: SamplingParams, generator, limits=None, prefixes=None, stop=None):
        if stop is not None and stop.abort is not None:
            raise unshardable(stop)
        counts = [n] * len(prompts) if isinstance(n, int) else list(n)
        seed = int(torch.randint(0, 2**62, (1,), generator=generator, device=generator.device))
        shares = split(counts, len(self.actors))
        calls, first_row = [], 0
        for i, (start, end) in enumerate(shares):
            rows = sum(counts[start:end])
            calls.append(
                self.actors[i].generate.remote(
                    prompts[start:end], counts[start:end], params, seed + i,
                    limits[start:end] if limits is not None else None,
                    prefixes[first_row : first_row + rows] if prefixes is not None else None,
                    share_of(stop, rows, sum(counts)),
                )
            )  # fmt: skip
            first_row += rows
        return join(self.gather(calls), self.policy.pad_id)

    def sync_weights(self) -> None:
        """The learner's weights into the object store once; every actor loads them."""
        state = {name: tensor.detach().cpu() for name, tensor in self.policy.model.state_dict().items()}
        weights = self.ray.put(state)
        self.gather([actor.load_weights.remote(weights) for actor in self.actors])

    def release_memory(self) -> None:
        self.gather([actor.release_memory.remote() for actor in self.actors])

    def gather(self, calls: list, timeout_s: float | None = None) -> list:
        """The calls' results in order; a stop is answered while they run, and a dead actor named."""
        from ray.exceptions import RayActorError

        pending, deadline = list(calls), time.monotonic() + (timeout_s or math.inf)
        while pending:
            _, pending = self.ray.wait(pending, num_returns=len(pending), timeout=0.5)
            stopping.checkpoint()
            if pending and time.monotonic() > deadline:
                raise RuntimeError(f"{len(pending)} of {len(calls)} rollout actors did not start in {timeout_s:g} s")
        results = []
        for i, call in enumerate(calls):
            try:
                results.append(self.ray.get(call))
            except RayActorError as exc:
                where = self.describe(i)
                raise RolloutActorLost(f"rollout actor {i}{where} died: {first_line(exc)}") from None
        return results

    def describe(self, i: int) -> str:
        if not self.places:
            return ""
        host, pid, _ = self.places[i]
        return f" (pid {pid} on {host})"


def unshardable(stop: StopRule) -> ConfigError:
    """An abort rule reads every row of the call (which groups have finished, a budget over all of them): no actor
    can apply it to its share alone."""
    message = (
        f"resources.executor 'ray' splits each generation between rollout actors, and {stop.asked_by()} stops rows "
        "by a rule over the whole call (a StopRule's abort), which no actor can apply to its share; "
        "use resources.executor: local with it"
    )
    return ConfigError(message, {"resources.executor": message})


def cpu_copy(policy):
    """The policy with its weights on the CPU, for the object store: any node can load it onto its own device."""
    import copy

    model = policy.model
    if next(model.parameters()).device.type == "cpu":
        return policy
    return replace(policy, model=copy.deepcopy(model).cpu())


def split(counts: list[int], actors: int) -> list[tuple[int, int]]:
    """Contiguous prompt ranges, one per actor (fewer when there are fewer prompts), none empty, cut where the
    rows so far first reach each multiple of rows / shares."""
    shares = min(actors, len(counts))
    cumulative, cuts = list(itertools.accumulate(counts)), [0]
    for j in range(1, shares):
        cut = bisect.bisect_left(cumulative, sum(counts) * j / shares) + 1
        cuts.append(min(max(cut, cuts[-1] + 1), len(counts) - (shares - j)))
    cuts.append(len(counts))
    return list(zip(cuts, cuts[1:]))


def share_of(stop: StopRule | None, rows: int, total: int) -> StopRule | None:
    """A stop rule for one actor's share of a call: 'stop once k rows have finished' becomes k x share."""
    if stop is None or stop.finished_rows is None:
        return stop
    return replace(stop, finished_rows=max(1, math.ceil(stop.finished_rows * rows / total)))


def join(parts: list[Generations], pad_id: int) -> Generations:
    """The actors' Generations as one, in share order, right-padded to the longest."""
    width = max(part.tokens.shape[1] for part in parts)

    def widen(tensor: torch.Tensor, value) -> torch.Tensor:
        return torch.nn.functional.pad(tensor, (0, width - tensor.shape[1]), value=value)

    return Generations(
        tokens=torch.cat([widen(p.tokens, pad_id) for p in parts]),
        logprobs=torch.cat([widen(p.logprobs, 0.0) for p in parts]),
        mask=torch.cat([widen(p.mask, 0.0) for p in parts]),
        truncated=torch.cat([p.truncated for p in parts]),
        stopped=torch.cat([p.stopped for p in parts]),
    )


def first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


class RolloutWorker:
    """The Ray actor that samples: a copy of the policy on its node's device, and the run's backend over it."""

    def __init__(self, policy, backend: str, device: str, threads: int):
        from workers.training.trainer import resolve_device

        self.device, self.threads = resolve_device(device), threads
        torch.set_num_threads(threads)
        policy.model.to(self.device).eval()
        self.policy = policy
        self.backend = build_backend(backend, policy)

    def where(self) -> tuple[str, int, str]:
        return socket.gethostname(), os.getpid(), str(self.device)

    @torch.no_grad()
    def load_weights(self, state: dict[str, torch.Tensor]) -> None:
        self.policy.model.load_state_dict(state)
        self.backend.sync_weights()

    def release_memory(self) -> None:
        self.backend.release_memory()

    def generate(self, prompts, counts, params, seed, limits, prefixes, stop) -> Generations:
        with repro.deterministic(self.device, self.threads):
            generator = torch.Generator(self.device).manual_seed(seed)
            out = self.backend.generate(prompts, counts, params, generator, limits, prefixes, stop)
        return Generations(out.tokens.cpu(), out.logprobs.cpu(), out.mask.cpu(), out.truncated.cpu(), out.stopped.cpu())
