"""Check the built website: offline assets, and a real headless-Chromium render of every page.

    python3 scripts/check_site.py [_build/html] [--screenshots _build/screenshots]

Three checks, each also importable (tests/test_book.py uses them):

* `find_external_assets(html_dir)`: every built .html file is scanned for things the browser
  would fetch from the internet: `<script src>`, `<link href>` (stylesheets, preloads, icons),
  `<img>/<source>/<iframe>/<video>/<audio> src`, `srcset`, and `url(...)`/`@import` in inline
  styles and in the site's own .css files. Plain hyperlinks (`<a href>`) are allowed.
* `find_error_outputs(html_dir)`: every executed cell that shows an error (a traceback) or
  stderr output, unless the cell is tagged `raises-exception`: a page must never show a failure
  the build let through (issue 21: a page kept a `KeyboardInterrupt` traceback).
* `browser_check(html_dir, screenshot_dir)`: serves the folder on 127.0.0.1, starts headless
  Chromium (Debian package `chromium`) with a DevTools websocket, and opens every page. Per page
  it records console errors, uncaught exceptions and failed loads (Log/Runtime events), every
  network request that leaves 127.0.0.1, waits for MathJax to finish, then checks in the page:
  each Sphinx math element holds a rendered `mjx-container` and no MathJax error (`mjx-merror`,
  or the words "Math input error" left in the text), no raw TeX
  (`$$`, `\\(`, `\\[`, `\\begin{`) is left in the text outside code blocks, and every `<img>` has
  loaded (`naturalWidth > 0`). It writes a full-page PNG of each page to `screenshot_dir`.

Both return a list of problems (empty = pass); the command line prints them and exits 1.
Only the standard library and `websocket-client` are used.
"""

from __future__ import annotations

import argparse
import base64
import functools
import http.server
import json
import os
import re
import shutil
import signal
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--no-default-browser-check",
    "--hide-scrollbars",
    "--remote-debugging-port=0",
    "--remote-allow-origins=*",
    "--window-size=1280,900",
]

PAGE_TIMEOUT_S = 30.0
MAX_SCREENSHOT_HEIGHT = 12000

# ---------------------------------------------------------------------------------------------
# 1. Static check: external assets in the built HTML and CSS
# ---------------------------------------------------------------------------------------------

_EXTERNAL = re.compile(r"^\s*(https?:)?//", re.IGNORECASE)
_CSS_URL = re.compile(r"""url\(\s*['"]?([^'")\s]+)|@import\s+(?:url\()?\s*['"]?([^'");\s]+)""")
_SRC_TAGS = {"script", "img", "iframe", "source", "video", "audio", "embed", "track", "input"}


class _AssetParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.assets: list[tuple[str, str]] = []  # (what, url)
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: (v or "") for k, v in attrs}
        if tag in _SRC_TAGS and a.get("src"):
            self.assets.append((f"<{tag} src>", a["src"]))
        if tag == "link" and a.get("href"):
            rel = a.get("rel", "").lower()
            # hyperlink-like relations (next/prev/index/search/canonical) are not fetched
            if any(
                r in rel for r in ("stylesheet", "preload", "modulepreload", "icon", "manifest")
            ):
                self.assets.append((f"<link rel={rel}>", a["href"]))
        if tag == "object" and a.get("data"):
            self.assets.append(("<object data>", a["data"]))
        for key in ("srcset", "imagesrcset"):
            for part in a.get(key, "").split(","):
                if part.strip():
                    self.assets.append((f"<{tag} {key}>", part.strip().split()[0]))
        if a.get("style"):
            for m in _CSS_URL.finditer(a["style"]):
                self.assets.append((f"<{tag} style>", m.group(1) or m.group(2)))
        if tag == "style":
            self._in_style = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            for m in _CSS_URL.finditer(data):
                self.assets.append(("<style>", m.group(1) or m.group(2)))


def external_assets_in_html(text: str) -> list[tuple[str, str]]:
    """(what, url) for every asset in one HTML document that would load from the internet."""
    parser = _AssetParser()
    parser.feed(text)
    return [(what, url) for what, url in parser.assets if _EXTERNAL.match(url)]


def find_external_assets(html_dir: str | os.PathLike) -> list[str]:
    """Problems: assets of the built site (HTML and its CSS) that point to http(s) or `//`."""
    root = Path(html_dir)
    problems = []
    for path in sorted(root.rglob("*.html")):
        for what, url in external_assets_in_html(
            path.read_text(encoding="utf-8", errors="replace")
        ):
            problems.append(f"{path.relative_to(root)}: external {what}: {url}")
    for path in sorted(root.rglob("*.css")):
        for m in _CSS_URL.finditer(path.read_text(encoding="utf-8", errors="replace")):
            url = m.group(1) or m.group(2)
            if _EXTERNAL.match(url):
                problems.append(f"{path.relative_to(root)}: external css url: {url}")
    return problems


# ---------------------------------------------------------------------------------------------
# 2. Browser check: headless Chromium over the DevTools protocol
# ---------------------------------------------------------------------------------------------


class _ErrorOutputParser(HTMLParser):
    """Error and stderr outputs of myst-nb's cells, with the number of the cell they are in.

    myst-nb renders a code cell as `<div class="cell [tag_<tag> ...]">`, its error output as
    `<div class="output traceback ...">` and stderr as `<div class="output stderr ...">`.
    """

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[set[str]] = []  # the classes of every open <div>
        self.cells = 0
        self.found: list[tuple[int, str, str]] = []  # (cell number, what, first line)
        self._capture: list[str] | None = None
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "div":
            return
        classes = set((dict(attrs).get("class") or "").split())
        self.stack.append(classes)
        if "cell" in classes:
            self.cells += 1
        if "output" in classes and classes & {"traceback", "stderr"}:
            expected = any("tag_raises-exception" in c for c in self.stack[:-1])
            if not expected and self._capture is None:
                what = "an error output" if "traceback" in classes else "stderr output"
                self.found.append((self.cells, what, ""))
                self._capture, self._depth = [], len(self.stack)

    def handle_endtag(self, tag: str) -> None:
        if tag != "div" or not self.stack:
            return
        if self._capture is not None and len(self.stack) == self._depth:
            lines = [ln.strip() for ln in "".join(self._capture).splitlines() if ln.strip()]
            errors = [ln for ln in lines if re.match(r"^\w+(Error|Exception|Interrupt)\b", ln)]
            cell, what, _ = self.found[-1]
            self.found[-1] = (cell, what, (errors or lines or [""])[-1][:200])
            self._capture = None
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        if self._capture is not None:
            self._capture.append(data)


def error_outputs_in_html(text: str) -> list[str]:
    """ "cell 7: an error output: KeyboardInterrupt" for each failure a page shows."""
    parser = _ErrorOutputParser()
    parser.feed(text)
    return [f"cell {cell}: {what}: {line}" for cell, what, line in parser.found]


def find_error_outputs(html_dir: str | os.PathLike) -> list[str]:
    """Problems: pages of the built site that show an error or stderr output."""
    root = Path(html_dir)
    problems = []
    for path in sorted(root.rglob("*.html")):
        if "_static" in path.parts or "mathjax" in path.parts:
            continue
        for found in error_outputs_in_html(path.read_text(encoding="utf-8", errors="replace")):
            problems.append(f"{path.relative_to(root)}: {found}")
    return problems


def find_chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    raise FileNotFoundError(
        "no Chromium found: install the Debian package (apt-get install -y chromium), "
        "which scripts/install.sh does"
    )


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args) -> None:
        pass


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class _DevTools:
    """A minimal synchronous Chrome DevTools Protocol client over one page websocket."""

    def __init__(self, ws_url: str) -> None:
        import websocket  # websocket-client

        self.ws = websocket.create_connection(ws_url, timeout=PAGE_TIMEOUT_S, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict] = []

    def send(self, method: str, timeout: float = PAGE_TIMEOUT_S, **params) -> dict:
        self.next_id += 1
        msg_id = self.next_id
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            msg = self._recv(deadline, method)
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"DevTools {method} failed: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_event(self, name: str, timeout: float = PAGE_TIMEOUT_S) -> dict:
        for i, ev in enumerate(self.events):
            if ev["method"] == name:
                return self.events.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            msg = self._recv(deadline, name)
            if msg.get("method") == name:
                return msg
            if "method" in msg:
                self.events.append(msg)

    def _recv(self, deadline: float, waiting_for: str) -> dict:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"DevTools: no answer to {waiting_for} within the time limit")
        self.ws.settimeout(remaining)
        return json.loads(self.ws.recv())

    def evaluate(self, expression: str, timeout: float = PAGE_TIMEOUT_S):
        result = self.send(
            "Runtime.evaluate",
            timeout=timeout,
            expression=expression,
            awaitPromise=True,
            returnByValue=True,
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def close(self) -> None:
        self.ws.close()


# Runs inside each page once it has loaded. Returns what the checks need, as JSON.
_PAGE_PROBE = r"""
(async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
    if (MathJax.typesetPromise) { await MathJax.typesetPromise(); }
  }
  // give lazy images a chance: scroll through the page, then wait for every <img>
  const imgs = Array.from(document.images);
  imgs.forEach(img => { img.loading = 'eager'; });
  await Promise.all(imgs.map(img => img.complete ? null :
      new Promise(r => { img.addEventListener('load', r); img.addEventListener('error', r);
                         setTimeout(r, 10000); })));
  const mathEls = Array.from(document.querySelectorAll('.math'));
  const unrendered = mathEls.filter(el => !el.querySelector('mjx-container'))
                            .map(el => el.textContent.trim().slice(0, 80));
  const clone = document.body.cloneNode(true);
  clone.querySelectorAll('pre, code, script, style, textarea, mjx-container, .highlight, ' +
                         '.cell_output, .output').forEach(el => el.remove());
  const text = clone.textContent;
  const rawTex = [];
  for (const pat of ['$$', '\\(', '\\[', '\\begin{']) {
    const i = text.indexOf(pat);
    if (i >= 0) rawTex.push(pat + ' ... ' + text.slice(Math.max(0, i - 30), i + 50).replace(/\s+/g, ' '));
  }
  return {
    title: document.title,
    mathjaxLoaded: !!(window.MathJax && MathJax.startup),
    mathElements: mathEls.length,
    mjxContainers: document.querySelectorAll('mjx-container').length,
    mathErrors: Array.from(document.querySelectorAll('mjx-merror'))
                     .map(e => (e.getAttribute('data-mjx-error') || e.textContent).slice(0, 120))
                     .concat(['Math input error', 'Math Processing Error']
                             .filter(w => document.body.innerText.includes(w))),
    unrendered: unrendered,
    rawTex: rawTex,
    images: imgs.map(img => ({src: img.getAttribute('src'), ok: img.complete && img.naturalWidth > 0,
                              w: img.naturalWidth})),
    height: Math.ceil(Math.max(document.documentElement.scrollHeight, document.body.scrollHeight)),
  };
})()
"""


def _page_problems(rel: str, probe: dict, events: list[dict], server_host: str) -> list[str]:
    problems = []
    if probe["mathElements"] and not probe["mathjaxLoaded"]:
        problems.append(f"{rel}: {probe['mathElements']} math elements but MathJax did not load")
    for tex in probe["unrendered"]:
        problems.append(f"{rel}: math not rendered by MathJax: {tex!r}")
    for err in probe["mathErrors"]:
        problems.append(f"{rel}: MathJax error: {err}")
    for tex in probe["rawTex"]:
        problems.append(f"{rel}: raw TeX left in the page text: {tex!r}")
    for img in probe["images"]:
        if not img["ok"]:
            problems.append(f"{rel}: image did not load: {img['src']}")
    for ev in events:
        method, params = ev["method"], ev.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
            problems.append(f"{rel}: console.{params['type']}: {args[:300]}")
        elif method == "Runtime.exceptionThrown":
            d = params.get("exceptionDetails", {})
            desc = d.get("exception", {}).get("description") or d.get("text", "")
            problems.append(f"{rel}: uncaught exception: {desc[:300]}")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            e = params["entry"]
            problems.append(
                f"{rel}: console error ({e.get('source')}): {e.get('text', '')[:300]} {e.get('url', '')}"
            )
        elif method == "Network.requestWillBeSent":
            url = params.get("request", {}).get("url", "")
            if (
                url.startswith(("http:", "https:", "ws:", "wss:"))
                and not url.split("/")[2] == server_host
            ):
                problems.append(f"{rel}: request leaves the site: {url}")
        elif method == "Network.loadingFailed" and not params.get("canceled"):
            problems.append(f"{rel}: a resource failed to load: {params.get('errorText')}")
        elif method == "Network.responseReceived":
            resp = params.get("response", {})
            if resp.get("status", 200) >= 400 and not resp.get("url", "").endswith("/favicon.ico"):
                problems.append(f"{rel}: HTTP {resp['status']} for {resp.get('url')}")
    return problems


def browser_check(
    html_dir: str | os.PathLike,
    screenshot_dir: str | os.PathLike | None = None,
    pages: list[str] | None = None,
    log=print,
) -> list[str]:
    """Open every page of `html_dir` in headless Chromium; return the problems found.

    `pages`: paths relative to `html_dir` (default: every .html file except the redirecting
    index.html, genindex.html and search.html of each edition, which hold no content of their
    own).
    """
    root = Path(html_dir).resolve()
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a folder: build the site first")
    if pages is None:
        skip = {"genindex.html", "search.html", "index.html"}
        pages = [
            p.relative_to(root).as_posix()
            for p in sorted(root.rglob("*.html"))
            if p.name not in skip  # in every edition: zh/index.html redirects too
            and "_static" not in p.parts
            and "_sources" not in p.parts
            and "mathjax" not in p.parts
        ]
    shots = Path(screenshot_dir) if screenshot_dir else None
    if shots:
        shots.mkdir(parents=True, exist_ok=True)

    handler = functools.partial(_QuietHandler, directory=str(root))
    server = _Server(("127.0.0.1", 0), handler)
    host = f"127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()

    profile = tempfile.mkdtemp(prefix="bertcourse-chromium-")
    proc = subprocess.Popen(
        [find_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group, so we end exactly what we started
    )
    problems: list[str] = []
    devtools = None
    try:
        port_file = Path(profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            if proc.poll() is not None:
                raise RuntimeError(f"chromium exited with code {proc.returncode} at start-up")
            if time.monotonic() > deadline:
                raise TimeoutError("chromium did not open its DevTools port within 30 s")
            time.sleep(0.05)
        port = port_file.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            targets = [t for t in json.load(r) if t.get("type") == "page"]
        devtools = _DevTools(targets[0]["webSocketDebuggerUrl"])
        for domain in ("Page", "Runtime", "Log", "Network"):
            devtools.send(f"{domain}.enable")
        devtools.send(
            "Emulation.setDeviceMetricsOverride",
            width=1280,
            height=900,
            deviceScaleFactor=1,
            mobile=False,
        )
        for rel in pages:
            t0 = time.monotonic()
            devtools.events.clear()
            devtools.send("Page.navigate", url=f"http://{host}/{rel}")
            devtools.wait_event("Page.loadEventFired")
            probe = devtools.evaluate(_PAGE_PROBE)
            time.sleep(0.2)  # late console messages (e.g. a font that failed) arrive now
            devtools.send("Runtime.evaluate", expression="1")  # drains pending events
            page_problems = _page_problems(rel, probe, devtools.events, host)
            problems += page_problems
            if shots:
                # a window as tall as the page, so the shot shows the layout a reader sees
                height = min(max(int(probe["height"]), 900), MAX_SCREENSHOT_HEIGHT)
                devtools.send(
                    "Emulation.setDeviceMetricsOverride",
                    width=1280,
                    height=height,
                    deviceScaleFactor=1,
                    mobile=False,
                )
                time.sleep(0.3)
                shot = devtools.send("Page.captureScreenshot", format="png")
                devtools.send(
                    "Emulation.setDeviceMetricsOverride",
                    width=1280,
                    height=900,
                    deviceScaleFactor=1,
                    mobile=False,
                )
                name = rel.replace("/", "__").removesuffix(".html") + ".png"
                (shots / name).write_bytes(base64.b64decode(shot["data"]))
            log(
                f"  {rel}: {probe['mjxContainers']} formulas, {len(probe['images'])} images, "
                f"{len(page_problems)} problems ({time.monotonic() - t0:.1f} s)"
            )
    finally:
        if devtools is not None:
            devtools.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        server.shutdown()
        server.server_close()
        shutil.rmtree(profile, ignore_errors=True)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html_dir", nargs="?", default="_build/html")
    parser.add_argument("--screenshots", default=None, help="folder for one PNG per page")
    parser.add_argument(
        "--no-browser", action="store_true", help="only the static checks (no Chromium needed)"
    )
    args = parser.parse_args(argv)
    problems = find_external_assets(args.html_dir)
    print(f"== external assets: {len(problems)} problems")
    errors = find_error_outputs(args.html_dir)
    print(f"== error outputs shown in pages: {len(errors)}")
    problems += errors
    if not args.no_browser:
        print(f"== headless Chromium over {args.html_dir}")
        problems += browser_check(args.html_dir, args.screenshots)
    for p in problems:
        print("PROBLEM", p)
    print("== site check:", "FAILED" if problems else "passed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
