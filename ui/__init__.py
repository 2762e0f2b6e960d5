"""The Gradio front end: renders stage records; knows nothing about how methods work."""
import os

# Before any module here imports gradio, which reads this once: a public demo must not report its
# visitors' use to a third party, and offline the reporting only adds failing requests.
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
