"""The command line: `python -m workers run|methods|schema|validate`.

    python -m workers run examples/grpo-arith.yaml --out runs/demo --set seed=7
    python -m workers methods          # the method presets, one line each
    python -m workers schema           # RunConfig's JSON Schema
    python -m workers validate CONFIG  # the resolved config and its hash

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
    run = commands.add_parser("run", help="train from a YAML run config")
    run.add_argument("config", type=Path, help="YAML run config")
    run.add_argument("--out", type=Path, required=True, help="directory for metrics.jsonl, samples, checkpoints")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    validate = commands.add_parser("validate", help="print the resolved config and its hash")
    validate.add_argument("config", type=Path)
    validate.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE")
    commands.add_parser("methods", help="list the method presets")
    commands.add_parser("schema", help="print RunConfig's JSON Schema")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def cmd_methods(args) -> int:
    from workers.config import METHODS

    width = max(len(name) for name in METHODS)
    for name, (description, _) in sorted(METHODS.items()):
        print(f"{name:<{width}}  {description}")
    return EXIT_OK


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

    cfg = load_config(args.config, args.overrides)
    out: Path = args.out
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"--out {out}: already exists and is not empty; give a new directory")
    check_model_source(cfg)
    task = build_task(cfg)  # reads and checks the dataset files before --out is touched
    return train(cfg, task, out, progress=not args.no_progress)


def train(cfg, task, out: Path, progress: bool = True) -> int:
    from workers.reporting import FanoutReporter, JsonlReporter, ProgressReporter
    from workers.trainer import Trainer

    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
    files = JsonlReporter(out)
    reporters = [files, ProgressReporter(cfg.schedule.steps)] if progress else [files]
    reporter = FanoutReporter(*reporters)
    try:
        state = Trainer(cfg, reporter, artifacts_dir=out, task=task).run()
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


COMMANDS = {"run": cmd_run, "methods": cmd_methods, "schema": cmd_schema, "validate": cmd_validate}
