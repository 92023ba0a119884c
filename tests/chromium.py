"""Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``:
JSON messages ended by NUL on file descriptors 3 and 4), so the tests need no Python package
for it. :meth:`Chromium.load` opens a page and reports its images, console errors, requests,
and a full-page screenshot."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

INSTALL = "install it with `apt-get install -y chromium` (.ci/run does)"
IMAGES = """[...document.images].map(i => ({alt: i.alt, complete: i.complete, width: i.naturalWidth,
  height: i.naturalHeight, shown: i.getBoundingClientRect().width, src: i.src.slice(0, 22)}))"""


def chromium_binary() -> str | None:
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


@dataclass
class Page:
    images: list[dict]
    errors: list[str]  # console errors, uncaught exceptions, and the browser's own error log entries
    requests: list[str]  # every URL the page asked for
    screenshot: bytes
    size: tuple[int, int] = field(default=(0, 0))  # the page's CSS width and height


class Chromium:
    def __init__(self, profile: Path, log: Path, timeout: float = 60.0):
        binary = chromium_binary()
        assert binary, f"headless Chromium is needed for the report tests; {INSTALL}"
        self._timeout, self._id, self._events, self._buf = timeout, 0, [], b""
        r_in, self._w = os.pipe()  # the browser reads its commands on fd 3
        self._r, w_out = os.pipe()  # and writes replies and events on fd 4

        def fds():  # in the child: move both ends out of the way first, then onto 3 and 4
            a, b = fcntl.fcntl(r_in, fcntl.F_DUPFD, 10), fcntl.fcntl(w_out, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        with open(log, "ab") as err:
            self.proc = subprocess.Popen(
                [binary, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run",
                 "--no-default-browser-check", "--hide-scrollbars", f"--user-data-dir={profile}", "about:blank"],
                stdin=subprocess.DEVNULL, stdout=err, stderr=err, preexec_fn=fds, close_fds=False)
        os.close(r_in)
        os.close(w_out)

    # -- the protocol --------------------------------------------------------------------------
    def _read(self) -> dict:
        deadline = time.monotonic() + self._timeout
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            assert left > 0 and select.select([self._r], [], [], left)[0], "Chromium did not answer in time"
            chunk = os.read(self._r, 1 << 20)
            assert chunk, f"Chromium exited (code {self.proc.poll()})"
            self._buf += chunk
        msg, _, self._buf = self._buf.partition(b"\0")
        return json.loads(msg)

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}} | ({"sessionId": session} if session else {})
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._id:
                assert "error" not in reply, f"{method}: {reply['error']}"
                return reply["result"]
            self._events.append(reply)

    def wait(self, event: str, session: str) -> None:
        while not any(e.get("method") == event and e.get("sessionId") == session for e in self._events):
            self._events.append(self._read())

    # -- a page --------------------------------------------------------------------------------
    def load(self, url: str, width: int = 1200) -> Page:
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        sid = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=sid)
        self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": 900, "deviceScaleFactor": 1,
                                                         "mobile": False}, sid)
        self._events.clear()
        self.call("Page.navigate", {"url": url}, sid)
        self.wait("Page.loadEventFired", sid)  # after every image has loaded or failed
        images = self.call("Runtime.evaluate", {"expression": IMAGES, "returnByValue": True}, sid)["result"]["value"]
        size = self.call("Page.getLayoutMetrics", session=sid)["cssContentSize"]
        w, h = int(size["width"]), int(size["height"])
        shot = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                    "clip": {"x": 0, "y": 0, "width": w, "height": h, "scale": 1}}, sid)
        mine = [e for e in self._events if e.get("sessionId") == sid]
        self.call("Target.closeTarget", {"targetId": target})
        return Page(images, _errors(mine), [e["params"]["request"]["url"] for e in mine
                                            if e["method"] == "Network.requestWillBeSent"],
                    base64.b64decode(shot["data"]), (w, h))

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except AssertionError:
            pass  # it may exit before it answers
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._w)
        os.close(self._r)


def _errors(events: list[dict]) -> list[str]:
    out = []
    for e in events:
        p = e.get("params", {})
        if e["method"] == "Runtime.consoleAPICalled" and p["type"] in ("error", "assert"):
            out.append("console: " + " ".join(str(a.get("value", a.get("description", ""))) for a in p["args"]))
        elif e["method"] == "Runtime.exceptionThrown":
            out.append("exception: " + p["exceptionDetails"].get("text", ""))
        elif e["method"] == "Log.entryAdded" and p["entry"]["level"] == "error":
            out.append(f"{p['entry']['source']}: {p['entry']['text']} {p['entry'].get('url', '')}")
    return out
