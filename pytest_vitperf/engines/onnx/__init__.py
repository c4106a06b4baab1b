"""An ONNX export read as a graph (graph.py) and what it quantizes (coverage.py)."""
