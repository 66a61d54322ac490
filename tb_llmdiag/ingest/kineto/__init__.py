"""Kineto / Chrome trace JSON (PyTorch's profiler, optionally gzipped): ``reader.read_kineto`` is the reader."""
