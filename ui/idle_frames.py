"""A page at rest stays at rest: the script that stops Gradio's loading tracker from redrawing it
sixty times a second.

Gradio 6.31's front end leaves one status tracker's elapsed-time loop running after the page has
loaded (a `requestAnimationFrame` loop in its statustracker module that nothing stops; it runs in
an empty `gr.Blocks()` too). On an idle tab it kept Chromium's renderer and GPU process at ~10 % of
a core (1.0-1.1 CPU s in 10 s, 2-core AMD EPYC, avx2): every visitor's open tab, all day, and every
browser test's page while it waits. Its loop is let run at 10 frames a second: a tracker's timer
shows tenths of a second, so nothing a reader sees changes, and the idle tab fell to 0.4 CPU s in
10 s. Every other caller of `requestAnimationFrame` (Plotly, the page's own) is untouched.
"""
from __future__ import annotations

# Recognised by the module's file name in the caller's stack (Gradio's hashed asset name begins
# with it); a Gradio that stops the leak makes this a 100 ms delay on a loop no one sees.
SCRIPT = """<script>(() => {
  const frame = window.requestAnimationFrame.bind(window);
  window.requestAnimationFrame = (fn) => ((new Error().stack || '').includes('/statustracker-')
    ? setTimeout(() => frame(fn), 100) : frame(fn));
})();</script>"""
