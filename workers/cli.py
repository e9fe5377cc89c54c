"""The command line: `python -m workers run|methods|schema|validate`.

    python -m workers run examples/grpo-arith.yaml --out runs/demo --set seed=7
    python -m workers methods          # the method presets, one line each, and knobs their schedule leaves inert
    python -m workers methods --set schedule.updates_per_batch=2   # ... under another schedule
    python -m workers methods --write-table docs/methods/README.md  # rewrite the README's written tables
    python -m workers schema           # RunConfig's JSON Schema
    python -m workers validate CONFIG  # the resolved config and its hash
    python -m workers run --from-bundle run.zip --out runs/again   # reproduce a bundled run
    python -m workers bundle runs/demo --out demo.zip             # bundle a finished run directory
    python -m workers verify-bundle demo.zip                       # intact, or what was altered
    python -m workers bundle-key --out key.pem                     # a new Ed25519 signing key for bundles
    python -m workers compare-runs runs/demo runs/again            # identical, or the first divergence

Bad input (an unknown knob or method, a value out of range, a missing or
malformed dataset file) prints one message naming the field or the file and
line, and exits with status 2 before anything is written to --out.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from workers.errors import UserError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 130


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, status 2, as for every other bad input
        self.exit(EXIT_USAGE, f"error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="python -m workers", description="Rollout Lab trainer")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    run = commands.add_parser("run", help="train from a YAML run config (or a bundle's)")
    run.add_argument("config", type=Path, nargs="?", help="YAML run config")
    run.add_argument("--from-bundle", type=Path, help="reproduce the run of a bundle (instead of CONFIG)")
    run.add_argument("--out", type=Path, required=True, help="directory for metrics.jsonl, samples, checkpoints")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    resume_help = "go on with the stopped run in --out from its last resume checkpoint (its config.yaml)"
    run.add_argument("--resume", action="store_true", help=resume_help)
    validate = commands.add_parser("validate", help="print the resolved config and its hash")
    validate.add_argument("config", type=Path)
    validate.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE")
    methods = commands.add_parser("methods", help="list the method presets, and knobs their schedule leaves inert")
    methods.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE", help="laid over every preset"
    )
    methods.add_argument(
        "--write-table", type=Path, metavar="README", help="rewrite this file's tables of presets and checks"
    )
    commands.add_parser("schema", help="print RunConfig's JSON Schema")
    bundle = commands.add_parser("bundle", help="bundle a finished run directory")
    bundle.add_argument("run_dir", type=Path)
    bundle.add_argument("--out", type=Path, required=True, help="the .zip to write")
    bundle.add_argument("--key", type=Path, help="sign it with this Ed25519 private key (PEM)")
    key = commands.add_parser("bundle-key", help="write a new Ed25519 key that signs bundles; prints its public key")
    key.add_argument("--out", type=Path, required=True, help="the PEM file to write (mode 600)")
    verify = commands.add_parser("verify-bundle", help="check that no byte of a bundle was changed")
    verify.add_argument("bundle", type=Path)
    compare = commands.add_parser("compare-runs", help="identical metric streams, or the first divergence")
    compare.add_argument("original", type=Path)
    compare.add_argument("rerun", type=Path)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def cmd_methods(args) -> int:
    """One line per preset; under it, indented, each warning of a knob its schedule leaves inert (--set applies).

    With --write-table README, rewrite instead that file's tables of presets and of how each component was checked."""
    from workers import schedule_checks
    from workers.config import METHODS, load_config

    if args.write_table:
        write_tables(args.write_table)
        return EXIT_OK
    width = max(len(name) for name in METHODS)
    for name, preset in sorted(METHODS.items()):
        print(f"{name:<{width}}  {preset.summary}")
        for warning in schedule_checks.warnings(load_config(None, args.overrides, base={"method": name})):
            print(f"{'':<{width}}  warning: {warning}")
    return EXIT_OK


def write_tables(readme: Path, cards: Path | None = None) -> None:
    """docs/methods/README.md's two written tables: the presets, and how each component was checked (citing the
    cards in `cards`, by default the README's own folder)."""
    from workers.config.presets import methods_table
    from workers.doc_tables import replace_table
    from workers.pipeline.catalog import checked_table

    cards = cards or readme.parent
    replace_table(readme, methods_table(cards))
    replace_table(readme, checked_table(cards))


def cmd_schema(args) -> int:
    from workers.config import json_schema

    print(json.dumps(json_schema(), indent=1))
    return EXIT_OK


def cmd_validate(args) -> int:
    from workers.config import load_config

    cfg = load_config(args.config, args.overrides)
    print(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False), end="")
    print(f"# config hash: {cfg.config_hash()}")
    return EXIT_OK


def cmd_run(args) -> int:
    from workers.config import load_config
    from workers.models import check_model_source
    from workers.tasks import build_task

    if args.resume:
        return resume_run(args)
    if (args.config is None) == (args.from_bundle is None):
        raise UserError("run: give a config file or --from-bundle FILE, not both")
    if args.from_bundle is not None:
        from workers.bundle import read_bundle

        cfg = load_config(None, args.overrides, base=read_bundle(args.from_bundle).config)
    else:
        cfg = load_config(args.config, args.overrides)
    out: Path = args.out
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"--out {out}: already exists and is not empty; give a new directory")
    check_model_source(cfg)
    task = build_task(cfg)  # reads and checks the dataset files before --out is touched
    return train(cfg, task, out, progress=not args.no_progress)


def resume_run(args) -> int:
    """run --resume --out DIR: the run in DIR goes on from its last resume checkpoint, with the config it saved."""
    from workers.config import load_config
    from workers.reporting import JsonlReporter
    from workers.tasks import build_task
    from workers.training.checkpoint import latest_checkpoint

    out: Path = args.out
    if args.config is not None or args.from_bundle is not None:
        raise UserError("run --resume: the run goes on with the config in --out; give no config file or bundle")
    if not (out / "config.yaml").is_file():
        raise UserError(f"--out {out}: holds no run (no config.yaml) to resume")
    point = latest_checkpoint(out)
    if point is None:
        raise UserError(f"--out {out}: the run wrote no resume checkpoint (schedule.checkpoint_every) to go on from")
    cfg = load_config(out / "config.yaml", args.overrides)
    task = build_task(cfg)
    JsonlReporter(out).forget_after(point.step)  # the steps after the checkpoint are reported again
    return train(cfg, task, out, progress=not args.no_progress, resume=point)


def train(cfg, task, out: Path, progress: bool = True, resume=None) -> int:
    from workers.reporting import FanoutReporter, JsonlReporter, ProgressReporter
    from workers.training.trainer import Trainer

    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
    files = JsonlReporter(out)
    reporters = [files, ProgressReporter(cfg.schedule.steps, eval_every=cfg.eval.every)] if progress else [files]
    reporter = FanoutReporter(*reporters)
    try:
        if cfg.resources.executor == "ray":  # the task is built again by the learner, on its node
            from workers.training.distributed import run_on_ray

            state = run_on_ray(cfg, reporter, artifacts_dir=out)
        else:
            state = Trainer(cfg, reporter, artifacts_dir=out, task=task).run(resume=resume)
    except KeyboardInterrupt:
        reporter.status("cancelled", "interrupted")
        return EXIT_CANCELLED
    except UserError:
        raise
    except Exception as exc:
        import traceback

        reporter.log(traceback.format_exc())
        reporter.status("failed", f"{type(exc).__name__}: {exc}")
        raise
    finally:
        files.close()
    return EXIT_OK if state == "succeeded" else EXIT_CANCELLED


def cmd_bundle(args) -> int:
    from workers.bundle import bundle_run_dir

    if args.out.exists():
        raise UserError(f"--out {args.out}: already exists")
    key = None
    if args.key is not None:
        from workers.bundle import load_signing_key

        key = load_signing_key(args.key.read_text())
    print(f"{args.out}  bundle sha256 {bundle_run_dir(args.run_dir, args.out, key)}")
    return EXIT_OK


def cmd_bundle_key(args) -> int:
    """The private key goes to a file only its owner reads; the public key is what other deployments trust."""
    import os

    from workers.bundle import new_signing_key, public_key_text, signing_key_pem

    key = new_signing_key()
    try:
        fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise UserError(f"--out {args.out}: already exists") from None
    with os.fdopen(fd, "w") as handle:
        handle.write(signing_key_pem(key))
    print(f"wrote {args.out}; its public key (for BUNDLE_TRUSTED_KEYS elsewhere): {public_key_text(key)}")
    return EXIT_OK


def cmd_verify_bundle(args) -> int:
    from workers.bundle import read_bundle

    bundle = read_bundle(args.bundle)  # BundleError: altered, exit 2
    signed = f"signed by {bundle.signer}" if bundle.signer else bundle.signature_problem
    print(f"intact: {args.bundle}  bundle sha256 {bundle.sha256}  ({signed})")
    return EXIT_OK


def cmd_compare_runs(args) -> int:
    from workers.audit import compare_streams
    from workers.reporting import read_metrics

    for directory in (args.original, args.rerun):
        if not (directory / "metrics.jsonl").is_file():
            raise UserError(f"{directory}: not a run directory (no metrics.jsonl)")
    verdict = compare_streams(read_metrics(args.original / "metrics.jsonl"), read_metrics(args.rerun / "metrics.jsonl"))
    if verdict["identical"]:
        print(f"identical: {verdict['compared']} metric points")
        return EXIT_OK
    print(f"diverged at step {verdict['step']}, {verdict['metric']}: {verdict['original']} -> {verdict['rerun']}")
    return EXIT_FAILED


COMMANDS = {
    "run": cmd_run,
    "methods": cmd_methods,
    "schema": cmd_schema,
    "validate": cmd_validate,
    "bundle": cmd_bundle,
    "verify-bundle": cmd_verify_bundle,
    "bundle-key": cmd_bundle_key,
    "compare-runs": cmd_compare_runs,
}
