"""A page and a server at rest stay at rest: the script that stops Gradio's loading tracker from
redrawing the page sixty times a second, the style that stills its pulsing borders while a run
streams, and the queue's poll that woke the server a thousand times a second.

Gradio 6.31's front end leaves one status tracker's elapsed-time loop running after the page has
loaded (a `requestAnimationFrame` loop in its statustracker module that nothing stops; it runs in
an empty `gr.Blocks()` too). On an idle tab it kept Chromium's renderer and GPU process at ~10 % of
a core (1.0-1.1 CPU s in 10 s, 2-core AMD EPYC, avx2): every visitor's open tab, all day, and every
browser test's page while it waits. Its loop is let run at 10 frames a second: a tracker's timer
shows tenths of a second, so nothing a reader sees changes, and the idle tab fell to 0.4 CPU s in
10 s. Every other caller of `requestAnimationFrame` (Plotly, the page's own) is untouched.

Its server side polls its own queue: with no event waiting it sleeps 1 ms and looks again, all day
(`Queue.sleep_when_free`, 1 ms except on Windows), and its progress bars' loop every 10 ms. That
kept an app with no visitor at 17-21 % of a core (`hoptrace bench-app`, "idle app"; 2-core AMD
EPYC, avx2), on the two cores the embedded model writes on, whose two threads wait for each other
whenever one is preempted. `calm_queues` makes the poll QUEUE_POLL_S
and the other PROGRESS_POLL_S: an event then starts at most 20 ms later, against the hundreds of
milliseconds its first update takes, and the idle app fell from 1.7-2.1 CPU s in 10 s to 0.16-0.20.
"""
from __future__ import annotations

import functools

# Recognised by the module's file name in the caller's stack (Gradio's hashed asset name begins
# with it); a Gradio that stops the leak makes this a 100 ms delay on a loop no one sees.
SCRIPT = """<script>(() => {
  const frame = window.requestAnimationFrame.bind(window);
  window.requestAnimationFrame = (fn) => ((new Error().stack || '').includes('/statustracker-')
    ? setTimeout(() => frame(fn), 100) : frame(fn));
})();</script>""" + (
    # While an event streams, Gradio pulses the border of each output it updates, forever (an
    # `infinite` opacity animation on `.generating`; 5 of them during a live run). In a GRASP run
    # in headless Chromium, 15-s windows alternated: the browser spent 6.6-7.9 CPU s with the pulse
    # and 1.4-2.6 without, and the model, on the same two cores, 21.0-22.4 against 25.6-27.5 (AMD
    # EPYC, avx2). The border stays, still: it still marks what is being updated.
    "<style>.generating{animation:none!important}</style>")


# An event waits at most this long to start; 20 ms polls 50 times a second instead of 1,000.
QUEUE_POLL_S = 0.02
# A gr.Progress bar (a build, a benchmark) is sent at most this often; its loop polled every 10 ms.
PROGRESS_POLL_S = 0.05


def calm_queues() -> None:
    """Every Gradio queue made in this process from now on polls every QUEUE_POLL_S when it has
    nothing to start. Done when this module is imported: ui/app.py imports it before it makes its
    Blocks, whose queue is made then and again by `serve`. Idempotent."""
    from gradio import queueing

    init = queueing.Queue.__init__
    if getattr(init, "hoptrace_calm", False):
        return

    @functools.wraps(init)
    def calm_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.sleep_when_free = max(getattr(self, "sleep_when_free", 0.0), QUEUE_POLL_S)
        self.progress_update_sleep_when_free = max(getattr(self, "progress_update_sleep_when_free", 0.0),
                                                   PROGRESS_POLL_S)

    calm_init.hoptrace_calm = True
    queueing.Queue.__init__ = calm_init


calm_queues()
