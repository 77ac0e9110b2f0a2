#!/usr/bin/env python3
"""Writes a requantized copy of a GGUF with the PyPI `gguf` package: every
Q4_0/Q4_1/Q8_0/F16/F32 weight matrix becomes TYPE (Q8_0 or F16); metadata and
other tensors are copied as they are. Used to make the "requantized pair" of
the default model for the draft-model speculative decoding tests (the target
requantized, the original as its draft).

Usage: requantize.py IN.gguf OUT.gguf [--type Q8_0|F16]   (idempotent: an
existing OUT newer than IN is kept)
"""
import argparse
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as Q, GGUFReader, GGUFValueType, GGUFWriter
from gguf import quants

SOURCE_TYPES = {Q.Q4_0, Q.Q4_1, Q.Q8_0, Q.F16, Q.F32}


def copy_metadata(reader, writer):
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        vtype = field.types[0]
        sub = field.types[1] if vtype == GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--type", default="Q8_0", choices=["Q8_0", "F16"])
    a = ap.parse_args()
    if os.path.exists(a.dst) and os.path.getmtime(a.dst) >= os.path.getmtime(a.src):
        print(a.dst)
        return
    target = Q[a.type]
    reader = GGUFReader(a.src)
    arch = reader.fields["general.architecture"].contents()
    tmp = a.dst + ".tmp"
    writer = GGUFWriter(tmp, arch)
    copy_metadata(reader, writer)
    for t in reader.tensors:
        shape = [int(x) for x in t.shape]  # GGUF order: ne0 (row length) first
        if len(shape) == 2 and t.tensor_type in SOURCE_TYPES and t.tensor_type != target:
            rows = quants.dequantize(t.data, t.tensor_type).reshape(shape[1], shape[0]).astype(np.float32)
            if target == Q.F16:
                writer.add_tensor(t.name, rows.astype(np.float16))
            else:
                packed = quants.quantize(rows, target)
                writer.add_tensor(t.name, packed, raw_shape=packed.shape, raw_dtype=target)
        else:
            writer.add_tensor(t.name, t.data, raw_shape=t.data.shape, raw_dtype=t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(tmp, a.dst)
    print(a.dst)


if __name__ == "__main__":
    sys.exit(main())
