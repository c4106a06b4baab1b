"""TensorRT's engines: plans built from ONNX through the Python API (plan.py, api.py) or trtexec (trtexec.py)."""
