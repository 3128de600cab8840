#!/usr/bin/python3
# models/export.py: exports the model zoo from PyTorch with random weights (no downloads) to ONNX,
# with a reference input per model. Run with Debian's /usr/bin/python3 (torch 1.13, torchvision).
# Usage: /usr/bin/python3 models/export.py [--large] [NAME ...]
import argparse
import inspect
import os
import sys

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.GELU(), nn.Linear(128, 10))

    def forward(self, x):
        return self.net(x)


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return torch.relu(y + (self.down(x) if self.down is not None else x))


class ResNetTiny(nn.Module):
    """ResNet-18's structure at a tenth of the width and two stages: conv-bn-relu-maxpool, basic blocks, pool, fc."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 7, 2, 3, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        self.layers = nn.Sequential(Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2))
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class BertLayer(nn.Module):
    """A BERT post-norm layer: self-attention, add & norm, GELU FFN, add & norm (attention written out)."""

    def __init__(self, d, heads, ffn):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, ffn), nn.Linear(ffn, d)
        self.heads = heads

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads

        def split(y):
            return y.view(b, t, h, d // h).transpose(1, 2)

        att = torch.softmax(split(self.q(x)) @ split(self.k(x)).transpose(-2, -1) / (d // h) ** 0.5, dim=-1)
        x = self.ln1(x + self.o((att @ split(self.v(x))).transpose(1, 2).reshape(b, t, d)))
        return self.ln2(x + self.fc2(nn.functional.gelu(self.fc1(x))))


class Encoder(nn.Module):
    """A BERT-style encoder: token + position embeddings, LayerNorm, N post-norm layers."""

    def __init__(self, vocab, d, heads, layers, ffn, seq):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(1, seq, d) * 0.02)
        self.norm = nn.LayerNorm(d)
        self.layers = nn.Sequential(*(BertLayer(d, heads, ffn) for _ in range(layers)))

    def forward(self, ids):
        return self.layers(self.norm(self.tok(ids) + self.pos))


class GPTBlock(nn.Module):
    """A GPT-2 style pre-norm decoder block with a causal mask."""

    def __init__(self, d, heads, seq):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.ln2 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)
        self.heads = heads
        self.register_buffer("mask", torch.triu(torch.full((seq, seq), float("-inf")), 1))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q = q.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5 + self.mask[:t, :t], dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.out(nn.functional.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class LSTMModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(16, 32, num_layers=1, batch_first=False)
        self.fc = nn.Linear(32, 4)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.fc(y[-1])


class ConvBnSiLU(nn.Sequential):
    def __init__(self, cin, cout, k=3, s=1):
        super().__init__(nn.Conv2d(cin, cout, k, s, k // 2, bias=False), nn.BatchNorm2d(cout), nn.SiLU())


class C2f(nn.Module):
    """YOLOv8's split-and-concat bottleneck stage."""

    def __init__(self, c, n):
        super().__init__()
        self.cv1 = ConvBnSiLU(c, c, 1)
        self.blocks = nn.ModuleList(nn.Sequential(ConvBnSiLU(c // 2, c // 2), ConvBnSiLU(c // 2, c // 2))
                                    for _ in range(n))
        self.cv2 = ConvBnSiLU(c // 2 * (n + 2), c, 1)

    def forward(self, x):
        ys = list(self.cv1(x).chunk(2, 1))
        for b in self.blocks:
            ys.append(ys[-1] + b(ys[-1]))
        return self.cv2(torch.cat(ys, 1))


class YoloTiny(nn.Module):
    """A YOLOv8-style detector at toy width: backbone, SPPF, a top-down neck with upsampling and concat,
    and a detection head on two scales giving (batch, anchors, 4 box + classes) with sigmoid scores."""

    def __init__(self, nc=8):
        super().__init__()
        self.stem = nn.Sequential(ConvBnSiLU(3, 16, 3, 2), ConvBnSiLU(16, 32, 3, 2), C2f(32, 1))
        self.down = nn.Sequential(ConvBnSiLU(32, 64, 3, 2), C2f(64, 1))
        self.sppf_in, self.sppf_out = ConvBnSiLU(64, 32, 1), ConvBnSiLU(128, 64, 1)
        self.pool = nn.MaxPool2d(5, 1, 2)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.neck = C2f(96, 1)
        self.nc = nc
        self.heads = nn.ModuleList(nn.Sequential(ConvBnSiLU(c, 32), nn.Conv2d(32, 4 + nc, 1)) for c in (96, 64))

    def forward(self, x):
        p3 = self.stem(x)
        y = self.sppf_in(self.down(p3))
        a = self.pool(y)
        b = self.pool(a)
        p4 = self.sppf_out(torch.cat([y, a, b, self.pool(b)], 1))
        n3 = self.neck(torch.cat([self.up(p4), p3], 1))
        outs = [h(f).flatten(2) for h, f in zip(self.heads, (n3, p4))]
        o = torch.cat(outs, 2).transpose(1, 2)
        return torch.cat([o[..., :4], torch.sigmoid(o[..., 4:])], 2)


def randomize_bn(m):
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.2, 0.2)
            mod.running_var.uniform_(0.5, 1.5)
            mod.weight.data.uniform_(0.5, 1.5)
            mod.bias.data.uniform_(-0.2, 0.2)
    return m


def torchvision_model(name):
    import torchvision
    return randomize_bn(getattr(torchvision.models, name)(weights=None))


def vit_tiny():
    import torchvision
    m = torchvision.models.VisionTransformer(224, 16, 12, 3, 192, 768)
    for p in m.heads.parameters():  # torchvision zero-initializes the head: the logits would all be 0
        nn.init.normal_(p, std=0.02)
    return m


# name: (constructor, input maker, large)
MODELS = {
    "mlp": (MLP, lambda: torch.randn(4, 64), False),
    "resnet_tiny": (lambda: randomize_bn(ResNetTiny()), lambda: torch.randn(1, 3, 64, 64), False),
    "encoder_tiny": (lambda: Encoder(1000, 64, 4, 2, 256, 32), lambda: torch.randint(0, 1000, (1, 32)), False),
    "gpt_block_tiny": (lambda: GPTBlock(64, 4, 32), lambda: torch.randn(1, 32, 64), False),
    "lstm": (LSTMModel, lambda: torch.randn(12, 2, 16), False),
    "yolo_tiny": (lambda: randomize_bn(YoloTiny()), lambda: torch.randn(1, 3, 64, 64), False),
    "resnet18": (lambda: torchvision_model("resnet18"), lambda: torch.randn(1, 3, 224, 224), True),
    "resnet50": (lambda: torchvision_model("resnet50"), lambda: torch.randn(1, 3, 224, 224), True),
    "mobilenet_v2": (lambda: torchvision_model("mobilenet_v2"), lambda: torch.randn(1, 3, 224, 224), True),
    "efficientnet_b0": (lambda: torchvision_model("efficientnet_b0"), lambda: torch.randn(1, 3, 224, 224), True),
    "vit_tiny": (vit_tiny, lambda: torch.randn(1, 3, 224, 224), True),
    "bert_base": (lambda: Encoder(30522, 768, 12, 12, 3072, 128), lambda: torch.randint(0, 30522, (1, 128)), True),
    "gpt2_block": (lambda: GPTBlock(768, 12, 128), lambda: torch.randn(1, 128, 768), True),
}


def export(name, outdir):
    ctor, make_input, _ = MODELS[name]
    torch.manual_seed(0)
    model = ctor().eval()
    x = make_input()
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, "model.onnx")
    # torch >= 2.9 defaults to the dynamo exporter; the TorchScript one gives the graphs the zoo was made with,
    # from opset 14 there, where it first exports scaled_dot_product_attention (ViT's attention)
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    with torch.no_grad():
        torch.onnx.export(model, (x,), path, opset_version=14 if legacy else 13, input_names=["input"],
                          output_names=["output"], do_constant_folding=True, **legacy)
    np.save(os.path.join(outdir, "input.npy"), x.numpy())
    print(f"exported {name}: {os.path.getsize(path) / 1e6:.1f} MB")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--large", action="store_true", help="also export the large models (into models/large/)")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    names = args.names or [n for n, (_, _, large) in MODELS.items() if args.large or not large]
    for n in names:
        if n not in MODELS:
            sys.exit(f"unknown model {n}; known: {' '.join(MODELS)}")
        export(n, os.path.join(HERE, "large" if MODELS[n][2] else "", n))


if __name__ == "__main__":
    main()
