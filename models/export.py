#!/usr/bin/python3
# models/export.py: exports the model zoo from PyTorch with random weights (no downloads) to ONNX,
# with a reference input per model. Run with Debian's /usr/bin/python3 (torch 1.13, torchvision).
# Usage: /usr/bin/python3 models/export.py [--large] [--extended] [NAME ...]
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
    """A YOLOv8-style detector at toy width (w = 1; the extended zoo's yolo_sppf has w = 4): backbone, SPPF, a
    top-down neck with upsampling and concat, and a detection head on two scales giving (batch, anchors,
    4 box + classes) with sigmoid scores."""

    def __init__(self, nc=8, w=1):
        super().__init__()
        self.stem = nn.Sequential(ConvBnSiLU(3, 16 * w, 3, 2), ConvBnSiLU(16 * w, 32 * w, 3, 2), C2f(32 * w, 1))
        self.down = nn.Sequential(ConvBnSiLU(32 * w, 64 * w, 3, 2), C2f(64 * w, 1))
        self.sppf_in, self.sppf_out = ConvBnSiLU(64 * w, 32 * w, 1), ConvBnSiLU(128 * w, 64 * w, 1)
        self.pool = nn.MaxPool2d(5, 1, 2)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.neck = C2f(96 * w, 1)
        self.nc = nc
        self.heads = nn.ModuleList(nn.Sequential(ConvBnSiLU(c * w, 32 * w), nn.Conv2d(32 * w, 4 + nc, 1))
                                   for c in (96, 64))

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


class TextDet(nn.Module):
    """A DBNet-style text detector: ResNet-18 features, an FPN (lateral 1x1s, nearest upsampling, 3x3
    smoothing, the four maps brought to stride 4 and concatenated) and the probability head that ends in
    two ConvTranspose with kernel = stride = 2."""

    def __init__(self):
        super().__init__()
        import torchvision
        r = torchvision.models.resnet18(weights=None)
        self.stem = nn.Sequential(r.conv1, r.bn1, r.relu, r.maxpool)
        self.layers = nn.ModuleList([r.layer1, r.layer2, r.layer3, r.layer4])
        self.lat = nn.ModuleList(nn.Conv2d(c, 64, 1, bias=False) for c in (64, 128, 256, 512))
        self.smooth = nn.ModuleList(nn.Conv2d(64, 16, 3, 1, 1, bias=False) for _ in range(4))
        self.head = nn.Sequential(nn.Conv2d(64, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.ConvTranspose2d(16, 16, 2, 2), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.ConvTranspose2d(16, 1, 2, 2), nn.Sigmoid())

    def forward(self, x):
        x = self.stem(x)
        feats = []
        for layer in self.layers:
            x = layer(x)
            feats.append(x)
        lat = [conv(f) for conv, f in zip(self.lat, feats)]
        for i in (2, 1, 0):
            lat[i] = lat[i] + nn.functional.interpolate(lat[i + 1], scale_factor=2, mode="nearest")
        maps = [conv(p) for conv, p in zip(self.smooth, lat)]
        maps = [m if i == 0 else nn.functional.interpolate(m, scale_factor=2 ** i, mode="nearest")
                for i, m in enumerate(maps)]
        return self.head(torch.cat(maps, 1))


class AudioFrontEnd(nn.Module):
    """A spectrogram as a conv (1 -> 80 filters of 512 taps, stride 160), its log power, and Whisper's conv
    stem (80 -> 384, k3, GELU; 384 -> 384, k3 stride 2, GELU) over 10 s of 16 kHz audio."""

    def __init__(self):
        super().__init__()
        self.spec = nn.Conv1d(1, 80, 512, 160, 256, bias=False)
        self.c1 = nn.Conv1d(80, 384, 3, 1, 1)
        self.c2 = nn.Conv1d(384, 384, 3, 2, 1)

    def forward(self, x):
        s = torch.log(self.spec(x) ** 2 + 1e-6)
        return nn.functional.gelu(self.c2(nn.functional.gelu(self.c1(s))))


class Wav2VecFeatures(nn.Module):
    """wav2vec 2.0's feature encoder: seven Conv1d of 512 channels (kernels 10, 3, 3, 3, 3, 2, 2; strides 5, 2,
    2, 2, 2, 2, 2), group norm after the first, GELU after each, over 1 s of 16 kHz audio."""

    def __init__(self):
        super().__init__()
        ks, ss = (10, 3, 3, 3, 3, 2, 2), (5, 2, 2, 2, 2, 2, 2)
        self.convs = nn.ModuleList(nn.Conv1d(1 if i == 0 else 512, 512, k, s, bias=False)
                                   for i, (k, s) in enumerate(zip(ks, ss)))
        self.norm = nn.GroupNorm(512, 512)
        nn.init.uniform_(self.norm.weight, 0.5, 1.5)
        nn.init.uniform_(self.norm.bias, -0.2, 0.2)

    def forward(self, x):
        for i, conv in enumerate(self.convs):
            x = conv(x)
            x = nn.functional.gelu(self.norm(x) if i == 0 else x)
        return x


class GPT2Small(nn.Module):
    """GPT-2 at half depth: token and position embeddings, 6 pre-norm blocks of 768 (12 heads, causal), the final
    norm and the 50257-token head tied to the embedding, over 64 tokens."""

    def __init__(self, vocab=50257, d=768, heads=12, layers=6, seq=64):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq, d)
        nn.init.normal_(self.wte.weight, std=0.02)
        nn.init.normal_(self.wpe.weight, std=0.01)
        self.blocks = nn.Sequential(*(GPTBlock(d, heads, seq) for _ in range(layers)))
        self.ln = nn.LayerNorm(d)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        return self.ln(self.blocks(x)) @ self.wte.weight.t()


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


# name: (constructor, input maker, tier): "" the committed zoo (models/NAME), "large" (models/large/NAME, --large),
# "extended" (models/extended/NAME, --extended: the families issue 25 names beyond the classic set)
MODELS = {
    "mlp": (MLP, lambda: torch.randn(4, 64), ""),
    "resnet_tiny": (lambda: randomize_bn(ResNetTiny()), lambda: torch.randn(1, 3, 64, 64), ""),
    "encoder_tiny": (lambda: Encoder(1000, 64, 4, 2, 256, 32), lambda: torch.randint(0, 1000, (1, 32)), ""),
    "gpt_block_tiny": (lambda: GPTBlock(64, 4, 32), lambda: torch.randn(1, 32, 64), ""),
    "lstm": (LSTMModel, lambda: torch.randn(12, 2, 16), ""),
    "yolo_tiny": (lambda: randomize_bn(YoloTiny()), lambda: torch.randn(1, 3, 64, 64), ""),
    "resnet18": (lambda: torchvision_model("resnet18"), lambda: torch.randn(1, 3, 224, 224), "large"),
    "resnet50": (lambda: torchvision_model("resnet50"), lambda: torch.randn(1, 3, 224, 224), "large"),
    "mobilenet_v2": (lambda: torchvision_model("mobilenet_v2"), lambda: torch.randn(1, 3, 224, 224), "large"),
    "efficientnet_b0": (lambda: torchvision_model("efficientnet_b0"), lambda: torch.randn(1, 3, 224, 224), "large"),
    "vit_tiny": (vit_tiny, lambda: torch.randn(1, 3, 224, 224), "large"),
    "bert_base": (lambda: Encoder(30522, 768, 12, 12, 3072, 128), lambda: torch.randint(0, 30522, (1, 128)), "large"),
    "gpt2_block": (lambda: GPTBlock(768, 12, 128), lambda: torch.randn(1, 128, 768), "large"),
    "squeezenet1_1": (lambda: torchvision_model("squeezenet1_1"), lambda: torch.randn(1, 3, 224, 224), "extended"),
    "densenet121": (lambda: torchvision_model("densenet121"), lambda: torch.randn(1, 3, 224, 224), "extended"),
    "mnasnet1_0": (lambda: torchvision_model("mnasnet1_0"), lambda: torch.randn(1, 3, 224, 224), "extended"),
    "shufflenet_v2": (lambda: torchvision_model("shufflenet_v2_x1_0"), lambda: torch.randn(1, 3, 224, 224), "extended"),
    "regnet_y_400mf": (lambda: torchvision_model("regnet_y_400mf"), lambda: torch.randn(1, 3, 224, 224), "extended"),
    "textdet": (lambda: randomize_bn(TextDet()), lambda: torch.randn(1, 3, 320, 448), "extended"),
    "yolo_sppf": (lambda: randomize_bn(YoloTiny(80, 4)), lambda: torch.randn(1, 3, 320, 320), "extended"),
    "audio_frontend": (AudioFrontEnd, lambda: torch.randn(1, 1, 160000), "extended"),
    "wav2vec_features": (Wav2VecFeatures, lambda: torch.randn(1, 1, 16000), "extended"),
    "gpt2_small": (GPT2Small, lambda: torch.randint(0, 50257, (1, 64)), "extended"),
}


def export(name, outdir, batch=1):
    """batch > 1: that many of the input maker's samples along dim 0 (bench/gpu.py --batch)"""
    ctor, make_input, _ = MODELS[name]
    torch.manual_seed(0)
    model = ctor().eval()
    x = make_input() if batch == 1 else torch.cat([make_input() for _ in range(batch)])
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
    ap.add_argument("--extended", action="store_true", help="also export the extended zoo (into models/extended/)")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    tiers = {"", *(["large"] if args.large else []), *(["extended"] if args.extended else [])}
    names = args.names or [n for n, (_, _, tier) in MODELS.items() if tier in tiers]
    for n in names:
        if n not in MODELS:
            sys.exit(f"unknown model {n}; known: {' '.join(MODELS)}")
        try:
            export(n, os.path.join(HERE, MODELS[n][2], n))
        except ImportError as e:  # torchvision, where this Python lacks it
            if args.names:
                raise
            print(f"skipped {n}: {e}")


if __name__ == "__main__":
    main()
