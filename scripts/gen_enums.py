#!/usr/bin/env python3
"""Writes src/api/openapi/enums.rs: the fields whose values Kubernetes' OpenAPI lists as an enum.

A Go string type marked `// +enum` (`RestartPolicy`, `PullPolicy`, ...) has its constants
published in Kubernetes' OpenAPI documents: each field of that type (or list of it) gets an
`enum` of the constants' values, sorted, and its description a "Possible enum values" list,
one line per value with the constant's comment (its leading name dropped). `kubectl explain`
shows them. This script reads the Go types of a `k8s.io/api` checkout of the served release.
Rerun when the served release changes:

    scripts/gen_enums.py path/to/k8s.io/api > src/api/openapi/enums.rs
"""
import re
import sys
from pathlib import Path

# The packages, Go struct and field patterns and file list are gen_omitted_zeros.py's.
from gen_omitted_zeros import API_PACKAGES, FIELD, INLINE, STRUCT, go_files

ENUM_TYPE = re.compile(r"^((?://.*\n)*)type (\w+) string\b", re.M)
CONST_BLOCK = re.compile(r"^const \((.*?)^\)", re.M | re.S)
CONST = re.compile(r'^\s*(\w+)\s+(\w+)\s*=\s*"([^"]*)"')


def enums(files):
    """Maps each `+enum` type of the package to its values, each with its description."""
    marked = set()
    for path in files:
        for comments, name in ENUM_TYPE.findall(path.read_text()):
            if any(line.strip() == "// +enum" for line in comments.splitlines()):
                marked.add(name)
    values = {name: [] for name in marked}
    for path in files:
        for block in CONST_BLOCK.findall(path.read_text()):
            comment = []
            for line in block.splitlines():
                stripped = line.strip()
                if stripped.startswith("//"):
                    comment.append(stripped[2:].strip())
                    continue
                match = CONST.match(line)
                if match and match.group(2) in values:
                    const, type_name, value = match.groups()
                    text = " ".join(comment).strip()
                    text = text[len(const):] if text.startswith(const) else text
                    text = re.sub(r"\s+", " ", text).strip()
                    values[type_name].append((value, text))
                comment = []
    # One entry per value (a value declared twice keeps its longer description), sorted.
    unique = {}
    for name, found in values.items():
        by_value = {}
        for value, text in found:
            if len(text) >= len(by_value.get(value, "")):
                by_value[value] = text
        if by_value:
            unique[name] = sorted(by_value.items())
    return unique


def enum_fields(files, local, imported):
    """(struct, json name, list items?, (package, type)) of each field of an enum type, the
    fields of inline-embedded structs included in their outer struct."""
    own, inlined = {}, {}
    for path in files:
        for struct, body in STRUCT.findall(path.read_text()):
            fields = own.setdefault(struct, [])
            for line in body.splitlines():
                embedded = INLINE.match(line)
                if embedded:
                    inlined.setdefault(struct, []).append(embedded.group(1))
                match = FIELD.match(line)
                if not match or not match.group(3):
                    continue
                go_type = match.group(2).lstrip("*")
                items = go_type.startswith("[]")
                go_type = go_type.removeprefix("[]").lstrip("*")
                if "." in go_type:
                    package, name = go_type.split(".", 1)
                    if name in imported.get(package, {}):
                        fields.append((match.group(3), items, (package, name)))
                elif go_type in local:
                    fields.append((match.group(3), items, (None, go_type)))

    def with_inlined(struct):
        out = list(own.get(struct, []))
        for embedded in inlined.get(struct, []):
            out += with_inlined(embedded)
        return out

    return {struct: with_inlined(struct) for struct in own if with_inlined(struct)}


def const_name(package, type_name):
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", type_name).upper()
    return f"{package.replace('/', '_').upper()}_{words}"


def rust_str(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def main():
    api = Path(sys.argv[1])
    core = enums(go_files(api / "core/v1"))
    types, fields = {}, []
    for package in API_PACKAGES:
        files = go_files(api / package)
        local = core if package == "core/v1" else enums(files)
        imported = {"v1": core, "corev1": core} if package != "core/v1" else {}
        prefix = "io.k8s.api." + package.replace("/", ".")
        for struct, found in enum_fields(files, local, imported).items():
            for json_name, items, (from_package, type_name) in found:
                source = "core/v1" if from_package else package
                values = core[type_name] if from_package else local[type_name]
                name = const_name(source, type_name)
                types[name] = values
                fields.append((f"{prefix}.{struct}", json_name, items, name))
    print("//! Generated by `scripts/gen_enums.py`: do not edit. The fields of the served API groups")
    print("//! whose Go type is marked `+enum` (by schema name, sorted), each with its type's values,")
    print("//! sorted, and the description of each (its constant's comment, its leading name dropped).")
    print()
    print("/// One enum's values and their descriptions.")
    print("pub(super) type Values = &'static [(&'static str, &'static str)];")
    print()
    for name in sorted(types):
        print("#[rustfmt::skip]")
        print(f"const {name}: Values = &[")
        for value, text in types[name]:
            print(f"    ({rust_str(value)}, {rust_str(text)}),")
        print("];")
    print()
    print("/// (schema, property, whether the values are its list's items, the values).")
    print("#[rustfmt::skip]")
    print("pub(super) static ENUM_FIELDS: &[(&str, &str, bool, Values)] = &[")
    for schema, json_name, items, name in sorted(fields):
        print(f'    ("{schema}", "{json_name}", {"true" if items else "false"}, {name}),')
    print("];")


if __name__ == "__main__":
    main()
