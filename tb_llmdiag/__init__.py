"""LLM Diag: diagnose slow LLM fine-tuning steps from profiler traces."""

__version__ = "0.1.0"
