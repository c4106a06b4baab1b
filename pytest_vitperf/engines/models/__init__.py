"""What is measured: the model zoo (zoo.py), the trained digits ViT and its data (digits.py, data/), a folder of the
user's images (folder.py) and the FP32 outputs engines are checked against (reference.py)."""
