"""Rollout Lab's execution side: the GRPO-family trainer and its rollout pipeline.

Imports nothing from Django. Run a training from the command line:

    python -m workers run examples/grpo-arith.yaml --out runs/demo
    python -m workers methods
"""
