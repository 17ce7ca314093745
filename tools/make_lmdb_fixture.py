#!/usr/bin/env python3
"""Writes tests/data/lmdb_fixture/: two LMDB environments in PaddleOCR's LMDBDataSet layout
("num-samples", "label-%09d", "image-%09d", 1-based), written with py-lmdb as PaddleOCR's
create_lmdb_dataset does, with the problems tests/data/test_lmdb.c expects to be skipped and
counted. Needs `pip install lmdb`. Run from the source root: python3 tools/make_lmdb_fixture.py

  lmdb_fixture/nested/part2   (found first: directories are walked in sorted order)
     1 "z9"            valid
     2 (no label)      skipped at open: empty_label
     3 b"\\xff\\xfe"      skipped at open: bad_utf8
     4 "日本"           skipped at open: no_known_chars (en_dict)
     5 "bad"           image bytes that are not an image: image_corrupt when loaded
     6 "noimg"         no image record: image_missing when loaded
  lmdb_fixture/part1
     1 "abc"  2 "Hello World"  3 "12.50"  4 "a"   valid
"""
import os
import shutil
import struct
import zlib

import lmdb

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "lmdb_fixture")


def png(width, height, seed):
    """An 8-bit RGB PNG with a deterministic pattern."""
    rows = b""
    for y in range(height):
        row = bytearray([0])  # filter: none
        for x in range(width):
            v = (x * 37 + y * 11 + seed * 53) % 256
            row += bytes([v, (v * 3) % 256, 255 - v])
        rows += bytes(row)

    def chunk(kind, data):
        c = kind + data
        return struct.pack(">I", len(data)) + c + struct.pack(">I", zlib.crc32(c) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b"")


def write_env(path, records):
    os.makedirs(path)
    env = lmdb.open(path, map_size=1 << 20, subdir=True)
    with env.begin(write=True) as txn:
        for k, v in records.items():
            txn.put(k, v)
    env.close()
    lock = os.path.join(path, "lock.mdb")
    if os.path.exists(lock):
        os.remove(lock)  # readers open with lock=False; keep only data.mdb in the repository


def key(kind, i):
    return b"%s-%09d" % (kind, i)


shutil.rmtree(ROOT, ignore_errors=True)
part2 = {b"num-samples": b"6"}
part2[key(b"label", 1)] = "z9".encode()
part2[key(b"image", 1)] = png(24, 8, 1)
part2[key(b"image", 2)] = png(16, 8, 2)
part2[key(b"label", 3)] = b"\xff\xfe"
part2[key(b"image", 3)] = png(16, 8, 3)
part2[key(b"label", 4)] = "日本".encode()
part2[key(b"image", 4)] = png(16, 8, 4)
part2[key(b"label", 5)] = b"bad"
part2[key(b"image", 5)] = b"\x89PNG\r\n\x1a\n not an image"
part2[key(b"label", 6)] = b"noimg"
write_env(os.path.join(ROOT, "nested", "part2"), part2)

part1 = {b"num-samples": b"4"}
for i, text in enumerate(["abc", "Hello World", "12.50", "a"], start=1):
    part1[key(b"label", i)] = text.encode()
    part1[key(b"image", i)] = png(8 + 6 * len(text), 8, 10 + i)
write_env(os.path.join(ROOT, "part1"), part1)
for d, _, files in sorted(os.walk(ROOT)):
    for f in files:
        print(os.path.relpath(os.path.join(d, f)), os.path.getsize(os.path.join(d, f)), "bytes")
