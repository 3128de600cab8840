#!/usr/bin/env python3
"""tests/ref/weights_checksum.py: an independent implementation of the weights-file checksum
(runtime/weights.c, primc_checksum), for tests and for writers outside primc.

Four 64-bit lanes take the data's little-endian 8-byte words in turn (word i to lane i % 4), the last
partial 32-byte block zero-filled: lane = rotl((lane ^ word) * 0x9e3779b97f4a7c15, 29). Lane i starts
at 0xd6e8feb86659fd93 * (i + 1). The end folds h = 0xd6e8feb86659fd93 through the same step with each
lane, then the byte length, and returns h ^ (h >> 31).

Prints the checksums tests/unit/test_weights.c expects: bytes 0..255 repeated to 1000 bytes, and no bytes.
Usage: python3 tests/ref/weights_checksum.py [FILE...]  (a file's checksum over its bytes after offset 64:
a weights file's payload)."""
import struct
import sys

M = (1 << 64) - 1
ODD = 0x9E3779B97F4A7C15
FOLD = 0xD6E8FEB86659FD93


def step(lane, word):
    x = ((lane ^ word) * ODD) & M
    return ((x << 29) | (x >> 35)) & M


def checksum(data: bytes) -> int:
    lanes = [(FOLD * (i + 1)) & M for i in range(4)]
    padded = data + b"\0" * (-len(data) % 32)
    for i, (w,) in enumerate(struct.iter_unpack("<Q", padded)):
        lanes[i % 4] = step(lanes[i % 4], w)
    h = FOLD
    for lane in lanes:
        h = step(h, lane)
    h = step(h, len(data))
    return h ^ (h >> 31)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        for path in sys.argv[1:]:
            with open(path, "rb") as f:
                print(f"{checksum(f.read()[64:]):016x}  {path}")
    else:
        print(f"{checksum(bytes(i % 256 for i in range(1000))):016x}  0..255 to 1000 bytes")
        print(f"{checksum(b''):016x}  empty")
