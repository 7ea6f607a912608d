#!/usr/bin/python3
"""Make a model with one operator Kiln does not compile, in the middle of a real network.

Usage: /usr/bin/python3 make_partial_model.py MODELS_DIR OUT.pt

Loads MODELS_DIR/resnet18.pt (the exported sample: calibrated weights), inserts a grid_sample (a
mild affine warp; aten::grid_sampler is not supported by Kiln) between layer2 and layer3, traces
it and saves it with the sample's kiln.json, for kiln_torch_optimize to measure a partitioned run.
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision


class WithGridSample(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net
        theta = torch.tensor([[[0.95, 0.05, 0.0], [-0.05, 0.95, 0.02]]])
        self.register_buffer("grid", F.affine_grid(theta, [1, 128, 28, 28], align_corners=False))

    def forward(self, x):
        n = self.net
        x = n.layer2(n.layer1(n.maxpool(n.relu(n.bn1(n.conv1(x))))))
        x = F.grid_sample(x, self.grid, align_corners=False)
        x = n.layer4(n.layer3(x))
        return n.fc(torch.flatten(n.avgpool(x), 1))


def main(argv):
    if len(argv) != 3:
        raise SystemExit(__doc__)
    extra = {"kiln.json": ""}
    sample = torch.jit.load(os.path.join(argv[1], "resnet18.pt"), _extra_files=extra).eval()
    net = torchvision.models.resnet18()
    net.load_state_dict(dict(sample.state_dict()))
    model = WithGridSample(net.eval()).eval()
    with torch.no_grad():
        traced = torch.jit.trace(model, torch.randn(1, 3, 224, 224))
    torch.jit.save(traced, argv[2], _extra_files=extra)
    print(f"wrote {argv[2]}")


if __name__ == "__main__":
    main(sys.argv)
