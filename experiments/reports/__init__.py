"""Renderers of docs/results.md, one module per question; `experiments/report.py` orders them."""
