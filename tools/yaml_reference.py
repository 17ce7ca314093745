#!/usr/bin/env python3
"""Writes what PyYAML (PaddleOCR's `yaml.load(f, Loader=yaml.Loader)`) reads from the YAML
fixtures of tests/core/data into JSON files next to them; tests/core/test_yaml.c compares
ocrtrain's YAML reader with these. Needs PyYAML (pip install pyyaml). Run from the source root:
    python3 tools/yaml_reference.py
"""
import json
import os

import yaml

FIXTURES = ["yaml_scalars.yml", "yaml_anchors.yml", "paddle_ctc_rec.yml"]
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "core", "data")

for name in FIXTURES:
    path = os.path.join(DATA, name)
    with open(path, "rb") as f:
        tree = yaml.load(f, Loader=yaml.Loader)
    out = os.path.join(DATA, name.rsplit(".", 1)[0] + ".json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(tree, f, ensure_ascii=False, indent=1, allow_nan=False)
        f.write("\n")
    print("wrote", os.path.relpath(out), "(PyYAML %s)" % yaml.__version__)
