"""Profiles as XLA users record them: XSpace (*.xplane.pb) and the JSON variants.

`xlens trace summary` (and the viewer, through the same reader) must read jax.profiler's and
TensorFlow's XSpace and their JSON (ending in an empty "{}"), and answer a hostile XSpace in one
line naming the file and what is wrong: cut off, wrong wire types, lengths past the end, groups,
varints that do not end, times past 146 years, negative durations, files past the input limit and
tables that would make the reader hold without limit. Events whose metadata is missing are named
by their id and counted, not refused; ten million events load in bounded time and memory.
"""

import re

from harness import Case


def _varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _key(field, wire):
    return _varint(field << 3 | wire)


def _int(field, v):
    return _key(field, 0) + _varint(v)


def _len(field, body):
    if isinstance(body, str):
        body = body.encode()
    return _key(field, 2) + _varint(len(body)) + body


def _entry(field, key, value):
    return _len(field, _int(1, key) + _len(2, value))


def _stat(metadata_id, text=None, ref=None, number=None):
    body = _int(1, metadata_id)
    if text is not None:
        body += _len(5, text)
    if ref is not None:
        body += _int(7, ref)
    if number is not None:
        body += _int(4, number)
    return _len(4, body)


def _event(metadata_id, offset_ps, duration_ps, stats=b""):
    return _len(4, _int(1, metadata_id) + _int(2, offset_ps) + _int(3, duration_ps) + stats)


def good_xspace(events=3):
    """A host plane as jax.profiler writes it: a thread of jit_f's CPU thunks (hlo_op by value,
    hlo_module by reference), the tables after the lines."""
    body = b"".join(_event(1, 1000 * 1000 * i, 500 * 1000, _stat(10, text="ynn_fusion") + _stat(11, ref=12))
                    for i in range(events))
    line = _int(1, 7) + _len(2, "tf_XLAPjRtCpuClient") + _int(3, 1_700_000_000_000_000_000) + body
    plane = (_int(1, 0) + _len(2, "/host:CPU") + _len(3, line) + _entry(4, 1, _int(1, 1) + _len(2, "ynn_fusion")) +
             _entry(5, 10, _int(1, 10) + _len(2, "hlo_op")) + _entry(5, 11, _int(1, 11) + _len(2, "hlo_module")) +
             _entry(5, 12, _int(1, 12) + _len(2, "jit_f")))
    return _len(1, plane) + _len(4, "vm")


def _plane_with_line(line):
    return _len(1, _len(2, "/host:CPU") + _len(3, line))


def _case(name, data, expect="error", mentions=None, quick=True, check=None, file="p.xplane.pb", env=None,
          timeout=None, max_rss_mb=None, rss_per_input_byte=0.0):
    def setup(ctx):
        ctx.write(file, data() if callable(data) else data)
    return Case(id=f"profile/{name}", reader="profile", args=["trace", "summary", file], setup=setup,
                expect=expect, names=None if expect == "ok" else file, mentions=mentions, check=check,
                quick=quick, env=env or {}, timeout=timeout, max_rss_mb=max_rss_mb,
                rss_per_input_byte=rss_per_input_byte)


def _stdout(pattern, label):
    def check(ctx, run):
        if run.exit_code == 0 and not re.search(pattern.encode(), run.stdout):
            shown = run.stdout.decode("utf-8", "replace").strip().splitlines()[:3]
            return "wrong-result", f"expected {label} /{pattern}/, got {shown}"
        return None
    return check


JAX_JSON = ('{"displayTimeUnit":"ns","metadata":{"highres-ticks":true},"traceEvents":['
            '{"ph":"M","pid":701,"name":"process_name","args":{"name":"/host:CPU"}},'
            '{"ph":"X","pid":701,"tid":3,"ts":248.851,"dur":17.026,"name":"ynn_fusion",'
            '"args":{"hlo_module":"jit_f","hlo_op":"ynn_fusion"}},{}]}')


def _screenshot(ctx, run):
    import os
    if run.exit_code == 0 and not os.path.exists(ctx.path("shot.png")):
        return "lost-data", "exit 0 without the screenshot"
    return None


def _viewer_case(name, data):
    def setup(ctx):
        ctx.write("p.xplane.pb", data)
    return Case(id=f"profile/viewer-{name}", reader="profile", program="viewer",
                args=["--trace", "p.xplane.pb", "--screenshot", "shot.png", "--size", "800x600"], setup=setup,
                expect="ok", outputs=("shot.png",), check=_screenshot, quick=True, timeout=30)


def cases(shared, root_user):
    good = good_xspace()
    cut = good[: len(good) // 2]
    ten_million_claim = _plane_with_line(_int(3, 1) + _key(4, 2) + _varint(10_000_000 * 40) + b"\x08\x01")
    # 100,000 levels of messages inside a field nobody reads: skipped whole, never walked.
    prefixes, size = [], 0
    for _ in range(100_000):
        prefix = _key(1, 2) + _varint(size)
        prefixes.append(prefix)
        size += len(prefix)
    nested = b"".join(reversed(prefixes))
    deep = _len(1, _len(2, "/host:CPU") + _len(99, nested) + _len(3, _int(3, 1) + _event(1, 0, 1)))
    return [
        # The viewer opens an XSpace through the same reader.
        _viewer_case("xspace-good", good),
        _case("xspace-good", good, expect="ok",
              check=_stdout(r"(?s)3 events.*Kernels by HLO module:.*jit_f.*ynn_fusion", "jit_f's kernels")),
        # Told by its first bytes, whatever its name.
        _case("xspace-good-any-name", good, expect="ok", file="profile.bin",
              check=_stdout(r"3 events", "three events")),
        _case("json-jax-trailing-empty-object", JAX_JSON, expect="ok", file="vm.trace.json",
              check=_stdout(r"(?s)1 events.*jit_f.*cpu_kernel", "jit_f's thunk, a CPU kernel")),
        # The summary reads hlo_op even without args: a million repeats of it cost one.
        _case("json-hlo-op-repeated-a-million-times",
              lambda: '{"traceEvents":[{"ph":"X","name":"k","ts":1,"dur":1,"args":{' +
              ",".join(['"hlo_op":"a"'] * 1_000_000) + '}}]}', expect="ok", file="t.json", quick=False,
              timeout=30, max_rss_mb=80, rss_per_input_byte=1.0, check=_stdout(r"1 events", "the one event")),
        _case("json-event-without-phase", '{"traceEvents":[{"name":"a","ts":1}]}', file="t.json",
              mentions=r'expected "ph"'),
        _case("xspace-cut-off", cut, mentions=r"not a valid XSpace.*(cut off|claims)"),
        _case("xspace-empty", b"", mentions=r"empty file, expected an XSpace"),
        _case("xspace-wrong-wire-type", _len(1, _int(3, 5)), mentions=r"XPlane.*wire type 0, expected 2"),
        _case("xspace-event-stats-wrong-wire-type", _plane_with_line(_len(4, _int(1, 1) + _int(4, 3))),
              mentions=r"XEvent.*field 4 \(stats\) has wire type 0"),
        _case("xspace-huge-length", _key(1, 2) + _varint(1 << 60) + b"\x08", mentions=r"claims \d+ bytes"),
        _case("xspace-ten-million-events-claimed", ten_million_claim, mentions=r"XLine.*claims 400000000 bytes"),
        _case("xspace-group", _key(1, 3) + _key(1, 4), mentions=r"groups"),
        _case("xspace-endless-varint", _key(1, 0) + b"\xff" * 11, mentions=r"longer than 10 bytes"),
        _case("xspace-deeply-nested-unknown-field", deep, expect="ok",
              check=_stdout(r"1 events", "the one event")),
        _case("xspace-missing-metadata", _plane_with_line(_int(3, 1) + _event(42, 0, 1000)), expect="ok",
              check=_stdout(r"(?s)1 events.*warning: xspace_events_without_metadata = 1", "the event counted")),
        _case("xspace-negative-duration", _plane_with_line(_event(1, 0, -7)), mentions=r"duration_ps -7 is negative"),
        _case("xspace-time-past-146-years", _plane_with_line(_int(3, (1 << 62) - 10) + _event(1, 1_000_000, 1)),
              mentions=r"146 years"),
        _case("xspace-line-timestamp-past-146-years", _plane_with_line(_int(3, -(1 << 62)) + _event(1, 0, 1)),
              mentions=r"146 years"),
        _case("xspace-over-the-input-limit", good, env={"XLENS_MAX_INPUT_SIZE": "100"},
              mentions=r"(limit|larger|too large|exceeds)"),
        # Ten million events (each two bytes: metadata 1, nothing else) load in bounded memory.
        _case("xspace-ten-million-events", lambda: _plane_with_line(_int(3, 1) + b"\x22\x02\x08\x01" * 10_000_000),
              expect="ok", quick=False, timeout=60, max_rss_mb=200, rss_per_input_byte=1.5,
              check=_stdout(r"10000000 events", "ten million events")),
        # One event with four million stats (four bytes each): what one event holds is bounded.
        _case("xspace-event-with-millions-of-stats",
              lambda: _plane_with_line(_int(3, 1) + _len(4, _int(1, 1) + b"\x22\x02\x20\x01" * 4_000_000)),
              expect="ok", quick=False, timeout=60, max_rss_mb=150, rss_per_input_byte=1.5,
              check=_stdout(r"1 events", "the one event")),
        # Five million empty lines (two bytes each): the tracks the reader keeps are bounded.
        _case("xspace-line-bomb", lambda: _len(1, _len(2, "/host:CPU") + b"\x1a\x00" * 5_000_000),
              quick=False, timeout=60, max_rss_mb=600, mentions=r"hold more than"),
        # Five million distinct event names: the tables the reader keeps are bounded.
        _case("xspace-metadata-table-bomb",
              lambda: _len(1, _len(2, "/host:CPU") + _len(3, _int(3, 1) + _event(1, 0, 1)) +
                           b"".join(_entry(4, i, _len(2, "k")) for i in range(1, 5_000_001))),
              quick=False, timeout=60, max_rss_mb=600, mentions=r"hold more than"),
    ]
