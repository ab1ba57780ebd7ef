"""The ops the evaluator and the CPU backend learned from real XLA programs, with hostile attributes.

fft, topk, cholesky, the batch-norm ops, the 8-bit float constants and jax's LAPACK custom calls
each read attributes from the text (fft_length, k, lower, feature_index, epsilon, backend_config).
Wrong or extreme values are refused with one located line by the verifier, before anything is
allocated or run, on `eval` (the evaluator) and `run` (the compiler) alike; the good forms run and
agree with the evaluator.
"""

import re

from harness import Case


def _case(name, body, command, expect="error", mentions=None, extra=(), check=None):
    text = f"HloModule m\nENTRY e {{\n{body}\n}}\n"

    def setup(ctx):
        ctx.write("m.hlo", text)
    return Case(id=f"hlo-ops/{command}/{name}", reader="hlo-ops", args=[command, "m.hlo"] + list(extra),
                setup=setup, expect=expect, names=None if expect == "ok" else "m.hlo",
                mentions=mentions, check=check, quick=True)


def _matches(label):
    def check(ctx, run):
        if run.exit_code == 0 and not re.search(rb"reference: .*match", run.stdout):
            return "wrong-result", f"expected {label} to match the evaluator"
        return None
    return check


BAD = [
    ("fft-length-past-64-bits",
     "  p = c64[4,8] parameter(0)\n  ROOT f = c64[4,8] fft(p), fft_type=FFT, fft_length={9223372036854775807}",
     r"fft_length"),
    ("fft-unknown-type",
     "  p = c64[4,8] parameter(0)\n  ROOT f = c64[4,8] fft(p), fft_type=DCT, fft_length={8}",
     r"fft_type"),
    ("topk-k-past-the-dimension",
     "  p = f32[4,8] parameter(0)\n  ROOT t = (f32[4,9], s32[4,9]) topk(p), k=9, largest=true",
     r"k=9"),
    ("cholesky-lower-not-a-bool",
     "  p = f32[3,3] parameter(0)\n  ROOT c = f32[3,3] cholesky(p), lower=maybe",
     r"lower=maybe"),
    ("cholesky-not-square",
     "  p = f32[3,4] parameter(0)\n  ROOT c = f32[3,4] cholesky(p), lower=true",
     r"square"),
    ("batch-norm-feature-index-out-of-range",
     "  p = f32[2,3] parameter(0)\n  s = f32[2] parameter(1)\n  o = f32[2] parameter(2)\n"
     "  ROOT b = (f32[2,3], f32[2], f32[2]) batch-norm-training(p, s, o), epsilon=0.001, feature_index=7",
     r"feature_index=7"),
    ("f8-constant-out-of-range",
     "  c = f8e4m3fn[3] constant({1e400, 1, 2})\n  ROOT n = f8e4m3fn[3] negate(c)",
     r"out of range"),
]


def cases(shared, root_user):
    out = []
    for name, body, mentions in BAD:
        for command in ("eval", "run"):
            out.append(_case(name, body, command, mentions=mentions))
    # The good forms run compiled and agree with the evaluator.
    out += [
        _case("fft-rfft-runs", "  p = f32[4,8] parameter(0)\n"
              "  ROOT f = c64[4,5] fft(p), fft_type=RFFT, fft_length={8}", "run", expect="ok",
              extra=["--reference"], check=_matches("an rfft")),
        _case("topk-runs", "  p = f32[4,8] parameter(0)\n"
              "  ROOT t = (f32[4,3], s32[4,3]) topk(p), k=3, largest=true", "run", expect="ok",
              extra=["--reference"], check=_matches("a topk")),
        _case("f8-runs", "  p = f32[8] parameter(0)\n  c = f8e5m2[8] convert(p)\n"
              "  ROOT r = f32[8] convert(c)", "run", expect="ok", extra=["--reference"],
              check=_matches("an f8 round trip")),
    ]
    return out
