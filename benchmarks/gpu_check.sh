#!/usr/bin/env bash
# Every GPU check in one go, for whoever has a CUDA GPU: about 2-4 minutes on one GPU.
#
#   bash benchmarks/gpu_check.sh            # uses .venv (make install first, with TORCH=<a CUDA build>)
#   PYTHON=/path/to/python bash benchmarks/gpu_check.sh
#   DEVICE=cpu bash benchmarks/gpu_check.sh # rehearsal without a GPU: every step on the CPU (checks the script)
#
# Steps (each prints PASS/FAIL; the summary at the end lists them with their times):
#   1. the tests marked cuda (pytest -m cuda): TF32 pinning, device recording, CUDA events;
#   2. attnscore test on cuda with the example implementations in float32 (exact rules) and in
#      float16/bfloat16 with the low-precision rule (--ratio 2);
#   3. torch's own SDPA against the causal spec with is_causal=true, fp16 and bf16, and against
#      specs/sdpa.yaml, specs/sdpa_causal.yaml and specs/sdpa_float_mask.yaml (keywords from the spec) in
#      four dtypes; examples/impl/kernel_attention.py against specs/gqa.yaml, softcap.yaml, alibi.yaml
#      (float32/float64; softcap and alibi in float16/bfloat16 too);
#      examples/impl/varlen_attention.py against specs/varlen.yaml and key_padding.yaml (integer
#      parameters on the GPU: cu_seqlens and key_lengths int32 on cuda, max_seqlen ints), four dtypes;
#      benchmarks/bench_variants.py (the variant reference vs SDPA's math backend, CPU and CUDA);
#   4. attnscore bench on cuda: attention in float16 and score_matrix in float32, default sizes;
#   5. attnscore grade --device cuda on the example submissions (when the grade command has --device).
# Exit code: 0 when every step passed, 1 otherwise, 2 when there is no usable GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
ATTNSCORE=("$(dirname "$PYTHON")/attnscore")
DEVICE=${DEVICE:-cuda}
if [ "$DEVICE" = cuda ] && ! "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "gpu_check: torch sees no CUDA GPU here ($("$PYTHON" -c 'import torch; print(torch.__version__)' 2>&1)); nothing to check" >&2
    exit 2
fi
[ "$DEVICE" = cuda ] && "$PYTHON" -c "import torch; p = torch.cuda.get_device_properties(0); print(f'GPU: {p.name}, {p.total_memory / 2**30:.0f} GiB, torch {torch.__version__}, CUDA {torch.version.cuda}')"

# On the CPU rehearsal, small inputs (float16 matmuls on a CPU are slow); on a GPU, a typical layer.
if [ "$DEVICE" = cpu ]; then BENCH=(--size batch=2,2 --size n_q=128 --size n_k=128 --repeats 5); else BENCH=(); fi
summary=()
failed=0
step() {  # step NAME COMMAND...
    local name=$1; shift
    local start=$SECONDS
    echo; echo "=== $name"
    if "$@"; then summary+=("PASS  $(printf '%4ds' $((SECONDS - start)))  $name")
    else summary+=("FAIL  $(printf '%4ds' $((SECONDS - start)))  $name"); failed=1; fi
}

step "pytest -m cuda" "$PYTHON" -m pytest -q -m cuda -p no:cacheprovider tests
for pair in dot_product_scores:scores score_matrix:score_matrix attention_weights:attention_weights attention:attention; do
    spec=${pair%%:*}; fn=${pair##*:}
    step "test $spec float32 on $DEVICE" "${ATTNSCORE[@]}" test --impl "examples.impl.my_attention:$fn" \
        --spec "specs/$spec.yaml" --device "$DEVICE" --dtype float32 --dtype float64
    step "test $spec fp16/bf16 --ratio 2 on $DEVICE" "${ATTNSCORE[@]}" test --impl "examples.impl.my_attention:$fn" \
        --spec "specs/$spec.yaml" --device "$DEVICE" --dtype float16 --dtype bfloat16 --ratio 2
done
step "SDPA is_causal on $DEVICE, fp16/bf16 --ratio 2" "${ATTNSCORE[@]}" test \
    --impl torch.nn.functional:scaled_dot_product_attention --spec specs/causal_attention.yaml \
    --keyword is_causal=true --device "$DEVICE" --dtype float16 --dtype bfloat16 --ratio 2
for spec in sdpa sdpa_causal sdpa_float_mask; do  # keyword passing: attn_mask, scale, enable_gqa / is_causal come from the spec
    step "SDPA against specs/$spec.yaml on $DEVICE, float32/float64" "${ATTNSCORE[@]}" test \
        --impl torch.nn.functional:scaled_dot_product_attention --spec "specs/$spec.yaml" \
        --device "$DEVICE" --dtype float32 --dtype float64
    step "SDPA against specs/$spec.yaml on $DEVICE, fp16/bf16 --ratio 2" "${ATTNSCORE[@]}" test \
        --impl torch.nn.functional:scaled_dot_product_attention --spec "specs/$spec.yaml" \
        --device "$DEVICE" --dtype float16 --dtype bfloat16 --ratio 2
done
for pair in gqa:gqa_attention softcap:kernel_attention alibi:kernel_attention; do  # flags by name from the spec
    spec=${pair%%:*}; fn=${pair##*:}
    step "kernel against specs/$spec.yaml on $DEVICE, float32/float64" "${ATTNSCORE[@]}" test \
        --impl "examples.impl.kernel_attention:$fn" --spec "specs/$spec.yaml" \
        --device "$DEVICE" --dtype float32 --dtype float64
    if [ "$spec" != gqa ]; then  # softcap and alibi are graded in float16 and bfloat16 too
        step "kernel against specs/$spec.yaml on $DEVICE, float16/bfloat16" "${ATTNSCORE[@]}" test \
            --impl "examples.impl.kernel_attention:$fn" --spec "specs/$spec.yaml" \
            --device "$DEVICE" --dtype float16 --dtype bfloat16
    fi
done
for pair in varlen:flash_attn_varlen_func key_padding:attention; do  # integer parameters: cu_seqlens, key_lengths
    spec=${pair%%:*}; fn=${pair##*:}
    step "kernel against specs/$spec.yaml on $DEVICE, float32/float64" "${ATTNSCORE[@]}" test \
        --impl "examples.impl.varlen_attention:$fn" --spec "specs/$spec.yaml" \
        --device "$DEVICE" --dtype float32 --dtype float64
    step "kernel against specs/$spec.yaml on $DEVICE, fp16/bf16 --ratio 2" "${ATTNSCORE[@]}" test \
        --impl "examples.impl.varlen_attention:$fn" --spec "specs/$spec.yaml" \
        --device "$DEVICE" --dtype float16 --dtype bfloat16 --ratio 2
done
step "bench_variants: reference vs SDPA math backend" "$PYTHON" benchmarks/bench_variants.py --no-golden
step "bench attention float16 on $DEVICE" "${ATTNSCORE[@]}" bench --impl examples.impl.my_attention:attention \
    --spec specs/attention.yaml --device "$DEVICE" --dtype float16 "${BENCH[@]}"
step "bench score_matrix float32 on $DEVICE" "${ATTNSCORE[@]}" bench --impl examples.impl.my_attention:score_matrix \
    --spec specs/score_matrix.yaml --device "$DEVICE" --dtype float32 "${BENCH[@]}"
if "${ATTNSCORE[@]}" grade --help | grep -q -- "--device"; then
    # correct_* submissions must get full marks on the GPU too; the others must not (exit 1 is expected).
    grade_on_cuda() {
        local out; out=$(mktemp)
        "${ATTNSCORE[@]}" grade examples/submissions/scores --spec specs/dot_product_scores.yaml --device "$DEVICE" \
            --format json --output "$out"
        "$PYTHON" - "$out" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
subs = data["submissions"] if isinstance(data, dict) and "submissions" in data else data
bad = [s["submission"] for s in subs if ("correct_" in s["submission"]) != (s["score"] == s["max_score"])]
print("full marks exactly for the correct_* submissions" if not bad else f"unexpected scores: {bad}")
sys.exit(1 if bad else 0)
PY
    }
    step "grade --device $DEVICE (example submissions)" grade_on_cuda
fi

echo; echo "=== summary"
printf '%s\n' "${summary[@]}"
exit $failed
