"""primc as a torch.compile backend, and primc.torch.compile(module, example_inputs) without Dynamo.

    import torch, primc.torch
    fast = torch.compile(model, backend="primc")    # also found through the torch_dynamo_backends entry point
    y = fast(x)

Each graph Dynamo captures goes through PyTorch's ONNX exporter (the TorchScript one: it takes an FX graph as it is)
and libprimc.so into a shared library; calls pass CPU tensors to it without copies (numpy views of their memory)
and wrap its outputs the same way. The module's parameters and buffers are compiled in as constants (weights
packed, batch norms folded), as inductor's freezing does: change them after compiling and the compiled graph keeps
the old values. A graph primc cannot take runs eagerly instead, with a warning that gives primc's reason (the
model node and op); so do graphs that need autograd (inputs or parameters requiring grad while grad is enabled),
that take symbolic sizes (dynamic=True) or that hold tensors off the CPU.
"""
import io
import warnings

import numpy as np
import torch

import primc

__all__ = ["backend", "compile", "Compiled"]


def _is_state(t):
    """a parameter or buffer Dynamo lifted into the graph's inputs (inline_inbuilt_nn_modules), not a user input"""
    return isinstance(t, torch.nn.Parameter) or getattr(t, "_dynamo_static_input_type", None) is not None


class _Frozen(torch.nn.Module):
    """fn with the inputs at `state` fixed to their tensors: the exporter records those as constants"""

    def __init__(self, fn, inputs, state):
        super().__init__()
        self.fn, self.n = fn, len(inputs)
        self.fixed = {i: inputs[i].detach() for i in state}
        self.free = [i for i in range(len(inputs)) if i not in self.fixed]

    def forward(self, *args):
        full = [None] * self.n
        for i, a in zip(self.free, args):
            full[i] = a
        for i, t in self.fixed.items():
            full[i] = t
        return self.fn(*full)


def _onnx_bytes(module, args):
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice, tracer warnings
        torch.onnx.export(module, tuple(args), f, dynamo=False, opset_version=17,
                          input_names=["in%d" % i for i in range(len(args))], do_constant_folding=True)
    return f.getvalue()


class Compiled:
    """A primc module called with torch tensors: CPU tensors in (no copy when contiguous), tensors out. Returns
    a tuple of the outputs, or the one output when `single`."""

    def __init__(self, module, single=False, as_list=False):
        self.module, self.single, self.as_list = module, single, as_list

    def __call__(self, *args):
        arrays = [a.detach().contiguous().numpy() if isinstance(a, torch.Tensor) else np.asarray(a) for a in args]
        out = self.module(*arrays)
        outs = out if isinstance(out, tuple) else (out,)
        tensors = [torch.from_numpy(o) for o in outs]
        if self.single:
            return tensors[0]
        return tensors if self.as_list else tuple(tensors)

    def profile(self, reset=False):
        """per-kernel timings of a module compiled with profile=True (primc.Module.profile)"""
        return self.module.profile(reset)


def _primc_module(onnx, threads, **options):
    return primc.compile(onnx, threads=threads if threads is not None else torch.get_num_threads(), **options)


def compile(module, example_inputs, threads=None, **options):
    """module (an nn.Module or function of tensors) exported once with example_inputs and compiled by primc; its
    parameters and buffers become constants. Returns a Compiled callable taking tensors of the same shapes and
    dtypes. options go to primc.compile (opt_level, matmul_precision, autocast, profile, ...)."""
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    if isinstance(module, torch.nn.Module):
        module = module.eval()
    with torch.no_grad():
        ref = module(*example_inputs)
        onnx = _onnx_bytes(module if isinstance(module, torch.nn.Module) else _Frozen(module, example_inputs, ()),
                           example_inputs)
    return Compiled(_primc_module(onnx, threads, **options), single=isinstance(ref, torch.Tensor),
                    as_list=isinstance(ref, list))


def _eager(gm, why):
    warnings.warn("primc: running this graph eagerly: " + why, stacklevel=3)
    return gm.forward


def backend(gm, example_inputs, **options):
    """The torch.compile backend: one FX graph and its example inputs in, a callable out."""
    if any(not isinstance(t, torch.Tensor) for t in example_inputs):
        return _eager(gm, "it takes symbolic sizes (compile with dynamic=False)")
    if any(t.device.type != "cpu" for t in example_inputs):
        return _eager(gm, "its tensors are not on the CPU (primc modules run CPU code)")
    if torch.is_grad_enabled() and any(t.requires_grad for t in example_inputs):
        return _eager(gm, "it needs autograd (run under torch.no_grad() or torch.inference_mode())")
    state = [i for i, t in enumerate(example_inputs) if _is_state(t)]
    frozen = _Frozen(gm, example_inputs, state)
    args = [example_inputs[i] for i in frozen.free]
    try:
        with torch.no_grad():
            ref = gm(*example_inputs)
            onnx = _onnx_bytes(frozen, args)
        mod = _primc_module(onnx, options.pop("threads", None), **options)
    except primc.Error as e:
        return _eager(gm, str(e))
    except Exception as e:  # the exporter's failures name the aten op it could not export
        return _eager(gm, "the ONNX export failed: %s" % str(e).splitlines()[0][:300])
    call = Compiled(mod, single=isinstance(ref, torch.Tensor), as_list=isinstance(ref, list))
    free = frozen.free

    def run(*inputs):
        return call(*[inputs[i] for i in free])

    run.primc_module = mod  # for tests and profiling: the compiled module behind the graph
    return run


def _register():
    """backend="primc" for a package torch finds through the torch_dynamo_backends entry point (installed), or
    once this module is imported (a source tree); registering both ways would be a duplicate name"""
    from importlib.metadata import entry_points

    if any(ep.name == "primc" for ep in entry_points(group="torch_dynamo_backends")):
        return
    from torch._dynamo import register_backend

    register_backend(name="primc")(backend)


try:
    _register()
except Exception:  # noqa: S110 - an older torch without Dynamo: primc.torch.compile still works
    pass
