"""The device's work: kernels by category (``kernels``), copies (``memcpy``), memory (``memory``), GEMMs in plain fp32
(``precision``) and CUDA/HIP graph replays (``graphs``)."""
