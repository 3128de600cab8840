"""python/tests/test_torch.py: primc as a torch.compile backend and primc.torch.compile, against PyTorch eager on
torchvision's ResNet-18 and a Hugging Face BERT built from a config (1e-4 relative), the entry point that makes
backend="primc" work without an import, and the graphs it leaves to eager with a reason. Skipped as a whole where
PyPI's torch (2.x, with Dynamo) is absent; the BERT test also needs transformers."""
import os
import subprocess
import sys
import warnings

import pytest

torch = pytest.importorskip("torch")
if not hasattr(torch, "compile"):
    pytest.skip("torch %s has no torch.compile (PyPI torch 2.x: tools/setup.sh bench)" % torch.__version__,
                allow_module_level=True)

import primc.torch  # noqa: E402


def rel_err(got, want):
    return float((got - want).abs().max() / want.abs().max())


def compile_counting(model, **kw):
    """torch.compile through the primc backend, counting the graphs primc compiled and the eager fallbacks"""
    seen = {"primc": 0, "eager": 0}

    def counting(gm, example_inputs):
        fn = primc.torch.backend(gm, example_inputs)
        seen["primc" if hasattr(fn, "primc_module") else "eager"] += 1
        return fn

    torch._dynamo.reset()
    return torch.compile(model, backend=counting, **kw), seen


def test_resnet18_matches_eager():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    m = torchvision.models.resnet18().eval()
    x = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        want = m(x)
        fast, seen = compile_counting(m)
        got = fast(x)
        got2 = fast(x * 0.5)  # the same graph again, new data
    assert seen == {"primc": 1, "eager": 0}
    assert rel_err(got, want) < 1e-4
    assert rel_err(got2, m(x * 0.5)) < 1e-4


def test_hf_bert_matches_eager():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.BertConfig(hidden_size=256, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512,
                                  vocab_size=1000, max_position_embeddings=128)
    m = transformers.BertModel(cfg).eval()
    ids = torch.randint(0, 1000, (2, 48))
    mask = torch.ones(2, 48, dtype=torch.long)
    mask[1, 30:] = 0  # a padded sequence: the mask reaches the attention
    with torch.no_grad():
        want = m(input_ids=ids, attention_mask=mask)
        fast, seen = compile_counting(m)
        got = fast(input_ids=ids, attention_mask=mask)
    assert seen["primc"] >= 1 and seen["eager"] == 0, seen
    assert rel_err(got.last_hidden_state, want.last_hidden_state) < 1e-4
    assert rel_err(got.pooler_output, want.pooler_output) < 1e-4


def test_entry_point_needs_no_import():
    """backend="primc" resolves through the torch_dynamo_backends entry point of the installed package"""
    code = ("import sys, torch\n"
            "m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).eval()\n"
            "x = torch.randn(3, 8)\n"
            "with torch.no_grad():\n"
            "    got, want = torch.compile(m, backend='primc')(x), m(x)\n"
            "print('primc.torch' in sys.modules, float((got - want).abs().max()))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded, err = out.stdout.split()
    assert loaded == "True" and float(err) < 1e-5


def test_direct_compile_takes_tensors():
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                            torch.nn.Flatten(), torch.nn.Linear(8, 5))
    x = torch.randn(4, 3, 16, 16)
    c = primc.torch.compile(m, x)
    with torch.no_grad():
        want = m(x)
    got = c(x)
    assert isinstance(got, torch.Tensor) and got.shape == want.shape and rel_err(got, want) < 1e-5


def fallback_warnings(fn, *args):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        torch._dynamo.reset()
        got = torch.compile(fn, backend="primc")(*args)
    return got, [str(x.message) for x in w if "primc:" in str(x.message)]


def test_unexportable_op_runs_eagerly_with_its_name():
    x = torch.randn(64)
    got, why = fallback_warnings(lambda t: torch.histc(t, bins=4) + 1, x)
    assert torch.equal(got, torch.histc(x, bins=4) + 1)
    assert why and "aten::histc" in why[0], why


def test_autograd_graph_runs_eagerly():
    m = torch.nn.Linear(4, 2)
    x = torch.randn(3, 4)
    got, why = fallback_warnings(m, x)  # grad enabled, parameters require grad
    got.sum().backward()
    assert m.weight.grad is not None and why and "autograd" in why[0], why
