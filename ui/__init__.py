"""The Gradio front end: renders stage records; knows nothing about how methods work."""
