"""python -m primc: `compile` and `inputs` for scripts, through the same libprimc.so as primc.compile.

    python -m primc compile model.onnx -o model.so --emit lib --dim batch=1
    python -m primc inputs model.onnx
Errors print one line naming the model node and exit 1; usage errors exit 2.
"""
import argparse
import sys

from . import Error, compile_file, info, version
from ._capi import EMIT


def _parser():
    p = argparse.ArgumentParser(prog="python -m primc", description="primc through libprimc.so")
    p.add_argument("--version", action="store_true", help="print libprimc's version")
    sub = p.add_subparsers(dest="cmd")
    c = sub.add_parser("compile", help="compile a model ahead of time (as `primc compile`)")
    c.add_argument("model")
    c.add_argument("-o", dest="output", required=True)
    c.add_argument("--emit", choices=list(EMIT), default="exe")
    c.add_argument("-O", dest="opt_level", type=int, choices=range(4), default=3, metavar="0..3")
    c.add_argument("--dim", action="append", default=[], metavar="NAME=N", help="fix a symbolic dim (repeatable)")
    c.add_argument("--const", action="append", default=[], metavar="NAME=VALUE",
                   help="fix an input to a constant (repeatable)")
    c.add_argument("--target", choices=["cpu", "cuda"], default="cpu")
    c.add_argument("--weights", choices=["embedded", "external"], default="embedded")
    c.add_argument("--name", help="C prefix of the entry points")
    c.add_argument("--unfused", action="store_true")
    c.add_argument("--profile", action="store_true")
    c.add_argument("--cpu")
    c.add_argument("--triple")
    c.add_argument("--gpu-arch")
    c.add_argument("--cuda-graphs", action="store_true")
    i = sub.add_parser("inputs", help="list a model's inputs and outputs")
    i.add_argument("model")
    i.add_argument("--dim", action="append", default=[], metavar="NAME=N")
    i.add_argument("--const", action="append", default=[], metavar="NAME=VALUE")
    return p


def main(argv=None):
    p = _parser()
    a = p.parse_args(argv)
    try:
        if a.version:
            print(f"primc {version()}")
            return 0
        if a.cmd == "compile":
            compile_file(a.model, a.output, emit=a.emit, dims=a.dim, opt_level=a.opt_level, target=a.target,
                         name=a.name, weights_external=a.weights == "external", unfused=a.unfused,
                         profile=a.profile, cpu=a.cpu, triple=a.triple, gpu_arch=a.gpu_arch,
                         cuda_graphs=a.cuda_graphs, consts=a.const)
            return 0
        if a.cmd == "inputs":
            ins, outs = info(a.model, dims=a.dim, consts=a.const)
            for what, ts in (("input", ins), ("output", outs)):
                for k, t in enumerate(ts):
                    print(f"{what} {k}: {t.name} {t.dtype_name}[{t._dims_text()}]")
            return 0
    except Error as e:
        print(f"primc: error: {e}", file=sys.stderr)
        return 1
    p.print_help(sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
