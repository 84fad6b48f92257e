#!/usr/bin/env bash
# One command for a GPU machine with JAX (CUDA) and PyTorch but no TensorFlow and no network:
# keras_tfm's GPT training speed and MFU on the JAX backend (mixed_bfloat16, fused attention),
# a PyTorch peer, the same training sharded over every device (ModelParallel with get_layout_map;
# skipped, with the reason, on a one-device machine) and generation tokens/s (bench/gpu_bench.py says
# what each row is).
#
#   bash bench/gpu.sh                 # GPU: medium + 12-layer d768 T1024 configs
#   bash bench/gpu.sh --cpu           # tiny CPU smoke run (what tests/test_gpu_bench.py runs)
#   bash bench/gpu.sh --configs large --steps 100 --json out.json
#   bash bench/gpu.sh generation      # only the generation rows of JAX and PyTorch on the GPU
#
# On the GPU the generation rows of bench/generate_backends.py follow (keras_tfm generate on JAX and
# on PyTorch, compiled and eager; KerasHub is not on such a machine): `generation [options]` runs
# them alone, with options for that script.
#
# Keras and the packages it needs that such a machine lacks travel as wheels in .whl/ (ignored by
# git), downloaded beforehand on a machine with pip access:
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     -d .whl keras==3.15.1 namex==0.1.0 optree==0.20.0
# They are installed into a temporary site folder (nothing on the machine changes); keras_tfm runs
# from this working tree (a pip install would pull TensorFlow).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
# Only where keras is missing (the GPU machine); a development or CI environment keeps its own.
if compgen -G ".whl/*.whl" >/dev/null && ! "$PYTHON" -c "import keras" 2>/dev/null; then
  SITE=$(mktemp -d "${TMPDIR:-/tmp}/keras_tfm_site.XXXXXX")
  trap 'rm -rf "$SITE"' EXIT
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" .whl/*.whl
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export KERAS_BACKEND=jax
# JAX and the PyTorch peer share the GPU: allocate on demand instead of JAX's 75 % up front.
export XLA_PYTHON_CLIENT_PREALLOCATE=false
export TF_CPP_MIN_LOG_LEVEL=2
if [[ " $* " == *" --cpu "* ]]; then
  export JAX_PLATFORMS=cpu
fi
GENERATION=(bench/generate_backends.py --gpu --backends jax,torch --no-hub --eager --cold --reps 5
  --output "${TMPDIR:-/tmp}/generate_backends_gpu.txt")
if [[ "${1:-}" == generation ]]; then
  shift
  "$PYTHON" "${GENERATION[@]}" "$@"
  exit
fi
"$PYTHON" bench/gpu_bench.py "$@"
if [[ " $* " != *" --cpu "* ]]; then
  "$PYTHON" "${GENERATION[@]}"
fi
