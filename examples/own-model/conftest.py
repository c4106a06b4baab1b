"""A model that timm cannot create, registered for pytest-vitperf: put this in your conftest.py, then run
`pytest --gpu-bench suites/test_vit_latency.py --vitperf-models patchify_s8`. Its engines, exports, baselines and
verdicts are keyed by the name. Replace the module with yours: the factory returns it (FP32; load your weights
there) and the (channels, height, width) of one input."""

import torch


class Patchify(torch.nn.Module):
    """A patch embedding, one transformer encoder layer and a classification head."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Conv2d(3, 32, kernel_size=8, stride=8)
        self.layer = torch.nn.TransformerEncoderLayer(32, nhead=2, dim_feedforward=64, batch_first=True)
        self.head = torch.nn.Linear(32, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.embed(x).flatten(2).transpose(1, 2)
        return self.head(self.layer(tokens).mean(1))


def pytest_vitperf_models(config):
    return {"patchify_s8": lambda: (Patchify(), (3, 40, 40))}
