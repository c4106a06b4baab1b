"""How a precision is made: Model Optimizer's recipes and ONNX exports (recipes.py), the real-quant Linears that run
INT8 and FP8 GEMMs in torch (realquant.py, linears.py), the fused FP8 attention and MLP (fp8_attention.py,
fp8_mlp.py), and the block formats' CPU kernels (cpu.py)."""
