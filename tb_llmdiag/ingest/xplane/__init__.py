"""XSpace protobuf (``.xplane.pb``: torch_xla, JAX, TensorFlow profilers): ``reader.read_xplane`` is the reader."""
