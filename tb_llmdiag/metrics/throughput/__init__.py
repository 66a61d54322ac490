"""What the work amounts to: recorded shapes, tokens per step and operator FLOPs (``shapes``), TFLOP/s, MFU and
tokens/s (``flops``), and serving throughput (``inference``)."""
