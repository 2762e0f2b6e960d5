"""The first view's hop map, started with the page instead of after Gradio.

Gradio shows its components 1.5-2 s after the page is asked for (it processes its whole config in
the browser; measured on 2 cores), and a map in a `gr.HTML` frame only then begins: its document,
vis-network fetched and compiled, the draw, another 0.4-0.5 s. So the page's HTML carries a
script (`HEAD`, put there by `HeadMiddleware`: Gradio adds `launch(head=)` from its own script,
about 0.7 s later) that starts the first view's frame at once, hidden, from `ROUTE`. The first
view's `#graph` holds a slot (`slot`), and the frame is moved into it the moment Gradio mounts it:
`Element.moveBefore` keeps the frame's document, so the map is already drawn there; a browser
without it reloads the frame (`appendChild`), which is what a frame in the config would cost.
Chromium runs a sandboxed frame in a process of its own, so the map's work overlaps Gradio's.

The same script holds the promise the page's load events wait on (`render.FIRST_VIEW_GATE`): it
opens when the map's frame has posted that it drew and the frame is in its place; the frame may
draw long before Gradio has made the page, and the events' answers would slow that down.
"""
from __future__ import annotations

import html
import json
import re

from retrieval.trace import hopmap_view

from .static_cache import app_path

ROUTE = "hoptrace-first-map"
# The frame's own policy: opened outside the page, the document is sandboxed all the same.
FRAME_HEADERS = {"Content-Security-Policy": "sandbox allow-scripts allow-downloads",
                 "Cache-Control": "no-cache"}

# A link that opens something else (?session=, ?experiment=) needs neither the early frame nor the
# wait; its Ask tab still shows the first view until the link's run replaces it.
# The holder is in the viewport but transparent: Chromium does not draw frames scrolled out of view.
HEAD = """<script>(() => {
  const other = /[?&](session|experiment)=/.test(location.search);
  // Open once the map is drawn and, when this page started its frame, in its place: the frame may
  // draw before Gradio has made the page, and an event answered then would slow that down.
  let drawn = false, placed = !%(early)s, open = () => {};
  window.hoptraceFirstView = new Promise((done) => {
    if (other) return done();
    open = () => { if (drawn && placed) done(); };
    addEventListener('message', (e) => { if (e.data && e.data.hopmapDrawn) { drawn = true; open(); } });
    setTimeout(done, 4000);
  });
  if (!%(early)s) return;
  const frame = document.createElement('iframe');
  frame.className = 'ht-hopmap'; frame.title = 'hop map';
  frame.setAttribute('sandbox', 'allow-scripts allow-downloads');
  frame.style.cssText = 'width:100%%;height:%(height)dpx;border:1px solid #d4d4d8;border-radius:8px';
  frame.src = '%(route)s';
  const hold = document.createElement('div');
  hold.setAttribute('aria-hidden', 'true');
  hold.style.cssText = 'position:fixed;left:0;top:0;width:calc(100vw - 34px);height:%(height)dpx;opacity:0;' +
                       'pointer-events:none;z-index:-1';
  if (!other) { hold.appendChild(frame); document.documentElement.appendChild(hold); }
  // Every slot Gradio makes gets a frame: the first the one started here (on a link, none was:
  // it loads now), a slot made again (the Ask tab left and come back to) a new one of the same
  // document, as a frame in the config would be made again.
  const place = () => {
    const slot = document.querySelector('#graph .ht-hopmap-slot');
    if (!slot || slot.querySelector('iframe')) return;
    const first = !window.hoptraceMapPlacedAt, f = first ? frame : frame.cloneNode();
    f.dataset.methods = slot.dataset.methods || '[]';
    if (f.isConnected && slot.moveBefore) slot.moveBefore(f, null); else slot.appendChild(f);
    hold.remove();
    if (first) { window.hoptraceMapPlacedAt = performance.now(); placed = true; open(); }
  };
  new MutationObserver(place).observe(document, {subtree: true, childList: true});
  setTimeout(() => { if (!window.hoptraceMapPlacedAt) hold.remove(); }, 30000);
})();</script>"""


def head(early: bool) -> str:
    """The script for the page's HTML; `early`: whether a first view's map is served at ROUTE."""
    return HEAD % {"early": "true" if early else "false", "height": hopmap_view.HEIGHT, "route": ROUTE}


def slot(runs: list[hopmap_view.ViewerRun]) -> str:
    """Where the first view's map goes: the frame the page started is moved in (`HEAD`)."""
    methods = html.escape(json.dumps([vr.method for vr in runs if vr.run.stages]), quote=True)
    return (f"<div class='ht-hopmap-slot' data-methods=\"{methods}\" "
            f"style='height:{hopmap_view.HEIGHT + 2}px'></div>")


_BASE = re.compile(rb"<base\b[^>]*>", re.I)


class HeadMiddleware:
    """Puts each page's scripts (`scripts`: route → HTML) into that route's HTML, after its <base>:
    relative URLs then resolve as Gradio's do, and no stylesheet is ahead of them (a script waits
    for those). One pass per page, whatever it gets. Any other response, or one that is compressed
    or not HTML, goes through untouched."""

    def __init__(self, app, scripts: dict[str, str]):
        self.app = app
        self.scripts = {path: script.encode() for path, script in scripts.items() if script}

    async def __call__(self, scope, receive, send):
        script = (self.scripts.get(app_path(scope), b"")
                  if scope["type"] == "http" and scope.get("method") == "GET" else b"")
        if not script:
            return await self.app(scope, receive, send)
        start: dict = {}
        body = bytearray()

        async def hold(message):
            if message["type"] == "http.response.start":
                start.update(message)
                return
            if message["type"] != "http.response.body":
                return await send(message)
            body.extend(message.get("body", b""))
            if message.get("more_body"):
                return
            out = self._inserted(start, body, script)
            size = str(len(out)).encode()
            headers = [(k, size if k.lower() == b"content-length" else v) for k, v in start.get("headers", [])]
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": out})

        await self.app(scope, receive, hold)

    def _wanted(self, start: dict) -> bool:
        headers = {k.lower(): v for k, v in start.get("headers", [])}
        return (start.get("status") == 200 and b"text/html" in headers.get(b"content-type", b"")
                and b"content-encoding" not in headers)

    def _inserted(self, start: dict, body: bytearray, script: bytes) -> bytes:
        if not self._wanted(start):
            return bytes(body)
        found = _BASE.search(body)
        if found is None:
            return bytes(body)
        return bytes(body[:found.end()]) + script + bytes(body[found.end():])
