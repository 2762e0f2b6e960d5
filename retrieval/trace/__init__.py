"""The trace model (stages, runs, the tracer that records them) and what is read off it: gold
analysis, the hop map, and renderings as HTML and as text. Every method writes it; the UI and
traces/ read it."""
from .html import column_html, grid_html
from .model import RunResult


def _notebook_html(run: RunResult) -> str:
    """Jupyter shows a run as the app does: its hop map (vis-network inlined, nothing fetched),
    then its column (html.py: HTML only, below the UI)."""
    from . import hopmap_view

    hop_map = hopmap_view.iframe([hopmap_view.ViewerRun(run.method, run, tuple(run.gold))]) if run.stages else ""
    return hop_map + grid_html([column_html(run.method, run.stages, run, set(run.gold), running=False)])


# Installed here, not in model.py: the renderer reads the model, so the model cannot import it.
# Importing model.py always runs this package's __init__ first, so every RunResult has the hook.
RunResult._repr_html_ = _notebook_html
