"""Hugging Face Spaces entry point: `python app.py` starts the HopTrace web app."""
from ui.app import main

if __name__ == "__main__":
    main()
