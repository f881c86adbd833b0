#!/usr/bin/env bash
# Efficiency benchmark on one GPU, in at most ~5 minutes: writes $OUT/gpu_results.json.
#
#   scripts/gpu_bench.sh                    # on the GPU machine (OUT defaults to ./bench)
#   scripts/gpu_bench.sh --device cpu --tiny   # dry run on CPU with tiny random models (~1 min)
#
# No network is assumed: the models are randomly initialised at the real architectures'
# sizes (SmolLM2-135M, Gemma-3-270M, a 1B Llama; then Llama-3-8B's layer sizes with 4 of its
# 32 layers, for gnuq against Opacus, torch.func and the floor), built from transformers configs in code,
# with synthetic token-id questions of realistic length (timing does not depend on the
# weights' values). Records per hour of the QA pipeline need the real models' tokenizers,
# so random models skip that part (run `python -m gnuq_core.bench` with the real models on a
# GPU machine that has their weights for it). Needs python with torch (CUDA build), transformers, tokenizers, numpy,
# tqdm; uses .venv/bin/python if present, else $PYTHON, else python3. Finished models are
# written as they complete, so a run cut short by the time limit still leaves results.
# Commit the JSON as bench/gpu_results.json; chapter 07 shows it.
set -euo pipefail
cd "$(dirname "$0")/.."
DEVICE=cuda
TINY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --device) DEVICE="$2"; shift 2 ;;
    --tiny) TINY=1; shift ;;
    *) echo "usage: $0 [--device cuda|cpu] [--tiny]" >&2; exit 2 ;;
  esac
done
OUT="${OUT:-bench}"
mkdir -p "$OUT"
if [ -n "${PYTHON:-}" ]; then PY="$PYTHON"; elif [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TRANSFORMERS_VERBOSITY=error PYTHONWARNINGS=ignore
"$PY" - "$DEVICE" <<'PYEOF'
import sys
missing = []
for mod in ("torch", "transformers", "tokenizers", "numpy", "tqdm"):  # opacus: optional (its rows say so)
    try:
        __import__(mod)
    except ImportError:
        missing.append(mod)
if missing:
    sys.exit(f"gpu_bench: python lacks {', '.join(missing)}; pip install torch transformers tokenizers numpy tqdm")
import torch, transformers
print(f"gpu_bench: torch {torch.__version__}, transformers {transformers.__version__}, "
      f"cuda {torch.cuda.is_available()} {torch.cuda.get_device_name(0) if torch.cuda.is_available() else ''}")
if sys.argv[1].startswith("cuda") and not torch.cuda.is_available():
    sys.exit("gpu_bench: --device cuda but torch sees no GPU (use --device cpu for a dry run)")
PYEOF
if [ "$TINY" = 1 ]; then
  ARGS=(--tiny --models random:tiny --ladder 32x1 64x2)
  LIMIT=600
else
  ARGS=(--models random:smollm2-135m random:gemma3-270m random:llama-1b --questions 4 --repeats 3 --samples 10
        --answer-lengths 4 8 16 32 64 128 --prompt-lengths 32 64 128 256 512 1024 --sweep-repeats 3
        --ladder 256x8 576x30 1024x16 2048x16 --batch-sizes 1 4 16 64 --batch-pairs 64 --peer-sizes 1 4 16 64
        --peer-memory-gb 40)
  ARGS_8B=(--models random:llama-8b-4l --questions 2 --repeats 2 --samples 4 --answer-lengths --prompt-lengths
           --ladder --batch-sizes 1 16 --batch-pairs 16 --peer-sizes 1 4 16 --peer-memory-gb 40 --no-reference
           --no-throughput)
  LIMIT=280
fi
start=$(date +%s)
timeout "$LIMIT" "$PY" -m gnuq_core.bench --device "$DEVICE" "${ARGS[@]}" --quiet --out "$OUT/gpu_results.json" \
  || echo "gpu_bench: stopped early (status $?); $OUT/gpu_results.json holds the models that finished" >&2
if [ "$TINY" = 0 ]; then  # an 8B-class shape: gnuq against its peers where per-sample gradients are large
  timeout 150 "$PY" -m gnuq_core.bench --device "$DEVICE" "${ARGS_8B[@]}" --quiet --out "$OUT/gpu_results_8b.json" \
    || echo "gpu_bench: the 8B-class run stopped early (status $?)" >&2
fi
echo "gpu_bench: $(( $(date +%s) - start )) s; results in $OUT/gpu_results.json$([ "$TINY" = 0 ] && echo " and $OUT/gpu_results_8b.json")"
