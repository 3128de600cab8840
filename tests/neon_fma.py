#!/usr/bin/env python3
"""tests/neon_fma.py OBJ [FUNC] [--min R]: the instruction mix of the NEON GEMM micro-kernel's inner loop, read from
the emitted AArch64 code (aarch64-linux-gnu-objdump -d of OBJ, the cross-built runtime/gemm/neon.o).

The inner loop is the backward branch's body in FUNC (default k_12_full_unit: the full 12 x 8 tile, A packed) that
holds the most fmla instructions. Prints its instructions, fmla, loads and the vector registers it uses, FMAs per
load, and the fmla share; exits 1 when the share is below --min (default 0.75, issue 27's bar). This is arithmetic on
the assembly, not a timing: the README turns it into a GFLOP/s estimate for a Neoverse-V1 core."""
import re
import subprocess
import sys


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    floor = 0.75
    if "--min" in sys.argv:
        floor = float(sys.argv[sys.argv.index("--min") + 1])
        args = [a for a in args if a != sys.argv[sys.argv.index("--min") + 1]]
    if not args:
        sys.exit(__doc__)
    obj, func = args[0], args[1] if len(args) > 1 else "k_12_full_unit"
    objdump = "aarch64-linux-gnu-objdump"
    dis = subprocess.run([objdump, "-d", "--no-show-raw-insn", obj], capture_output=True, text=True, check=True).stdout
    body = re.search(r"^[0-9a-f]+ <%s>:\n(.*?)(?:\n\n|\Z)" % re.escape(func), dis, re.S | re.M)
    if not body:
        sys.exit("no function %s in %s" % (func, obj))
    insns = []
    for line in body.group(1).splitlines():
        m = re.match(r"\s*([0-9a-f]+):\s+(\S+)\s*(.*)", line)
        if m:
            insns.append((int(m.group(1), 16), m.group(2), m.group(3)))
    loops = []
    for i, (addr, op, ops) in enumerate(insns):
        t = re.match(r"([0-9a-f]+) <", ops)
        if (op.startswith("b.") or op in ("b", "cbnz", "cbz", "tbnz", "tbz")) and t and int(t.group(1), 16) < addr:
            start = int(t.group(1), 16)
            loops.append([x for x in insns if start <= x[0] <= addr])
    if not loops:
        sys.exit("no loop in %s" % func)
    loop = max(loops, key=lambda l: sum(op == "fmla" for _, op, _ in l))
    n = len(loop)
    fmla = sum(op == "fmla" for _, op, _ in loop)
    loads = sum(op.startswith("ld") for _, op, _ in loop)
    vregs = sorted({int(r) for _, _, ops in loop for r in re.findall(r"\b[vqsd](\d+)\b", ops)})
    share = fmla / n
    print("%s inner loop: %d instructions, %d fmla (%d flops each: 4 lanes x 2), %d loads, %.1f fmla per load, "
          "%d vector registers; fmla share %.1f%% (floor %.0f%%)"
          % (func, n, fmla, 8, loads, fmla / max(loads, 1), len(vregs), 100 * share, 100 * floor))
    sys.exit(0 if share >= floor else 1)


if __name__ == "__main__":
    main()
