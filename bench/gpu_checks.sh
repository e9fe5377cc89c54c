#!/usr/bin/env bash
# The checks a GPU machine runs (issue 14): the vllm backend's conformance suite against the real engine,
# rollout tokens/s of hf and vllm against transformers' generate, runs on Ray on that GPU, hf then vllm
# actors sharing it with the learner, and the asynchronous trainer against the synchronous one on that
# machine's GPU and on its CPU cores. Needs torch with CUDA and the `.[gpu,ray]` extras.
#
#   bash bench/gpu_checks.sh LOGDIR [RUNDIR [CHECK...]]
#
# Each check has its own time limit, so one that hangs costs its limit, not the rest; each one's output is
# LOGDIR/<name>.log, and a summary line per check ends the output. The Ray runs write to RUNDIR
# (default LOGDIR/runs). Naming checks runs only those (a device lent for minutes cannot hold them all):
#
#   bash bench/gpu_checks.sh LOGDIR "" async_vs_sync_gpu async_vs_sync_cpu
#
# The async_vs_sync checks load the warm-started weights from $ASYNC_WEIGHTS when it names a directory
# (made beforehand, on any machine, by `python bench/async_vs_sync.py --save-weights DIR`); otherwise each
# builds them first, which takes minutes of the device's time.
set -u
logs=${1:?usage: bench/gpu_checks.sh LOGDIR [RUNDIR [CHECK...]]}
runs=${2:-$logs/runs}
wanted=("${@:3}")
mkdir -p "$logs" "$runs"
export PYTHONUNBUFFERED=1 ROLLOUTLAB_CACHE=${ROLLOUTLAB_CACHE:-$runs/cache} TOKENIZERS_PARALLELISM=false
summary=()
weights=()
[ -n "${ASYNC_WEIGHTS:-}" ] && weights=(--weights "$ASYNC_WEIGHTS")

chosen() {  # name: whether the command line asked for this check (none named: every check)
    [ ${#wanted[@]} -eq 0 ] && return 0
    local name
    for name in "${wanted[@]}"; do [ "$name" = "$1" ] && return 0; done
    return 1
}

check() {  # name, seconds, command...
    local name=$1 limit=$2 started=$SECONDS
    shift 2
    chosen "$name" || return 0
    echo "=== $name (at most ${limit} s)"
    timeout --kill-after=10 "$limit" "$@" >"$logs/$name.log" 2>&1
    local rc=$?
    tail -n 4 "$logs/$name.log"
    summary+=("$name: exit $rc in $((SECONDS - started)) s")
}

# Ray on one GPU: the learner's half, two hf actors of a quarter each; then one vllm actor of a half
one_gpu_ray=(--set resources.executor=ray --set resources.device=cuda --set resources.gpus=1
             --set resources.learner_gpus=0.5 --set schedule.steps=30 --no-progress)
quick=examples/grpo-arith-quick.yaml
results() {  # the last value of each headline metric of the run in $1, if it ran
    [ -f "$1/metrics.jsonl" ] || return 0
    python3 -c 'import json, sys
last = {k: v for line in open(sys.argv[1] + "/metrics.jsonl") for k, v in json.loads(line).items()}
keys = ["step", "eval/pass@1", "reward/mean", "timing/generate_s", "timing/sync_s", "timing/train_s", "timing/step_s"]
print("last values:", {k: last.get(k) for k in keys})' "$1"
}

check env 60 python3 -c "import torch, ray, vllm, transformers; print(torch.__version__, torch.cuda.get_device_name(), ray.__version__, vllm.__version__, transformers.__version__)"
check ray_hf 120 python3 -m workers run $quick --out "$runs/ray_hf" "${one_gpu_ray[@]}" \
    --set resources.rollout_actors=2 --set resources.actor_gpus=0.25
results "$runs/ray_hf"
check conformance 150 python3 -m pytest -q -o addopts= --noconftest -p no:cacheprovider tests/offline/engine/test_backend_conformance.py
big=(--model 1024x12 --device cuda --dtype bfloat16 --prompts 64 --new-tokens 256 --reps 3)
check throughput_hf 60 python3 bench/rollout_throughput.py --backend hf "${big[@]}"
check throughput_vllm 150 python3 bench/rollout_throughput.py --backend vllm "${big[@]}"
check ray_vllm 150 python3 -m workers run $quick --out "$runs/ray_vllm" "${one_gpu_ray[@]}" \
    --set rollout.backend=vllm --set resources.rollout_actors=1 --set resources.actor_gpus=0.5
results "$runs/ray_vllm"

check async_vs_sync_gpu 240 python3 bench/async_vs_sync.py --device cuda --steps 20 --reps 2 "${weights[@]}"
check async_vs_sync_cpu 300 python3 bench/async_vs_sync.py --device cpu --steps 20 --reps 2 "${weights[@]}"

printf '%s\n' "${summary[@]}"
