"""Making what is measured: models, precision recipes and their ONNX exports, TensorRT plans, the backends that turn
a model into an engine, GEMM operands, and what an export quantizes (coverage)."""
