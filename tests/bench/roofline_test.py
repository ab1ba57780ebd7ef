#!/usr/bin/env python3
"""roofline.py's arithmetic count and its choice of bound, on small modules in the two forms it
reads: JAX's `as_text` (operands named without shapes) and XLA's dumps (shapes and % names)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import roofline  # noqa: E402


def written_hlo(test, text, name="m.hlo"):
    """`text` written to `name` in a temporary directory removed when `test` ends: the path that
    machine_limits and roofline's readers take."""
    directory = tempfile.TemporaryDirectory()
    test.addCleanup(directory.cleanup)
    path = os.path.join(directory.name, name)
    with open(path, "w") as f:
        f.write(text)
    return path

JAX_MODULE = """HloModule jit_f, entry_computation_layout={(f32[64,32]{1,0})->f32[64]{0}}

region_0.1 {
  Arg_0.2 = f32[] parameter(0)
  Arg_1.3 = f32[] parameter(1)
  ROOT add.4 = f32[] add(Arg_0.2, Arg_1.3)
}

ENTRY main.9 {
  x.1 = f32[64,32]{1,0} parameter(0)
  multiply.5 = f32[64,32]{1,0} multiply(x.1, x.1)
  compare.6 = pred[64,32]{1,0} compare(multiply.5, x.1), direction=GT
  select.7 = f32[64,32]{1,0} select(compare.6, multiply.5, x.1)
  constant.1 = f32[] constant(0)
  ROOT reduce_sum.8 = f32[64]{0} reduce(select.7, constant.1), dimensions={1}, to_apply=region_0.1
}
"""

# The same in XLA's dump form, with a convert (no arithmetic) and an integer add (not a float op).
XLA_MODULE = """HloModule f

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %sum = f32[] add(f32[] %a, f32[] %b)
}

ENTRY %main (x: f32[64,32], i: s32[64,32]) -> f32[64] {
  %x = f32[64,32]{1,0} parameter(0)
  %i = s32[64,32]{1,0} parameter(1)
  %j = s32[64,32]{1,0} add(s32[64,32]{1,0} %i, s32[64,32]{1,0} %i)
  %c = f32[64,32]{1,0} convert(s32[64,32]{1,0} %j)
  %m = f32[64,32]{1,0} multiply(f32[64,32]{1,0} %x, f32[64,32]{1,0} %c)
  %zero = f32[] constant(0)
  ROOT %r = f32[64]{0} reduce(f32[64,32]{1,0} %m, f32[] %zero), dimensions={1}, to_apply=%add
}
"""

# A softmax's row: exp of x minus its maximum, and that over the exps' sum; a log and a tanh
# beside it, and a sine, which no rate covers.
SOFTMAX_MODULE = """HloModule jit_softmax

region_max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}

region_add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[64,32]{1,0} parameter(0)
  lowest = f32[] constant(-inf)
  max = f32[64]{0} reduce(x, lowest), dimensions={1}, to_apply=region_max
  bmax = f32[64,32]{1,0} broadcast(max), dimensions={0}
  shifted = f32[64,32]{1,0} subtract(x, bmax)
  e = f32[64,32]{1,0} exponential(shifted)
  zero = f32[] constant(0)
  sum = f32[64]{0} reduce(e, zero), dimensions={1}, to_apply=region_add
  l = f32[64]{0} log(sum)
  t = f32[64]{0} tanh(l)
  s = f32[64]{0} sine(t)
  bsum = f32[64,32]{1,0} broadcast(sum), dimensions={0}
  ROOT out = f32[64,32]{1,0} divide(e, bsum)
}
"""

ELEMENTS = 64 * 32


def limits(hlo_file=None, library_ms=None, rates=None):
    """Limits with flat figures: 10 GB/s at every working set, 100 GFLOP/s peak, and the
    transcendental functions' elements per second given in `rates`."""
    point = {"triad_gbps": 10.0, "copy_gbps": 10.0, "read_gbps": 10.0}
    data = {
        "cpu": "test", "threads": 2,
        "caches": [{"level": 1, "total_bytes": 1 << 16}, {"level": 3, "total_bytes": 1 << 25}],
        "memory": {"array_bytes": 1 << 27, "triad_gbps_all_threads": 10.0,
                   "copy_gbps_all_threads": 10.0, "read_gbps_all_threads": 10.0},
        "working_set_sweep": [dict(point, working_set_bytes=1 << 14)],
        "peak_f32": {"isa": "avx512f", "gflops_one_core": 50.0, "gflops_all_cores": 100.0},
        "hlo_modules": [],
    }
    if rates:
        data["transcendentals"] = {name: {"function": name, "elements_per_second": rate}
                                   for name, rate in rates.items()}
        data["transcendentals"]["gelu_erf"] = {"function": "gelu_erf", "refused": "oneDNN: no"}
    if library_ms is not None:
        data["hlo_modules"] = [{"file": hlo_file, "calls": [{"ms": library_ms, "flops": 1e6}]}]
    return roofline.Limits(data)


class HloFlopsTest(unittest.TestCase):
    def test_jax_form(self):
        # multiply, compare and select per element, the reduce one per element read, and the
        # reducer's scalar add once.
        self.assertEqual(roofline.hlo_flops(JAX_MODULE), 4 * ELEMENTS + 1)

    def test_xla_dump_form(self):
        # The float multiply and the reduce; the integer add and the convert count nothing.
        self.assertEqual(roofline.hlo_flops(XLA_MODULE), 2 * ELEMENTS + 1)

    def test_transcendentals_apart_from_flops(self):
        # The maximum's and the sum's reduce (one per element each, one for each reducer's scalar
        # op), the subtract and the divide; the exp, log, tanh and sine apart.
        flops, transcendentals = roofline.hlo_costs(SOFTMAX_MODULE)
        self.assertEqual(flops, 4 * ELEMENTS + 2)
        self.assertEqual(transcendentals, {"exponential": ELEMENTS, "log": 64, "tanh": 64, "sine": 64})


# Batch norm's shape of module: x's sum over the batch (the outer dimension) read by an output that
# reads x again; dy's sum is an output of its own.
BATCH_SUM_READ_AGAIN = """HloModule jit_batch_sum

region_0.1 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[64,32]{1,0} parameter(0)
  dy = f32[64,32]{1,0} parameter(1)
  zero = f32[] constant(0)
  sum = f32[32]{0} reduce(x, zero), dimensions={0}, to_apply=region_0.1
  bsum = f32[64,32]{1,0} broadcast(sum), dimensions={1}
  c = f32[64,32]{1,0} subtract(x, bsum)
  y = f32[64,32]{1,0} multiply(c, dy)
  dsum = f32[32]{0} reduce(dy, zero), dimensions={0}, to_apply=region_0.1
  ROOT out = (f32[64,32]{1,0}, f32[32]{0}) tuple(y, dsum)
}
"""
class OnePassTest(unittest.TestCase):
    def test_a_sum_over_the_batch_read_again_is_held_to_one_pass(self):
        # Every output needs the batch's sum first, but a schedule that takes a block of columns
        # at a time keeps each block in cache between its sum and its outputs: the bytes once, at
        # the mix's rate (copy's, as much written as read), never a read before them.
        path = written_hlo(self, BATCH_SUM_READ_AGAIN)
        stream = {"copy_gbps": 5.0, "triad_gbps": 8.0, "read_gbps": 20.0}
        read, write = 8 * ELEMENTS, 8 * ELEMENTS
        ms, label, unit, _ = limits().bound(path, read, write, stream=stream)
        self.assertAlmostEqual(ms, (read + write) / 5e9 * 1e3)
        self.assertEqual(label, "L1 copy 5 GB/s")


class BoundTest(unittest.TestCase):
    def setUp(self):
        self.file = written_hlo(self, JAX_MODULE)

    def test_memory_bound_when_bytes_take_longer(self):
        ms, label, unit, work = limits().bound(self.file, 4 * ELEMENTS, 4 * 64)
        self.assertEqual(unit, "GB/s")
        self.assertAlmostEqual(ms, (4 * ELEMENTS + 4 * 64) / 10e9 * 1e3)

    def test_a_stream_measured_beside_the_workload_replaces_the_sweep(self):
        # The sweep says 10 GB/s; the stream kernels measured over this working set just before
        # the round say 20 for the read-only sum (the workload writes under an eighth).
        stream = {"copy_gbps": 5.0, "triad_gbps": 6.0, "read_gbps": 20.0}
        moved = 4 * ELEMENTS + 4 * 64
        ms, label, unit, work = limits().bound(self.file, 4 * ELEMENTS, 4 * 64, stream=stream)
        self.assertAlmostEqual(ms, moved / 20e9 * 1e3)
        self.assertIn("read 20 GB/s", label)
        # A workload that writes as much as it reads is held to copy's rate, although triad
        # measured faster; one that reads two bytes for each it writes to triad's.
        ms, label, unit, work = limits().bound(self.file, 4 * ELEMENTS, 4 * ELEMENTS, stream=stream)
        self.assertAlmostEqual(ms, 8 * ELEMENTS / 5e9 * 1e3)
        self.assertIn("copy 5 GB/s", label)
        ms, label, unit, work = limits().bound(self.file, 8 * ELEMENTS, 4 * ELEMENTS, stream=stream)
        self.assertAlmostEqual(ms, 12 * ELEMENTS / 6e9 * 1e3)
        self.assertIn("triad 6 GB/s", label)

    def test_a_mix_between_copy_and_triad_takes_its_own_rate(self):
        # Adam's mix: four arrays read, three written (3/7 of the bytes written, 4/7 of the way
        # from triad's third to copy's half): seconds per byte 4/7 of copy's and 3/7 of triad's.
        stream = {"copy_gbps": 5.0, "triad_gbps": 8.0, "read_gbps": 20.0}
        ms, label, unit, work = limits().bound(self.file, 16 * ELEMENTS, 12 * ELEMENTS, stream=stream)
        self.assertAlmostEqual(ms, 28 * ELEMENTS * (4 / 7 / 5e9 + 3 / 7 / 8e9) * 1e3)
        self.assertIn("copy-triad 6 GB/s", label)
        # Where copy measured faster it holds whatever the mix, as before.
        stream = {"copy_gbps": 9.0, "triad_gbps": 8.0, "read_gbps": 20.0}
        for read in (4, 8, 16):
            ms, label, unit, work = limits().bound(self.file, read * ELEMENTS, 4 * ELEMENTS, stream=stream)
            self.assertAlmostEqual(ms, (read + 4) * ELEMENTS / 9e9 * 1e3)
            self.assertIn("copy 9 GB/s", label)

    def test_a_workload_writing_more_than_it_reads_takes_copys_rate(self):
        # Three quarters written (one array read, three written), or all but a sliver: copy's
        # rate, copy being the kernel that writes the most (half), although triad measured faster.
        stream = {"copy_gbps": 5.0, "triad_gbps": 8.0, "read_gbps": 20.0}
        for read, written in ((4, 12), (1, 28)):
            ms, label, unit, work = limits().bound(self.file, read * ELEMENTS, written * ELEMENTS, stream=stream)
            self.assertAlmostEqual(ms, (read + written) * ELEMENTS / 5e9 * 1e3)
            self.assertIn("copy 5 GB/s", label)
        self.assertEqual(roofline.Limits.write_mix_bandwidth(0.75, lambda p: stream[p + "_gbps"]), ("copy", 5.0))

    def test_a_mix_within_one_percent_of_a_kernel_takes_its_name(self):
        # The share written, as a fraction of the way from triad's third to copy's half: past 99%
        # the mix is named copy, under 1% triad, and copy-triad between; the rate is the mix's own.
        rates = {"copy": 5.0, "triad": 8.0}
        cases = ((0.995, "copy"), (0.985, "copy-triad"), (0.5, "copy-triad"), (0.015, "copy-triad"),
                 (0.005, "triad"))
        for toward_copy, name in cases:
            written = 1 / 3 + toward_copy * (0.5 - 1 / 3)
            got, gbps = roofline.Limits.write_mix_bandwidth(written, lambda p: rates[p])
            self.assertEqual(got, name, toward_copy)
            self.assertAlmostEqual(1 / gbps, toward_copy / 5.0 + (1 - toward_copy) / 8.0)

    def test_triad_figure_kept_beside_the_mix_matched_bound(self):
        # Layer norm's mix (as much written as read) is held to copy's 5 GB/s; the work item's
        # criterion, the same bytes at triad's 8 GB/s, is kept beside it, from the stream kernels
        # measured beside the workload or, without them, from the sweep (10 GB/s everywhere).
        stream = {"copy_gbps": 5.0, "triad_gbps": 8.0, "read_gbps": 20.0}
        moved = 8 * ELEMENTS
        ms = limits().bound(self.file, 4 * ELEMENTS, 4 * ELEMENTS, stream=stream)[0]
        self.assertAlmostEqual(ms, moved / 5e9 * 1e3)
        self.assertAlmostEqual(limits().triad_ms(4 * ELEMENTS, 4 * ELEMENTS, stream=stream), moved / 8e9 * 1e3)
        self.assertAlmostEqual(limits().triad_ms(4 * ELEMENTS, 4 * ELEMENTS), moved / 10e9 * 1e3)
        # A reduction (held to the read-only sum's 20) too.
        self.assertAlmostEqual(limits().triad_ms(4 * ELEMENTS, 4 * 64, stream=stream),
                               (4 * ELEMENTS + 4 * 64) / 8e9 * 1e3)

    def test_arithmetic_bound_when_operations_take_longer(self):
        # The same operations over few bytes: 8193 flops at 100 GFLOP/s outlast 8 bytes at 10 GB/s.
        ms, label, unit, work = limits().bound(self.file, 4, 4)
        self.assertEqual(unit, "GFLOP/s")
        self.assertEqual(work, 4 * ELEMENTS + 1)
        self.assertAlmostEqual(ms, (4 * ELEMENTS + 1) / 100e9 * 1e3)
        self.assertIn("FMA peak", label)

    def test_each_transcendental_at_its_measured_rate(self):
        with open(self.file, "w") as f:
            f.write(SOFTMAX_MODULE)
        rates = {"exp": 1e9, "log": 2e8, "tanh": 5e8}
        ms, label, unit, work = limits(rates=rates).bound(self.file, 4 * ELEMENTS, 4 * ELEMENTS)
        # The sine has no rate: one flop, with the others.
        flops = 4 * ELEMENTS + 2 + 64
        expected = flops / 100e9 + ELEMENTS / 1e9 + 64 / 2e8 + 64 / 5e8
        self.assertAlmostEqual(ms, expected * 1e3)
        # Longer than its bytes (16 KiB at 10 GB/s, 1.6 us against 2.8 us), so arithmetic-bound,
        # the label naming each function per element of the result.
        self.assertLess(8 * ELEMENTS / 10e9, expected)
        self.assertEqual(label, "FMA + exp 1/elt + log 0.0312/elt + tanh 0.0312/elt")
        self.assertEqual(unit, "Gop/s")
        self.assertEqual(work, flops + ELEMENTS + 128)

    def test_without_rates_a_transcendental_counts_one_flop(self):
        with open(self.file, "w") as f:
            f.write(SOFTMAX_MODULE)
        ms, label, unit, work = limits().bound(self.file, 4, 4)
        self.assertEqual(work, 5 * ELEMENTS + 2 + 3 * 64)
        self.assertIn("FMA peak", label)

    def test_slower_exps_move_the_bound_from_bytes_to_arithmetic(self):
        with open(self.file, "w") as f:
            f.write(SOFTMAX_MODULE)
        _, fast_label, _, _ = limits(rates={"exp": 1e12}).bound(self.file, 4 * ELEMENTS, 4 * ELEMENTS)
        _, slow_label, _, _ = limits(rates={"exp": 1e9}).bound(self.file, 4 * ELEMENTS, 4 * ELEMENTS)
        self.assertIn("GB/s", fast_label)
        self.assertTrue(slow_label.startswith("FMA + exp 1/elt"), slow_label)

    def test_the_better_of_onednn_and_the_inline_loop_holds(self):
        # machine_limits' form: the better rate on top, oneDNN's and the inline loop's beside it.
        data = limits().data
        data["memory"].update(copy_gbps_one_thread=10.0, triad_gbps_one_thread=10.0)
        data["transcendentals"] = {"exp": {
            "function": "exp", "elements_per_second": 2e9, "impl": "xlens inline",
            "inline_elements_per_second": 2e9, "onednn": {"elements_per_second": 1e9}}}
        merged = roofline.Limits(data)
        self.assertEqual(merged.rates, {"exp": 2e9})
        self.assertIn("exp 1.00/2.00", merged.summary_lines()[-1])

    def test_better_keeps_the_faster_rate(self):
        first = limits(rates={"exp": 1e9, "tanh": 5e8}).data
        second = limits(rates={"exp": 2e9, "tanh": 4e8}).data
        merged = roofline.Limits(roofline.better(first, second))
        self.assertEqual(merged.rates, {"exp": 2e9, "tanh": 5e8})

    def test_floors_measured_beside_a_round_replace_the_better_ones(self):
        # Measured before the workloads: oneDNN 1 ms, exp 2e9/s; beside the round, on a busier
        # machine: 3 ms and 1e9/s, a slower FMA peak. The round is held to the figures beside it.
        with open(self.file, "w") as f:
            f.write(SOFTMAX_MODULE)
        data = limits(self.file, library_ms=1.0, rates={"exp": 2e9, "log": 2e9}).data
        floors = {"threads": 2, "peak_f32": {"isa": "avx512f", "gflops_all_cores": 50.0},
                  "hlo_modules": [{"file": self.file, "calls": [{"ms": 3.0, "flops": 1e6}],
                                   "total_ms": 3.0}],
                  "transcendentals": {"exp": {"function": "exp", "elements_per_second": 1e9}}}
        held = roofline.Limits(roofline.beside(data, floors))
        self.assertEqual(held.peak_gflops, 50.0)
        self.assertEqual(held.rates["exp"], 1e9)
        self.assertEqual(held.rates["log"], 2e9)  # not measured beside: the earlier figure holds
        ms, label, unit, work = held.bound(self.file, 4, 4)
        self.assertTrue(label.startswith("oneDNN 3.000 ms"), label)
        self.assertGreater(ms, 3.0)
        # The figures before stay as they were.
        self.assertEqual(roofline.Limits(data).rates["exp"], 2e9)

    def test_library_floor_takes_the_arithmetic_beside_it(self):
        ms, label, unit, work = limits(self.file, library_ms=1.0).bound(self.file, 4, 4)
        self.assertTrue(label.startswith("oneDNN"))
        self.assertAlmostEqual(ms, 1.0 + (4 * ELEMENTS + 1) / 100e9 * 1e3)


    def test_a_masked_products_kept_share_is_named(self):
        # machine_limits gives a masked product's whole flops and, where the blocks its mask keeps
        # timed faster, their flops beside (kept_flops).
        data = limits(self.file, library_ms=1.0)
        data.modules[self.file]["calls"] = [
            {"ms": 0.5, "flops": 1e7, "kept_flops": 0.5625e7, "kept_share": 0.5625, "full_ms": 0.9},
            {"ms": 0.5, "flops": 1e7}]
        ms, label, unit, work = data.bound(self.file, 4, 4)
        self.assertTrue(label.startswith("oneDNN 1.000 ms, mask keeps 56%,"), label)
        # The achieved rate is over the products' whole work whichever timing won: the same as
        # where the full product had timed fastest. The share of the peak (100 GFLOP/s) is over
        # the work oneDNN did: 1.5625e7 flops in 1 ms, 16%, not 20%.
        self.assertEqual(work, 2e7)
        self.assertTrue(label.endswith(", 16% pk"), label)
        data.modules[self.file]["calls"][0] = {"ms": 0.5, "flops": 1e7}
        self.assertEqual(data.bound(self.file, 4, 4)[3], 2e7)

    def test_a_masked_contractions_kept_share_is_named_apart(self):
        # Causal attention's p@v, timed over the part of its contraction xlens computes, says so
        # after q.k's share of scores kept.
        data = limits(self.file, library_ms=1.0)
        data.modules[self.file]["calls"] = [
            {"ms": 0.5, "flops": 1e7, "kept_flops": 0.5625e7, "kept_share": 0.5625, "full_ms": 0.9},
            {"ms": 0.5, "flops": 1e7, "kept_flops": 0.625e7, "kept_share": 0.625, "kept_of": "contraction",
             "full_ms": 0.7}]
        ms, label, unit, work = data.bound(self.file, 4, 4)
        self.assertTrue(label.startswith("oneDNN 1.000 ms, mask keeps 56%, mask keeps 62% of a contraction,"), label)
        self.assertEqual(work, 2e7)


# SOFTMAX_MODULE's operations outside its softmax: the log, tanh and sine of the 64 sums, and
# the two reducers' scalar operations.
REST_OPERATIONS = 3 * 64 + 2


class PartsTest(unittest.TestCase):
    """A library-bound module as a oneDNN program: its calls, then each part beside them
    (machine_limits' "parts") at the faster of oneDNN's primitive and its own bytes and
    arithmetic, then the arithmetic no part covers."""

    # SOFTMAX_MODULE's softmax as machine_limits reports it: max, subtract, exp, sum and divide.
    SOFTMAX_PART = {"kind": "softmax", "shape": "64x32", "read_bytes": 4 * ELEMENTS,
                    "write_bytes": 4 * ELEMENTS,
                    "costs": {"flops": 4 * ELEMENTS, "transcendentals": {"exponential": ELEMENTS}}}

    def setUp(self):
        self.file = written_hlo(self, SOFTMAX_MODULE)

    def bound(self, part, rates={"exp": 1e9}):
        data = limits(self.file, library_ms=1.0, rates=rates)
        data.modules[self.file]["parts"] = [part]
        return data.bound(self.file, 4, 4)

    def test_a_part_slower_in_onednn_is_held_to_its_own_floor(self):
        # oneDNN's softmax took 0.5 ms; its exps take ELEMENTS / 1e9 s and its four operations
        # per element at 100 GFLOP/s, longer than its 16 KiB at 10 GB/s: that holds.
        own_ms = ELEMENTS / 1e9 * 1e3 + 4 * ELEMENTS / 100e9 * 1e3
        self.assertGreater(own_ms, 8 * ELEMENTS / 10e9 * 1e3)
        # Beside it the rest: the log, tanh and sine of the sums (no rate given for log and
        # tanh: one operation each) and the reducers' own scalar operations, 194 operations.
        ms, label, unit, work = self.bound(dict(self.SOFTMAX_PART, ms=0.5))
        self.assertAlmostEqual(ms, 1.0 + own_ms + REST_OPERATIONS / 100e9 * 1e3)
        # The products alone first, then the part's floor and oneDNN's own time for it.
        self.assertTrue(label.startswith("oneDNN 1.000 ms,"), label)
        self.assertTrue(label.endswith(" + softmax 0.002 (oneDNN's 0.500)"), label)
        self.assertEqual(work, 1e6)  # the achieved rate is still over the products' flops

    def test_a_part_faster_in_onednn_takes_onednns_time(self):
        ms, label, _, _ = self.bound(dict(self.SOFTMAX_PART, ms=0.001))
        self.assertAlmostEqual(ms, 1.0 + 0.001 + REST_OPERATIONS / 100e9 * 1e3)
        self.assertTrue(label.endswith(" + softmax 0.001"), label)

    def test_a_refused_part_is_held_to_its_bytes(self):
        # Exps at 1e12 a second: the part's 16 KiB at 10 GB/s take longer than its arithmetic.
        ms, label, _, _ = self.bound(dict(self.SOFTMAX_PART, refused="oneDNN: no"), {"exp": 1e12})
        bytes_ms = 8 * ELEMENTS / 10e9 * 1e3
        self.assertAlmostEqual(ms, 1.0 + bytes_ms + REST_OPERATIONS / 100e9 * 1e3)
        self.assertTrue(label.endswith(" + softmax 0.002 (oneDNN's refused)"), label)

    def test_a_masked_softmax_is_held_to_the_share_its_mask_keeps(self):
        # Over scores a causal mask sets to one value outside half of each row, its own floor is
        # half the whole part's (its exps, operations and bytes), while the operations it covers,
        # which the rest leaves out, are all of the softmax's.
        ms, _, _, _ = self.bound(dict(self.SOFTMAX_PART, ms=0.5, kept_share=0.5))
        own_ms = ELEMENTS / 1e9 * 1e3 + 4 * ELEMENTS / 100e9 * 1e3
        self.assertAlmostEqual(ms, 1.0 + own_ms / 2 + REST_OPERATIONS / 100e9 * 1e3)
        self.assertEqual(roofline.rest_costs(SOFTMAX_MODULE, [dict(self.SOFTMAX_PART, kept_share=0.5)]),
                         (2, {"log": 64, "tanh": 64, "sine": 64}))

    def test_the_rest_is_what_no_part_covers(self):
        flops, transcendentals = roofline.hlo_costs(SOFTMAX_MODULE)
        # The two reducers' scalar operations count one each (hlo_costs), outside every part.
        self.assertEqual((flops, transcendentals["exponential"]), (4 * ELEMENTS + 2, ELEMENTS))
        self.assertEqual(roofline.rest_costs(SOFTMAX_MODULE, [self.SOFTMAX_PART]),
                         (2, {"log": 64, "tanh": 64, "sine": 64}))
        self.assertEqual(roofline.rest_costs(SOFTMAX_MODULE, []), (flops, transcendentals))

    def test_better_keeps_each_parts_faster_time(self):
        data = limits(self.file, library_ms=1.0).data
        data["hlo_modules"][0]["parts"] = [dict(self.SOFTMAX_PART, ms=0.5)]
        twin = json.loads(json.dumps(data))
        twin["hlo_modules"][0]["parts"][0]["ms"] = 0.3
        twin["hlo_modules"][0]["calls"][0]["ms"] = 2.0
        merged = roofline.better(data, twin)["hlo_modules"][0]
        self.assertEqual(merged["calls"][0]["ms"], 1.0)
        self.assertEqual(merged["parts"][0]["ms"], 0.3)
        self.assertEqual(merged["program_ms"], 1.3)


# A step's shapes in small: a product, JAX's softmax of it (max(max(x), -inf) and the divide),
# the bias gradient over the rows, a weight update w - 0.1 g, and an add of two parameters that
# no part covers.
STEP_MODULE = """HloModule jit_step

region_max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}

region_add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[24,40]{1,0} parameter(0)
  w = f32[40,36]{1,0} parameter(1)
  y = f32[24,36]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  lowest = f32[] constant(-inf)
  max = f32[24]{0} reduce(y, lowest), dimensions={1}, to_apply=region_max
  blowest = f32[24]{0} broadcast(lowest), dimensions={}
  max.1 = f32[24]{0} maximum(max, blowest)
  bmax = f32[24,36]{1,0} broadcast(max.1), dimensions={0}
  shifted = f32[24,36]{1,0} subtract(y, bmax)
  e = f32[24,36]{1,0} exponential(shifted)
  zero = f32[] constant(0)
  sum = f32[24]{0} reduce(e, zero), dimensions={1}, to_apply=region_add
  bsum = f32[24,36]{1,0} broadcast(sum), dimensions={0}
  p = f32[24,36]{1,0} divide(e, bsum)
  g = f32[40,36]{1,0} dot(x, p), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  bias_grad = f32[36]{0} reduce(p, zero), dimensions={0}, to_apply=region_add
  rate = f32[] constant(0.1)
  brate = f32[40,36]{1,0} broadcast(rate), dimensions={}
  scaled = f32[40,36]{1,0} multiply(g, brate)
  w.1 = f32[40,36]{1,0} subtract(w, scaled)
  other = f32[40,36]{1,0} add(w, w)
  ROOT t = (f32[40,36]{1,0}, f32[36]{0}, f32[40,36]{1,0}) tuple(w.1, bias_grad, other)
}
"""


@unittest.skipUnless(os.environ.get("XLENS_MACHINE_LIMITS") and os.environ.get("XLENS_MACHINE_LIMITS_HAS_ONEDNN"),
                     "machine_limits with oneDNN not given (XLENS_MACHINE_LIMITS, XLENS_MACHINE_LIMITS_HAS_ONEDNN)")
class ModulePartsTest(unittest.TestCase):
    """machine_limits --calls: the parts of a module beside its products, what each covers, and
    each part's primitive run once on the operands it is timed on, against the operations it
    stands for computed in double precision."""

    def parts(self, text):
        path = written_hlo(self, text)
        proc = subprocess.run([os.environ["XLENS_MACHINE_LIMITS"], "--calls", f"--hlo={path}"],
                              capture_output=True, text=True, check=True)
        return json.loads(proc.stdout)["hlo_modules"][0]["parts"]

    def test_a_steps_parts(self):
        parts = {p["kind"]: p for p in self.parts(STEP_MODULE)}
        self.assertEqual(sorted(parts), ["reduction", "softmax", "sum"])
        self.assertEqual(parts["softmax"]["shape"], "24x36")
        self.assertEqual(sorted(parts["softmax"]["covers"]), ["e", "max", "max.1", "p", "shifted", "sum"])
        self.assertEqual(parts["reduction"]["shape"], "24x36->1x36")
        self.assertEqual(parts["sum"]["covers"], ["w.1", "scaled"])
        self.assertEqual((parts["sum"]["read_bytes"], parts["sum"]["write_bytes"]), (2 * 4 * 40 * 36, 4 * 40 * 36))
        # Each primitive computes what the operations it covers compute.
        for part in parts.values():
            self.assertLess(part["relative_error"], 1e-5, part)
        # What the parts leave: the add no part covers, and the two reducers' scalar operations.
        self.assertEqual(roofline.rest_costs(STEP_MODULE, list(parts.values())), (40 * 36 + 2, {}))

    def test_log_softmax(self):
        text = STEP_MODULE.replace(
            "  p = f32[24,36]{1,0} divide(e, bsum)\n",
            "  l = f32[24]{0} log(sum)\n  bl = f32[24,36]{1,0} broadcast(l), dimensions={0}\n"
            "  p = f32[24,36]{1,0} subtract(shifted, bl)\n")
        softmax = [p for p in self.parts(text) if p["kind"] == "logsoftmax"]
        self.assertEqual(len(softmax), 1)
        self.assertIn("l", softmax[0]["covers"])
        self.assertLess(softmax[0]["relative_error"], 1e-5)

    def test_no_parts_without_a_product(self):
        self.assertEqual(self.parts(SOFTMAX_MODULE), [])


@unittest.skipUnless(os.environ.get("XLENS_MACHINE_LIMITS") and os.environ.get("XLENS_MACHINE_LIMITS_HAS_ONEDNN"),
                     "machine_limits with oneDNN not given (XLENS_MACHINE_LIMITS, XLENS_MACHINE_LIMITS_HAS_ONEDNN)")
class ModuleFormsTest(unittest.TestCase):
    """machine_limits --calls: what it finds in a module without products (JAX's erfc
    expansion), worked out from the HLO."""

    def module(self, text):
        path = written_hlo(self, text)
        proc = subprocess.run([os.environ["XLENS_MACHINE_LIMITS"], "--calls", f"--hlo={path}"],
                              capture_output=True, text=True, check=True)
        return json.loads(proc.stdout)["hlo_modules"][0]

    def test_jaxs_erfc_is_counted_as_one_erf(self):
        # jax 0.10.2's lowering of jax.nn.gelu(x, approximate=False) over f32[8,16]: erfc spelled
        # out (62 operations and an exp per element) as xlens's emitter recognizes it.
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "modules", "exact_gelu.hlo")) as f:
            text = f.read()
        expansions = self.module(text)["erfc_expansions"]
        self.assertEqual([(e["elements"], e["costs"]["transcendentals"]) for e in expansions],
                         [(128, {"exponential": 128})])
        flops, transcendentals = roofline.rest_costs(text, [], expansions)
        # Around the erfc JAX writes x / sqrt 2, its sign, x / 2 and that times the erfc; the
        # exact GELU's rate holds all but the sign: one operation an element is left.
        self.assertEqual(transcendentals, {"erf": 128})
        self.assertEqual(flops, 128)
        self.assertGreater(roofline.hlo_costs(text)[0], 50 * 128)
        # One coefficient of the polynomial off by an ulp: not the expansion, counted as written.
        changed = text.replace("constant(0.112835854)", "constant(0.112835862)")
        self.assertNotEqual(changed, text)
        self.assertEqual(self.module(changed)["erfc_expansions"], [])

    def test_an_erfc_expansion_is_held_to_the_exact_gelus_rate(self):
        text = "HloModule m\n\nENTRY e {\n  ROOT x = f32[128]{0} parameter(0)\n}\n"
        path = written_hlo(self, text)
        data = limits(rates={"exp": 1e9}).data
        data["transcendentals"]["gelu_erf"] = {"function": "gelu_erf", "elements_per_second": 1e8}
        expansion = {"instruction": "erfc.1", "elements": 128,
                     "costs": {"flops": 0, "transcendentals": {}}}
        data["hlo_modules"] = [{"file": path, "calls": [], "erfc_expansions": [expansion]}]
        ms, label, unit, work = roofline.Limits(data).bound(path, 512, 512)
        self.assertAlmostEqual(ms, 128 / 1e8 * 1e3)
        self.assertEqual(label, "FMA + gelu_erf 1/elt, JAX's erfc as one erf")


# Causal attention as JAX writes it (jnp.where(jnp.tril(...), s, -1e9), the mask and the select
# in calls), with TRIL, SELECT and SCALE standing for the mask, the select's operands and the
# scores' users.
MASKED_ATTENTION = """HloModule jit_masked_attention

tril.1 {
  iota.4 = s32[128]{0} iota(), iota_dimension=0
  iota.5 = s32[128,128]{1,0} broadcast(iota.4), dimensions={0}
  iota.6 = s32[128]{0} iota(), iota_dimension=0
  iota.7 = s32[128,128]{1,0} broadcast(iota.6), dimensions={1}
  ge.1 = pred[128,128]{1,0} compare(iota.5, iota.7), direction=GE
  Arg_0.1 = pred[128,128]{1,0} parameter(0)
  constant.7 = pred[] constant(false)
  broadcast_in_dim.2 = pred[128,128]{1,0} broadcast(constant.7), dimensions={}
  ROOT select_n.1 = pred[128,128]{1,0} select(ge.1, Arg_0.1, broadcast_in_dim.2)
}

_where.2 {
  Arg_0.3 = pred[128,128]{1,0} parameter(0)
  broadcast_in_dim.5 = pred[2,128,128]{2,1,0} broadcast(Arg_0.3), dimensions={1,2}
  Arg_1.1 = f32[2,128,128]{2,1,0} parameter(1)
  Arg_2.1 = f32[] parameter(2)
  broadcast_in_dim.6 = f32[2,128,128]{2,1,0} broadcast(Arg_2.1), dimensions={}
  ROOT select_n.3 = f32[2,128,128]{2,1,0} select(SELECT)
}

region_1.4 {
  reduce_sum.3 = f32[] parameter(0)
  reduce_sum.4 = f32[] parameter(1)
  ROOT reduce_sum.5 = f32[] add(reduce_sum.3, reduce_sum.4)
}

ENTRY main.5 {
  constant.9 = pred[] constant(true)
  broadcast_in_dim.9 = pred[128,128]{1,0} broadcast(constant.9), dimensions={}
  mask.1 = pred[128,128]{1,0} parameter(3)
  jit_tril_.1 = pred[128,128]{1,0} call(TRIL), to_apply=tril.1
  q.1 = f32[2,128,16]{2,1,0} parameter(0)
  k.1 = f32[2,128,16]{2,1,0} parameter(1)
  dot_general.2 = f32[2,128,128]{2,1,0} dot(q.1, k.1), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}
  constant.10 = f32[] constant(4)
  div.6 = f32[2,128,128]{2,1,0} broadcast(constant.10), dimensions={}
  div.7 = f32[2,128,128]{2,1,0} divide(dot_general.2, div.6)
  constant.13 = f32[] constant(-1e+09)
  jit__where_.1 = f32[2,128,128]{2,1,0} call(jit_tril_.1, div.7, constant.13), to_apply=_where.2
  exp.1 = f32[2,128,128]{2,1,0} exponential(SCORES)
  v.1 = f32[2,128,16]{2,1,0} parameter(2)
  ROOT dot_general.3 = f32[2,128,16]{2,1,0} dot(exp.1, v.1), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}
"""

CAUSAL = dict(TRIL="broadcast_in_dim.9", SELECT="broadcast_in_dim.5, Arg_1.1, broadcast_in_dim.6",
              SCORES="jit__where_.1")


@unittest.skipUnless(os.environ.get("XLENS_MACHINE_LIMITS") and os.environ.get("XLENS_MACHINE_LIMITS_HAS_ONEDNN"),
                     "machine_limits with oneDNN not given (XLENS_MACHINE_LIMITS, XLENS_MACHINE_LIMITS_HAS_ONEDNN)")
class MaskedProductTest(unittest.TestCase):
    """machine_limits --calls: the share of causal attention's scores its mask keeps, from the
    HLO alone (the floor then times those blocks), and the full product wherever a score may be
    read."""

    def calls(self, text=MASKED_ATTENTION, **parts):
        for key, value in dict(CAUSAL, **parts).items():
            text = text.replace(key, value)
        path = written_hlo(self, text)
        proc = subprocess.run([os.environ["XLENS_MACHINE_LIMITS"], "--calls", f"--hlo={path}"],
                              capture_output=True, text=True, check=True)
        return {c["instruction"]: c for c in json.loads(proc.stdout)["hlo_modules"][0]["calls"]}

    def kept(self, call):
        return {k["rows_per_block"]: k["kept_share"] for k in call.get("kept", [])}

    def softmax_part(self, text):
        path = written_hlo(self, text)
        proc = subprocess.run([os.environ["XLENS_MACHINE_LIMITS"], "--calls", f"--hlo={path}"],
                              capture_output=True, text=True, check=True)
        parts = [p for p in json.loads(proc.stdout)["hlo_modules"][0]["parts"] if p["kind"] == "softmax"]
        self.assertEqual(len(parts), 1)
        return parts[0]

    def test_the_softmax_of_masked_scores_keeps_the_masks_share(self):
        # jax.nn.softmax over the scores: exp(x - max x) over its rows' sum.
        softmax = MASKED_ATTENTION.replace(
            "ENTRY main.5 {",
            "region_max {\n  a.1 = f32[] parameter(0)\n  b.1 = f32[] parameter(1)\n"
            "  ROOT m.1 = f32[] maximum(a.1, b.1)\n}\n\nENTRY main.5 {").replace(
            "  exp.1 = f32[2,128,128]{2,1,0} exponential(SCORES)\n",
            "  ninf.1 = f32[] constant(-inf)\n"
            "  max.1 = f32[2,128]{1,0} reduce(SCORES, ninf.1), dimensions={2}, to_apply=region_max\n"
            "  bmax.1 = f32[2,128,128]{2,1,0} broadcast(max.1), dimensions={0,1}\n"
            "  shifted.1 = f32[2,128,128]{2,1,0} subtract(SCORES, bmax.1)\n"
            "  e.1 = f32[2,128,128]{2,1,0} exponential(shifted.1)\n"
            "  zero.1 = f32[] constant(0)\n"
            "  sum.1 = f32[2,128]{1,0} reduce(e.1, zero.1), dimensions={2}, to_apply=region_1.4\n"
            "  bsum.1 = f32[2,128,128]{2,1,0} broadcast(sum.1), dimensions={0,1}\n"
            "  exp.1 = f32[2,128,128]{2,1,0} divide(e.1, bsum.1)\n")
        self.assertNotEqual(softmax, MASKED_ATTENTION)

        def module(**parts):
            text = softmax
            for key, value in dict(CAUSAL, **parts).items():
                text = text.replace(key, value)
            return text
        # Row r of 128 keeps columns 0 to r: 128 * 129 / 2 of 128 * 128 elements.
        self.assertAlmostEqual(self.softmax_part(module())["kept_share"], 129 / 256)
        # Unmasked scores, or a mask from a parameter: every element counts.
        self.assertNotIn("kept_share", self.softmax_part(module(SCORES="div.7")))
        self.assertNotIn("kept_share", self.softmax_part(module(TRIL="mask.1")))

    def test_causal_scores_in_blocks_of_query_rows(self):
        calls = self.calls()
        # Rows 0-31 keep keys 0-31, rows 32-63 keys 0-63, ...: (1 + 2 + 3 + 4) / 16 in blocks of
        # 32 rows, (1 + 2) / 4 in blocks of 64; 128 rows is the whole product.
        self.assertEqual(self.kept(calls["dot_general.2"]), {32: 0.625, 64: 0.75})
        self.assertNotIn("kept_of", calls["dot_general.2"])

    def test_causal_probabilities_contracted_in_blocks_of_rows(self):
        # exp of the masked scores is 0 in every masked column: the second product contracts
        # each block of rows only up to its last unmasked column, rounded up to 16, as xlens's
        # thunk does (onednn_masked_contraction.cc). Rows 0-31 over columns 0-31, rows 32-63 over
        # 0-63, ...: as the scores kept; 128 rows would be the whole contraction.
        call = self.calls()["dot_general.3"]
        self.assertEqual(call["kept_of"], "contraction")
        self.assertEqual(self.kept(call), {32: 0.625, 64: 0.75})

    def test_a_contraction_xlens_would_not_split_is_the_full_product(self):
        # Row r keeps columns 0 to r + 40: blocks of 64 rows over columns 0-111 (rounded up to
        # 16) and 0-127 keep 0.94 of the contraction, blocks of 32 rows 0.875, and the thunk
        # takes 3/4 at most: none is timed.
        ge = "direction=GE"
        text = MASKED_ATTENTION.replace("ge.1 = pred[128,128]{1,0} compare(iota.5, iota.7), " + ge,
                                        "c.9 = s32[] constant(-40)\n"
                                        "  cb.9 = s32[128,128]{1,0} broadcast(c.9), dimensions={}\n"
                                        "  k.9 = s32[128,128]{1,0} add(iota.7, cb.9)\n"
                                        "  ge.1 = pred[128,128]{1,0} compare(iota.5, k.9), " + ge)
        self.assertNotIn("kept", self.calls(text)["dot_general.3"])

    def test_probabilities_without_a_mask_are_the_full_product(self):
        # The exponential of the scaled scores themselves: every column can be nonzero.
        self.assertNotIn("kept", self.calls(SCORES="div.7")["dot_general.3"])
        # A mask from a parameter: not worked out at compile time.
        self.assertNotIn("kept", self.calls(TRIL="mask.1")["dot_general.3"])
        # A value that varies along the row where the mask takes its constant: exp(s) + s / 4
        # reads the scores outside the select.
        varied = MASKED_ATTENTION.replace(
            "exp.1 = f32[2,128,128]{2,1,0} exponential(SCORES)",
            "e.1 = f32[2,128,128]{2,1,0} exponential(SCORES)\n"
            "  exp.1 = f32[2,128,128]{2,1,0} add(e.1, div.7)")
        self.assertNotIn("kept", self.calls(varied)["dot_general.3"])

    def test_the_select_either_way_round(self):
        # jnp.where(~tril, -1e9, s): the scores are the branch taken where the condition is false.
        calls = self.calls(SELECT="broadcast_in_dim.5, broadcast_in_dim.6, Arg_1.1")
        # Then the scores kept are those above the diagonal: rows 0-63 read keys 1-127, rows
        # 64-127 keys 65-127.
        self.assertEqual(self.kept(calls["dot_general.2"])[64], (64 * 127 + 64 * 63) / 128 / 128)

    def test_a_mask_from_a_parameter_is_the_full_product(self):
        self.assertNotIn("kept", self.calls(TRIL="mask.1")["dot_general.2"])

    def test_the_masks_the_runtime_works_out(self):
        # The runtime's rule (runtime::SelectedPositions) decides: xlens computes every score of a
        # block-causal mask, row / 32 >= column / 32, as it works out no division; the floor then
        # times the full product too. The same mask as row * 2 >= column * 2 keeps the causal share.
        ge = "  ge.1 = pred[128,128]{1,0} compare(iota.5, iota.7), direction=GE\n"
        scaled = lambda op: (
            "  c.1 = s32[] constant(OP)\n  cb.1 = s32[128,128]{1,0} broadcast(c.1), dimensions={}\n"
            "  r.1 = s32[128,128]{1,0} OP(iota.5, cb.1)\n  k.2 = s32[128,128]{1,0} OP(iota.7, cb.1)\n"
            "  ge.1 = pred[128,128]{1,0} compare(r.1, k.2), direction=GE\n").replace(
                "constant(OP)", "constant(32)" if op == "divide" else "constant(2)").replace("OP", op)
        blocks = self.calls(MASKED_ATTENTION.replace(ge, scaled("divide")))
        self.assertNotIn("kept", blocks["dot_general.2"])
        doubled = self.calls(MASKED_ATTENTION.replace(ge, scaled("multiply")))
        self.assertEqual(self.kept(doubled["dot_general.2"]), {32: 0.625, 64: 0.75})

    def test_a_score_read_elsewhere_is_the_full_product(self):
        # The scaled scores feed the exponential directly, the select unused: every score is read.
        calls = self.calls(SCORES="div.7")
        self.assertNotIn("kept", calls["dot_general.2"])
        self.assertEqual(calls["dot_general.2"]["shape"], "2x128x16x128")


class RowSharesTest(unittest.TestCase):
    """The per-round share, % triad and the counts at 90% that codegen_vs_xla.py prints."""

    def setUp(self):
        self.file = written_hlo(self, JAX_MODULE)

    def library_row(self, beside_ms, best_rounds):
        """A row bound by a 1 ms oneDNN call (the run's best), its floors beside each round
        measured at `beside_ms`, xlens's best and median runs per round `best_rounds`."""
        floors = [{"hlo_modules": [{"file": self.file, "calls": [{"ms": ms, "flops": 1e6}]}]}
                  for ms in beside_ms]
        return dict(hlo_file=self.file, read_bytes=4, write_bytes=4, floors=floors, streams=[],
                    our_best_rounds=best_rounds, our_times=[t * 1.1 for t in best_rounds])

    def test_a_floor_beside_never_looser_than_the_runs_best(self):
        # Measured in a busy moment beside the rounds (2 and 3 ms) the floor would give xlens
        # 150% and more; held to the run's best (1 ms) each round gives 80%.
        summary = roofline.row_shares(limits(self.file, library_ms=1.0),
                                      self.library_row([2.0, 3.0, 2.0], [1.25, 1.25, 1.25]))
        self.assertEqual(summary["kind"], "library")
        self.assertAlmostEqual(summary["share"], 80.0, delta=0.1)
        self.assertAlmostEqual(summary["bound_ms"], 1.0, delta=0.001)
        self.assertFalse(summary["unreliable"])
        self.assertNotIn("beside", summary["label"])

    def test_a_floor_beside_holds_where_it_is_stricter(self):
        summary = roofline.row_shares(limits(self.file, library_ms=1.0),
                                      self.library_row([0.5, 0.5, 0.5], [1.0, 1.0, 1.0]))
        self.assertAlmostEqual(summary["share"], 50.0, delta=0.1)
        self.assertIn("beside", summary["label"])

    def test_a_floor_beside_one_round_holds_every_round(self):
        # The run's best before and after the workloads 1 ms, beside the rounds 0.5, 2 and 2 ms:
        # the run measured the call at 0.5 ms, so xlens's 1.05 ms is 48% in every round, not 95%.
        summary = roofline.row_shares(limits(self.file, library_ms=1.0),
                                      self.library_row([0.5, 2.0, 2.0], [1.05, 1.05, 1.05]))
        self.assertAlmostEqual(summary["share"], 100 * 0.5 / 1.05, delta=0.1)
        self.assertAlmostEqual(summary["median_share"], 100 * 0.5 / 1.155, delta=0.1)
        self.assertAlmostEqual(summary["bound_ms"], 0.5, delta=0.001)

    def test_the_bound_printed_is_the_median_rounds(self):
        # Each round held to the best floor (0.45 ms, beside the second round) against best runs
        # of 0.5, 1 and 0.75 ms: shares 90%, 45% and 60%; the median is the third round's, whose
        # own floor (0.6 ms) did not hold, so its bound is the run's, not `beside`.
        summary = roofline.row_shares(limits(self.file, library_ms=1.0),
                                      self.library_row([0.9, 0.45, 0.6], [0.5, 1.0, 0.75]))
        self.assertAlmostEqual(summary["share"], 60.0, delta=0.1)
        self.assertTrue(summary["label"].startswith("oneDNN 0.450 ms"), summary["label"])
        self.assertNotIn("beside", summary["label"])

    def test_a_beaten_floor_is_flagged_and_not_counted(self):
        run = limits(self.file, library_ms=1.0)
        fast = roofline.row_shares(run, self.library_row([1.0], [0.8]))
        good = roofline.row_shares(run, self.library_row([1.0], [1.05]))
        slow = roofline.row_shares(run, self.library_row([1.0], [2.0]))
        self.assertTrue(fast["unreliable"])
        self.assertFalse(good["unreliable"])
        at_90, rows, median, left_out, _ = roofline.kind_counts([fast, good, slow], "library")
        self.assertEqual((at_90, rows, left_out), (1, 3, 1))
        self.assertAlmostEqual(median, (100 / 1.05 + 50) / 2, delta=0.1)  # the kept rows only
        self.assertEqual(roofline.kind_counts([fast, good, slow], "memory"), (0, 0, None, 0, 0))

    def test_a_row_in_xlenss_own_loops_is_held_to_its_bytes_and_arithmetic(self):
        # Every call of the row in xlens's own loops (a depthwise convolution), faster than
        # oneDNN's standalone time (1 ms here): that time is no floor for them; the calls'
        # multiply-adds at the FMA peak are, with the module's other arithmetic, beside its bytes.
        run = limits(self.file, library_ms=1.0)
        own = roofline.row_shares(run, dict(self.library_row([1.0], [0.8]), own_kernels=True))
        flops, transcendentals = roofline.hlo_costs(JAX_MODULE)
        floor_ms = run.arithmetic(flops + 1e6, transcendentals)[0]
        self.assertTrue(own["own_loops_beat_library"])
        self.assertEqual(own["kind"], "arithmetic")
        self.assertAlmostEqual(own["bound_ms"], floor_ms, delta=1e-9)
        self.assertAlmostEqual(own["share"], 100 * floor_ms / 0.8, delta=1e-6)
        # Faster than that is a floor beaten, flagged and left out as any other.
        fast = roofline.row_shares(run, dict(self.library_row([1.0], [floor_ms / 2]), own_kernels=True))
        self.assertTrue(fast["unreliable"])
        self.assertEqual(roofline.kind_counts([fast], "arithmetic")[:4], (0, 1, None, 1))
        # Own loops slower than oneDNN's time (the MNIST step's small products) stay held to it,
        # and so does the same row on oneDNN's kernels.
        slow = roofline.row_shares(run, dict(self.library_row([1.0], [2.0]), own_kernels=True))
        self.assertEqual(slow["kind"], "library")
        self.assertAlmostEqual(slow["share"], 50.0, delta=0.01)  # and the arithmetic beside
        self.assertFalse(slow["own_loops_beat_library"])
        self.assertEqual(roofline.row_shares(run, self.library_row([1.0], [0.8]))["kind"], "library")

    def test_the_listing_says_whether_every_call_runs_in_xlenss_own_loops(self):
        import codegen_vs_xla
        own = codegen_vs_xla.all_own_library_kernels
        depthwise = ("      1.147 ms   4.4%  library-call fusion (oneDNN convolution[128 groups]; "
                     "kernel depthwise:avx512; 8 parts on the pool)\n")
        product = ("      0.074 ms   0.3%  library-call fusion.1 (oneDNN matmul(lhs, rhs); "
                   "kernel brg:avx512_core; 2 parts on the pool)\n")
        self.assertTrue(own(depthwise))
        self.assertFalse(own(depthwise + product))  # a call of any name counts
        self.assertFalse(own(depthwise + "  ... 3 more\n"))  # a cut listing may hide one
        self.assertFalse(own("      0.5 ms  kernel fusion [fusion x8] buffers 1+1\n"))  # no call

    def test_each_share_is_judged_unreliable_by_itself(self):
        # Mix-matched shares 150%, 104% and 80%; at triad's rate 95%, 96% and 70%. The first two
        # beat their mix-matched floor but not triad's: they count at triad, and every count is
        # out of all three rows.
        def row(share, triad):
            return dict(share=share, median_share=share * 0.9, triad=triad, kind="memory",
                        unreliable=share > roofline.UNRELIABLE_SHARE)
        rows = [row(150, 95), row(104, 96), row(80, 70)]
        self.assertEqual(roofline.kind_counts(rows, "memory"), (0, 3, 80, 2, 0))
        # By the median run both rows that beat their floor are left out (135% by itself, 93.6%
        # because its best run beat the same floor): that floor is wrong for the row.
        self.assertEqual(roofline.kind_counts(rows, "memory", "median_share"), (0, 3, 72, 2, 0))
        self.assertEqual(roofline.kind_counts(rows, "memory", "triad"), (2, 3, 95, 0, 0))

    def test_a_row_without_a_figure_counts_in_the_rows_of_its_kind(self):
        # Two bandwidth-bound rows, one without a pair figure (no pairs beside its rounds):
        # "1 of 2", with the one left out without a figure, never "1 of 1".
        rows = [dict(kind="memory", pair=95.0, unreliable=False),
                dict(kind="memory", pair=None, unreliable=False)]
        self.assertEqual(roofline.kind_counts(rows, "memory", "pair"), (1, 2, 95.0, 0, 1))

    def test_memory_rows_per_round_against_the_stricter_stream(self):
        # 10 GB/s in the run; beside the rounds 5, 20 and 5 GB/s: the run measured 20 GB/s over
        # this working set, so every round is held to it.
        moved = 4 * ELEMENTS + 4 * 64
        stream = lambda gbps: {"triad_gbps": gbps, "copy_gbps": gbps, "read_gbps": gbps}
        floor = moved / 10e9 * 1e3
        row = dict(hlo_file=self.file, read_bytes=4 * ELEMENTS, write_bytes=4 * 64, floors=None,
                   streams=[stream(5.0), stream(20.0), stream(5.0)],
                   our_best_rounds=[floor / 0.8] * 3, our_times=[floor] * 3)
        summary = roofline.row_shares(limits(), row)
        self.assertEqual(summary["kind"], "memory")
        self.assertAlmostEqual(summary["share"], 40.0, delta=0.1)  # not 80%, 40%, 80%
        self.assertAlmostEqual(summary["triad"], 40.0, delta=0.1)
        self.assertIn("20 GB/s", summary["label"])
        # Without streams beside, the same statistic: each round's best against the run's triad.
        row.update(streams=None, our_best_rounds=[floor / 0.5, floor / 0.95, floor / 0.7])
        summary = roofline.row_shares(limits(), row)
        self.assertAlmostEqual(summary["triad"], 70.0, delta=0.1)
        self.assertAlmostEqual(summary["share"], 70.0, delta=0.1)
        self.assertEqual(roofline.kind_counts([summary], "memory", "triad")[:2], (0, 1))

    def pairs(self, module_ms, kernels):
        """A measure_pairs result: per pair the module's ms and each kernel's GB/s."""
        return {"module_ms": module_ms,
                "kernels": {k: {"gbps": gbps} for k, gbps in kernels.items()}}

    def test_pair_holds_each_run_to_the_kernels_right_after_it(self):
        # A row that reads 2 bytes for each it writes: triad's rate (copy slower). The memory in
        # two phases, 5 GB/s and 10 GB/s, from pair to pair: the module at 92% of the kernels of
        # its own pair, one pair at 50% (a neighbour took the bus during the module's run).
        # Every pair but that one reads 92% (held to the round's best pass, the slow pairs would
        # read 46%); held to the run's 10 GB/s, the slow round's best reads 46%.
        read, write = 2 * 4 * ELEMENTS, 4 * ELEMENTS
        moved = read + write
        ms = lambda gbps: moved / (gbps * 1e9) * 1e3
        slow = self.pairs([ms(4.6), ms(9.2), ms(2.5)],
                          {"copy": [4.0, 8.0, 4.0], "triad": [5.0, 10.0, 5.0]})
        fast = self.pairs([ms(9.2)] * 3, {"copy": [8.0] * 3, "triad": [10.0] * 3})
        stream = lambda gbps: {"triad_gbps": gbps, "copy_gbps": gbps / 1.25, "read_gbps": gbps}
        row = dict(hlo_file=self.file, read_bytes=read, write_bytes=write, floors=None,
                   streams=[stream(5.0), stream(10.0)], pairs=[slow, fast],
                   our_best_rounds=[ms(4.6), ms(9.2)], our_times=[ms(4.6), ms(9.2)])
        summary = roofline.row_shares(limits(), row)
        self.assertEqual(summary["kind"], "memory")
        self.assertAlmostEqual(summary["pair"], 92.0, delta=0.1)
        self.assertAlmostEqual(summary["pair_quartiles"][0], 92.0, delta=0.1)
        # The best of each: the best run (9.2 GB/s) against triad's best pass (10 GB/s).
        self.assertAlmostEqual(summary["pair_best_of_each"], 92.0, delta=0.1)
        self.assertAlmostEqual(summary["share"], 46.0, delta=0.1)  # never loosened by it
        self.assertFalse(summary["pair_unreliable"])
        self.assertEqual(roofline.kind_counts([summary], "memory", "pair")[:2], (1, 1))
        # Each pair under the row's own rule: where copy ran faster than triad, copy's rate (the
        # second round's pairs 46%; with the first round's 92%, 92% and 50%, a median of 48%).
        fast["kernels"]["copy"]["gbps"] = [20.0] * 3
        summary = roofline.row_shares(limits(), row)
        self.assertAlmostEqual(summary["pair"], 48.0, delta=0.1)
        self.assertAlmostEqual(summary["pair_best_of_each"], 46.0, delta=0.1)
        # A module over the kernels of its own pairs beat them: left out of the count.
        row.update(pairs=[self.pairs([ms(6.0)] * 3, {"copy": [4.0] * 3, "triad": [5.0] * 3})] * 2)
        summary = roofline.row_shares(limits(), row)
        self.assertAlmostEqual(summary["pair"], 120.0, delta=0.1)
        self.assertTrue(summary["pair_unreliable"])
        self.assertEqual(roofline.kind_counts([summary], "memory", "pair")[:4], (0, 1, None, 1))
        # Without pairs beside every round, or for a library-bound row, there is none.
        row.update(pairs=[slow])
        self.assertIsNone(roofline.row_shares(limits(), row)["pair"])
        library = self.library_row([1.0], [1.0])
        library.update(pairs=[slow])
        self.assertIsNone(roofline.row_shares(limits(self.file, library_ms=1.0), library)["pair"])

    def test_a_row_is_flagged_beyond_the_controls_spread(self):
        # Triad's rate, 10 GB/s in every pair. The control, a module at its floor, reads 90% to
        # 100% between its quartiles over 9 pairs: twice the standard error of a median of 9
        # pairs spread so is 2 * 1.2533 * (10 / 1.349) / 3 = 6.19 points. A row at its floor,
        # half its pairs over 100% (97% in four pairs of eight, 105% in four): its median 101% is
        # within them, so it counts, at 90% and in the median as 100%. A row whose median is 110%
        # beat its floor: flagged.
        read, write = 2 * 4 * ELEMENTS, 4 * ELEMENTS
        ms = lambda gbps: (read + write) / (gbps * 1e9) * 1e3
        kernels = {"copy": [8.0] * 9, "triad": [10.0] * 9}
        control = roofline.pair_shares(limits(), read, write, [self.pairs(
            [ms(10 * s / 100) for s in (86, 88, 90, 92, 95, 98, 100, 102, 104)], kernels)])
        self.assertEqual((control["q1"], control["q3"], control["pairs"]), (90.0, 100.0, 9))
        self.assertAlmostEqual(roofline.pair_beaten_over(control), 106.19, delta=0.01)

        def row(shares):
            pairs = self.pairs([ms(10 * s / 100) for s in shares],
                               {k: v[:len(shares)] for k, v in kernels.items()})
            return dict(hlo_file=self.file, read_bytes=read, write_bytes=write, floors=None,
                        streams=None, pairs=[pairs], our_best_rounds=[ms(8.0)], our_times=[ms(8.0)])

        at_floor = roofline.row_shares(limits(), row([97] * 4 + [105] * 4), control)
        self.assertAlmostEqual(at_floor["pair"], 101.0, delta=0.01)
        self.assertFalse(at_floor["pair_unreliable"])
        counts = roofline.kind_counts([at_floor], "memory", "pair")
        self.assertEqual((counts[:2], counts[3]), ((1, 1), 0))
        self.assertAlmostEqual(counts[2], 100.0, delta=0.01)
        beating = roofline.row_shares(limits(), row([108] * 4 + [112] * 4), control)
        self.assertAlmostEqual(beating["pair"], 110.0, delta=0.01)
        self.assertTrue(beating["pair_unreliable"])
        self.assertEqual(roofline.kind_counts([beating], "memory", "pair")[:4], (0, 1, None, 1))
        # Without a control, a median over 100% is flagged; under it never, however many of its
        # pairs are (a quarter of them at 120% leaves a median of 80% counted).
        self.assertTrue(roofline.row_shares(limits(), row([97] * 4 + [105] * 4))["pair_unreliable"])
        self.assertFalse(
            roofline.row_shares(limits(), row([80] * 6 + [120] * 2), control)["pair_unreliable"])
        # A control spread twice as widely allows twice as much; one whose pairs do not spread,
        # nothing over 100%.
        wide = dict(control, q1=80.0)
        self.assertAlmostEqual(roofline.pair_beaten_over(wide), 112.39, delta=0.01)
        self.assertFalse(
            roofline.row_shares(limits(), row([108] * 4 + [112] * 4), wide)["pair_unreliable"])
        tight = dict(control, q1=control["q3"])
        self.assertTrue(
            roofline.row_shares(limits(), row([97] * 4 + [105] * 4), tight)["pair_unreliable"])

    def test_a_library_row_pairs_each_run_with_its_calls_right_after_it(self):
        # The calls standalone took 0.9 ms in a quiet pair and 1.8 in a busy one (the memory's
        # slow phase for a call that moves many bytes); the module's runs 1.0 and 2.0 ms. Each
        # pair reads 90% plus the arithmetic around the calls, where the run's best call (0.9 ms
        # beside the first round) holds the slow round to 45%.
        arithmetic_ms = (4 * ELEMENTS + 1) / 100e9 * 1e3  # limits(): the module's flops at 100 GFLOP/s
        row = self.library_row([0.9, 1.8], [1.0, 2.0])
        paired = lambda module_ms, calls_ms: {"module_ms": module_ms, "kernels": {},
                                             "floors": {"library": {"ms": calls_ms}}}
        row.update(pairs=[paired([1.0, 1.0, 1.0], [0.9, 0.9, 0.9]), paired([2.0] * 3, [1.8] * 3)])
        summary = roofline.row_shares(limits(self.file, library_ms=1.0), row)
        self.assertEqual(summary["kind"], "library")
        self.assertAlmostEqual(summary["share"], 100.0 * (0.9 + arithmetic_ms) / 2.0, delta=0.01)
        self.assertAlmostEqual(summary["pair"], 100.0 * (0.9 + arithmetic_ms) / 1.0, delta=0.01)
        self.assertAlmostEqual(summary["pair_best_of_each"], summary["pair"], delta=0.01)
        self.assertFalse(summary["pair_unreliable"])
        self.assertEqual(roofline.kind_counts([summary], "library", "pair")[:2], (1, 1))
        # Calls standalone slower than the module's own: a floor beaten, flagged whatever a
        # memory control allows (no control is paired for library calls).
        row.update(pairs=[paired([1.0] * 3, [1.02] * 3)] * 2)
        spread = dict(median=90.0, q1=80.0, q3=110.0, pairs=3)
        summary = roofline.row_shares(limits(self.file, library_ms=1.0), row, spread)
        self.assertGreater(summary["pair"], 100.0)
        self.assertTrue(summary["pair_unreliable"])
        self.assertEqual(roofline.kind_counts([summary], "library", "pair")[:4], (0, 1, None, 1))
        # A round without its calls' pairs: none.
        row.update(pairs=[paired([1.0] * 3, [0.9] * 3), None])
        self.assertIsNone(roofline.row_shares(limits(self.file, library_ms=1.0), row)["pair"])

    def test_pair_of_a_reduction_reads_the_read_only_sum(self):
        self.assertEqual(roofline.paired_kernels(4 * ELEMENTS, 4 * 64), ["read"])
        self.assertEqual(roofline.paired_kernels(8, 4), ["copy", "triad"])
        moved = 4 * ELEMENTS + 4 * 64
        ms = moved / 8e9 * 1e3  # 8 GB/s
        row = dict(hlo_file=self.file, read_bytes=4 * ELEMENTS, write_bytes=4 * 64, floors=None,
                   streams=None, pairs=[self.pairs([ms], {"read": [10.0]})],
                   our_best_rounds=[ms], our_times=[ms])
        self.assertAlmostEqual(roofline.row_shares(limits(), row)["pair"], 80.0, delta=0.1)


@unittest.skipUnless(os.environ.get("XLENS_MACHINE_LIMITS"),
                     "machine_limits not given (XLENS_MACHINE_LIMITS)")
class PairedRunTest(unittest.TestCase):
    """machine_limits --paired on a small reduction: the module compiled and run, each pair
    timed."""

    def test_pairs_of_the_module_and_the_kernels(self):
        path = written_hlo(self, JAX_MODULE)
        proc = subprocess.run([os.environ["XLENS_MACHINE_LIMITS"], f"--paired={path}",
                               "--kernels=read,copy", "--pairs=3"],
                              capture_output=True, text=True, check=True)
        result = json.loads(proc.stdout)
        # Counted from the module: f32[64,32] read, f32[64] written.
        self.assertEqual(result["bytes"], 4 * ELEMENTS + 4 * 64)
        self.assertEqual(len(result["module_ms"]), 3)
        # A working set in the cache: the kernels' timed passes follow as many untimed passes of
        # their own as the module's timed runs follow untimed runs, so that both sides are timed
        # on bytes and a pool the same repetition has warmed (the benchmark's runs follow each
        # other on the same buffers).
        self.assertTrue(result["in_cache"])
        self.assertGreater(result["warm_runs"], 0)
        self.assertEqual(result["warm_passes"], result["warm_runs"])
        self.assertEqual(sorted(result["kernels"]), ["copy", "read"])
        for kernel in result["kernels"].values():
            self.assertEqual(len(kernel["gbps"]), 3)
            self.assertGreater(min(kernel["gbps"]), 0)
            ratio = kernel["ratio"]
            self.assertLessEqual(ratio["q1"], ratio["median"])
            self.assertLessEqual(ratio["median"], ratio["q3"])
            # Each pair keeps the faster store variant it timed; in the cache only plain stores.
            self.assertEqual(kernel["streaming_pairs"], 0)
        # --library needs a product or a convolution to time; this module has none.
        if os.environ.get("XLENS_MACHINE_LIMITS_HAS_ONEDNN"):
            path = written_hlo(self, JAX_MODULE)
            proc = subprocess.run([os.environ["XLENS_MACHINE_LIMITS"], f"--paired={path}",
                                   "--library", "--pairs=2"], capture_output=True, text=True)
            self.assertNotEqual(proc.returncode, 0)
            self.assertIn("no library calls", proc.stderr)
        # A module that is no file fails, naming it.
        proc = subprocess.run([os.environ["XLENS_MACHINE_LIMITS"], "--paired=/nonexistent.hlo"],
                              capture_output=True, text=True)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("/nonexistent.hlo", proc.stderr)


@unittest.skipUnless(os.environ.get("XLENS_MACHINE_LIMITS") and os.environ.get("XLENS_MACHINE_LIMITS_HAS_ONEDNN"),
                     "machine_limits with oneDNN not given (XLENS_MACHINE_LIMITS, XLENS_MACHINE_LIMITS_HAS_ONEDNN)")
class PairedLibraryTest(unittest.TestCase):
    """machine_limits --paired --library: each run of a module with a product paired with the
    product run standalone."""

    def test_pairs_of_the_module_and_its_calls(self):
        path = written_hlo(self, "HloModule m\nENTRY e {\n  a = f32[64,128] parameter(0)\n"
                                "  b = f32[128,96] parameter(1)\n  ROOT d = f32[64,96] dot(a, b), "
                                "lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n")
        proc = subprocess.run([os.environ["XLENS_MACHINE_LIMITS"], f"--paired={path}",
                               "--library", "--pairs=3"], capture_output=True, text=True, check=True)
        result = json.loads(proc.stdout)
        self.assertEqual(len(result["module_ms"]), 3)
        self.assertEqual(result["kernels"], {})  # no stream kernel unless asked for
        calls = result["floors"]["library"]
        self.assertEqual(len(calls["ms"]), 3)
        self.assertGreater(min(calls["ms"]), 0)
        self.assertLessEqual(calls["ratio"]["q1"], calls["ratio"]["q3"])

    def test_the_kernel_choice_is_kept_in_the_runs_cache(self):
        # A depthwise convolution's kernel is chosen by timing at compile time (with bias and
        # ReLU6 both xlens's loops and oneDNN run it, at any size); measure_pairs with the
        # benchmark run's cache compiles as `xlens run` with it does: the choice is kept there
        # (and taken from there by the next process), one per key.
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "dw.hlo")
            with open(path, "w") as f:
                f.write("HloModule dw\nENTRY e {\n  x = f32[2,9,11,80] parameter(0)\n"
                        "  w = f32[3,3,1,80] parameter(1)\n  bias = f32[80] parameter(2)\n"
                        "  c = f32[2,9,11,80] convolution(x, w), window={size=3x3 pad=1_1x1_1}, "
                        "dim_labels=b01f_01io->b01f, feature_group_count=80\n"
                        "  bb = f32[2,9,11,80] broadcast(bias), dimensions={3}\n"
                        "  s = f32[2,9,11,80] add(c, bb)\n  z = f32[] constant(0)\n  six = f32[] constant(6)\n"
                        "  ROOT r = f32[2,9,11,80] clamp(z, s, six)\n}\n")
            cache = os.path.join(directory, "cache")
            os.mkdir(cache, 0o700)
            choices = lambda: sorted(n for n in os.listdir(cache) if n.endswith(".xlenschoice"))
            roofline.measure_pairs(os.environ["XLENS_MACHINE_LIMITS"], path, "", 0, ["copy"], pairs=1,
                                   cache_dir=cache)
            first = choices()
            self.assertEqual(len(first), 1)
            roofline.measure_pairs(os.environ["XLENS_MACHINE_LIMITS"], path, "", 0, ["copy"], pairs=1,
                                   cache_dir=cache)
            self.assertEqual(choices(), first)


class CallsVsFloorsTest(unittest.TestCase):
    """calls_vs_floors.py matches each library call to the floor of the instruction it runs, not
    by order: a module may run its calls in another order than the HLO lists its products."""

    # Two products, the small one run first (fusion.1), and a third that a pass made anew.
    OPTIMIZED = """HloModule two
%fused_computation (param_0: f32[256,256], param_1: f32[256,256]) -> f32[256,256] {
  %param_0 = f32[256,256]{1,0} parameter(0)
  %param_1 = f32[256,256]{1,0} parameter(1)
  ROOT %big = f32[256,256]{1,0} dot(f32[256,256]{1,0} %param_0, f32[256,256]{1,0} %param_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
%fused_computation.1 (param_0: f32[32,64], param_1: f32[64,128]) -> f32[32,128] {
  ROOT %small = f32[32,128]{1,0} dot(f32[32,64]{1,0} %param_0, f32[64,128]{1,0} %param_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
%fused_computation.2 (param_0: f32[64,32], param_1: f32[64,128]) -> f32[32,128] {
  %transpose = f32[32,64]{1,0} transpose(f32[64,32]{1,0} %param_0), dimensions={1,0}
  ROOT %dot.1 = f32[32,128]{1,0} dot(f32[32,64]{1,0} %transpose, f32[64,128]{1,0} %param_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
ENTRY %e (a: f32[256,256], b: f32[256,256], c: f32[32,64], d: f32[64,128], e: f32[64,32]) -> (f32[32,128], f32[256,256], f32[32,128]) {
  %fusion.1 = f32[32,128]{1,0} fusion(f32[32,64]{1,0} %c, f32[64,128]{1,0} %d), kind=kCustom, calls=%fused_computation.1
  %fusion = f32[256,256]{1,0} fusion(f32[256,256]{1,0} %a, f32[256,256]{1,0} %b), kind=kCustom, calls=%fused_computation
  %fusion.2 = f32[32,128]{1,0} fusion(f32[64,32]{1,0} %e, f32[64,128]{1,0} %d), kind=kCustom, calls=%fused_computation.2
  ROOT %t = (f32[32,128]{1,0}, f32[256,256]{1,0}, f32[32,128]{1,0}) tuple(%fusion.1, %fusion, %fusion.2)
}
"""
    SOURCE = """HloModule two
ENTRY e {
  big = f32[256,256] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  small = f32[32,128] dot(c, d), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  moved = f32[32,128] dot(et, d), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  conv = f32[8,8] convolution(x, k), window={size=3x3}, dim_labels=b01f_01io->b01f
}
"""

    def setUp(self):
        import calls_vs_floors
        self.cvf = calls_vs_floors
        self.floors = [dict(instruction="big", kind="matmul", flops=2.0 * 256 ** 3, ms=0.15),
                       dict(instruction="conv", kind="convolution_forward", flops=1.0, ms=0.01),
                       dict(instruction="small", kind="matmul", flops=2.0 * 32 * 64 * 128, ms=0.005),
                       dict(instruction="moved", kind="matmul", flops=2.0 * 32 * 64 * 128, ms=0.006)]

    def test_each_call_takes_the_floor_of_the_instruction_it_runs(self):
        ops = self.cvf.library_ops(self.OPTIMIZED)
        self.assertEqual(ops["fusion.1"], [("small", "dot", 32 * 128)])
        self.assertEqual(ops["fusion.2"], [("dot.1", "dot", 32 * 128)])
        matched, unclaimed = self.cvf.match_calls(
            ["fusion.1", "fusion", "fusion.2"], {}, ops, self.floors, self.cvf.instructions(self.SOURCE))
        self.assertEqual(matched["fusion.1"], (2, ""))
        self.assertEqual(matched["fusion"], (0, ""))
        # dot.1, made by a pass, by its opcode and output elements: the floor left of that shape,
        # not the convolution's before it.
        self.assertEqual(matched["fusion.2"], (3, "matched by shape"))
        self.assertEqual(unclaimed, [1])  # the convolution no call ran is said

    def test_a_call_without_a_floor_and_a_kind_mismatch_are_said(self):
        ops = self.cvf.library_ops(self.OPTIMIZED)
        floors = [dict(self.floors[0], kind="convolution_forward")]
        matched, unclaimed = self.cvf.match_calls(
            ["fusion.1", "fusion"], {}, ops, floors, self.cvf.instructions(self.SOURCE))
        self.assertEqual(matched["fusion.1"], (None, "no floor"))
        self.assertEqual(matched["fusion"], (0, "dot against a convolution_forward floor"))
        self.assertEqual(unclaimed, [])

    def test_a_product_split_per_batch_element_shares_its_floor(self):
        # batched-chain-split's form of attention over 2 batch elements: each chain's q k^T and
        # p v, named anew, each 1/2 of the HLO's batched product.
        chain = """%fused_computation{i} (param_0: f32[1,64,16], param_1: f32[1,64,16]) -> f32[1,64,64] {{
  ROOT %scores.{i} = f32[1,64,64]{{2,1,0}} dot(f32[1,64,16]{{2,1,0}} %param_0, f32[1,64,16]{{2,1,0}} %param_1), lhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, rhs_batch_dims={{0}}, rhs_contracting_dims={{2}}
}}
%fused_computation.p{i} (param_0: f32[1,64,64], param_1: f32[1,64,16]) -> f32[1,64,16] {{
  ROOT %out.{i} = f32[1,64,16]{{2,1,0}} dot(f32[1,64,64]{{2,1,0}} %param_0, f32[1,64,16]{{2,1,0}} %param_1), lhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, rhs_batch_dims={{0}}, rhs_contracting_dims={{1}}
}}
"""
        optimized = ("HloModule split\n" + chain.format(i=0) + chain.format(i=1) +
                     "ENTRY %e (q: f32[2,64,16]) -> f32[2,64,16] {\n"
                     "  %s0 = f32[1,64,64]{2,1,0} fusion(%q0, %k0), kind=kCustom, calls=%fused_computation0\n"
                     "  %o0 = f32[1,64,16]{2,1,0} fusion(%s0, %v0), kind=kCustom, calls=%fused_computation.p0\n"
                     "  %s1 = f32[1,64,64]{2,1,0} fusion(%q1, %k1), kind=kCustom, calls=%fused_computation1\n"
                     "  %o1 = f32[1,64,16]{2,1,0} fusion(%s1, %v1), kind=kCustom, calls=%fused_computation.p1\n"
                     "}\n")
        source = """HloModule attention
ENTRY e {
  qk = f32[2,64,64] dot(q, k), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}
  pv = f32[2,64,16] dot(p, v), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}
"""
        flops = 2.0 * 2 * 64 * 16 * 64  # each product's, both batch elements
        floors = [dict(instruction="qk", kind="matmul", flops=flops, ms=0.02),
                  dict(instruction="pv", kind="matmul", flops=flops, ms=0.03)]
        ops = self.cvf.library_ops(optimized)
        calls = ["s0", "o0", "s1", "o1"]
        # Both products have the same flops: the output's elements tell q k^T's calls from p v's.
        matched, unclaimed = self.cvf.match_calls(calls, {c: flops / 2 for c in calls}, ops, floors,
                                                  self.cvf.instructions(source))
        note = "1/2 of it: its chain split per batch element"
        self.assertEqual(matched, {"s0": (0, note), "s1": (0, note), "o0": (1, note), "o1": (1, note)})
        self.assertEqual(unclaimed, [])
        # One chain's calls alone are not the whole product: no floor.
        matched, unclaimed = self.cvf.match_calls(["s0", "o0"], {}, ops, floors, self.cvf.instructions(source))
        self.assertEqual(matched, {"s0": (None, "no floor"), "o0": (None, "no floor")})
        self.assertEqual(unclaimed, [0, 1])


class FloorSamplingTest(unittest.TestCase):
    def test_rounds_are_topped_up_to_the_floors_sampling(self):
        # 20 runs of 1 ms are 20 ms: 180 more reach 0.2 s, as BestMs times a floor.
        self.assertEqual(roofline.executions_to_match_floor(1.0, 20), 180)
        # A 3 ms median: ceil(200 / 3) = 67 runs in all.
        self.assertEqual(roofline.executions_to_match_floor(3.0, 20), 47)
        # Never more than 50 times the round's runs in all, as BestMs stops at 50x its count.
        self.assertEqual(roofline.executions_to_match_floor(0.02, 20), 980)
        # A round already past 0.2 s, or nothing to go by, needs none.
        self.assertEqual(roofline.executions_to_match_floor(14.7, 20), 0)
        self.assertEqual(roofline.executions_to_match_floor(10.0, 20), 0)
        self.assertEqual(roofline.executions_to_match_floor(0.0, 20), 0)
        self.assertEqual(roofline.executions_to_match_floor(1.0, 0), 0)


class RoundOrderTest(unittest.TestCase):
    def test_a_workloads_rounds_lie_the_whole_suite_apart(self):
        import codegen_vs_xla
        order = codegen_vs_xla.interleaved_rounds(4, 3)
        # Every workload's every round, once, each workload's rounds in their order.
        self.assertEqual(sorted(order), sorted((r, w) for w in range(4) for r in range(3)))
        for w in range(4):
            self.assertEqual([r for r, v in order if v == w], [0, 1, 2])
        # Between two rounds of one workload every other workload runs one round: never two of
        # the same workload within less than the whole suite.
        for i, (r, w) in enumerate(order):
            later = [j for j in range(i + 1, len(order)) if order[j][1] == w]
            if later:
                self.assertEqual(later[0] - i, 4)
                self.assertEqual(sorted(v for _, v in order[i + 1:later[0]]),
                                 sorted(set(range(4)) - {w}))
        # One workload (--only NAME): its rounds back to back, as before.
        self.assertEqual(codegen_vs_xla.interleaved_rounds(1, 3), [(0, 0), (1, 0), (2, 0)])
        self.assertEqual(codegen_vs_xla.interleaved_rounds(3, 0), [])



class StealTest(unittest.TestCase):
    """The host's share of the CPUs (steal) that codegen_vs_xla.py prints per row."""
    STAT = ("cpu  1584348 827 214989 2007176 7472 0 2437 79249 0 0\n"
            "cpu0 786427 487 105389 1014427 2156 0 191 39034 0 0\n"
            "cpu1 797921 340 109600 992748 5316 0 2245 40214 5 1\n"
            "intr 7904228 0 0 0\n")

    def test_ticks_of_the_chosen_cpus_through_steal(self):
        self.assertEqual(roofline.cpu_ticks(self.STAT, {1}),
                         (797921 + 340 + 109600 + 992748 + 5316 + 0 + 2245 + 40214, 40214))
        both = roofline.cpu_ticks(self.STAT, {0, 1})
        self.assertEqual(both[1], 39034 + 40214)

    def test_no_reading_where_proc_stat_cannot_say(self):
        self.assertIsNone(roofline.cpu_ticks(self.STAT, {2}))  # no line for cpu2
        self.assertIsNone(roofline.cpu_ticks("cpu0 1 2 3 4 5 6 7\n", {0}))  # no steal column
        self.assertIsNone(roofline.cpu_ticks("cpu0 1 2 3 4 5 6 7 x\n", {0}))
        self.assertIsNone(roofline.cpu_ticks(self.STAT, set()))

    def test_this_machine(self):
        ticks = roofline.cpu_ticks()
        self.assertIsNotNone(ticks)
        self.assertLessEqual(ticks[1], ticks[0])

    def test_share_over_spans(self):
        spans = [((1000, 10), (1100, 40)), ((5000, 50), (5100, 60))]
        self.assertAlmostEqual(roofline.steal_share(spans), 40 / 200)
        self.assertIsNone(roofline.steal_share([((1000, 10), (1040, 20))]))  # under 50 ticks
        self.assertIsNone(roofline.steal_share(spans + [(None, (1, 1))]))
        self.assertIsNone(roofline.steal_share([((1000, 10), (900, 20))]))
        self.assertIsNone(roofline.steal_share([]))

    def test_the_column(self):
        import codegen_vs_xla
        self.assertEqual(codegen_vs_xla.steal_cell(0.2649), "   26%")
        self.assertEqual(codegen_vs_xla.steal_cell(None), "     -")

if __name__ == "__main__":
    unittest.main()
