#!/usr/bin/env python3
"""Writes src/api/protobuf/fields.rs: the protobuf field table of the kinds kplane decodes.

For every message reachable from the kinds (and request bodies) kplane takes as protobuf, it
lists each field's tag, wire type and JSON name. The tags and types come from the `k8s-pb`
crate's generated bindings (the dependency kplane decodes envelopes with); the JSON names from
the OpenAPI schemas kplane serves (its `/openapi/v3`), matched to the bindings' snake_case
names. Rerun after upgrading k8s-pb or k8s-openapi:

    scripts/gen_protobuf_fields.py ~/.cargo/registry/src/*/k8s-pb-0.9.0/src schemas.json \
        > src/api/protobuf/fields.rs

where schemas.json holds every `components.schemas` entry of a running server's
`/openapi/v3/<group-version>` documents, merged into one object.
"""
import json
import re
import sys
from pathlib import Path

# The messages a body may hold: each served kind, and the other bodies clients send.
EXTRA_ROOTS = [
    "io.k8s.api.authentication.v1.TokenRequest",
    "io.k8s.api.policy.v1.Eviction",
    "io.k8s.api.core.v1.Binding",
    "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
]
# Messages with a JSON form of their own (the decoder writes them by name).
SPECIAL = {
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time",
    "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Duration",
    "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1",
    "io.k8s.apimachinery.pkg.api.resource.Quantity",
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
    "io.k8s.apimachinery.pkg.runtime.RawExtension",
}

FIELD = re.compile(r'#\[prost\(([^\]]*?)tag = "(\d+)"\)\]\s*pub (r#)?(\w+):\s*([^;]*?),\n(?=\s*(?:///|#\[|\Z))', re.S)


def module_name(path: Path, root: Path) -> str:
    parts = path.parent.relative_to(root).parts
    return "io.k8s." + ".".join(parts)


def resolve(module: str, rust_type: str) -> str:
    """The full name of the message a field's Rust type names, from the field's module."""
    inner = re.sub(r"\s+", "", rust_type).replace(",>", ">")
    inner = re.sub(r"^::core::option::Option<(.*)>$", r"\1", inner)
    inner = re.sub(r"^::prost::alloc::vec::Vec<(.*)>$", r"\1", inner)
    inner = re.sub(r"^::prost::alloc::boxed::Box<(.*)>$", r"\1", inner)
    map_value = re.match(r"^::prost::alloc::collections::BTreeMap<::prost::alloc::string::String,(.*)>$", inner)
    if map_value:
        inner = map_value.group(1)
    segments = inner.split("::")
    base = module.split(".")  # io.k8s.api.core.v1
    while segments and segments[0] == "super":
        segments.pop(0)
        base.pop()
    return ".".join(base + segments)


def parse(root: Path):
    messages = {}
    for path in root.rglob("mod.rs"):
        module = module_name(path, root)
        text = path.read_text()
        for struct in re.finditer(r"pub struct (\w+) \{(.*?)\n\}", text, re.S):
            fields = []
            for m in FIELD.finditer(struct.group(2) + "\n"):
                spec, tag, _, name, rust_type = m.groups()
                spec = spec.strip().rstrip(",")
                fields.append((int(tag), name, spec, rust_type, module))
            messages[f"{module}.{struct.group(1)}"] = fields
    return messages


def squash(name: str) -> str:
    return name.replace("_", "").lower()


def json_names(schema, fields, vocabulary, messages):
    """Each field's JSON name, and whether its message is inlined into its parent's JSON (a Go
    embedded struct: a message field its parent's schema has no property for, whose own fields
    the parent's schema has). Fields newer than the schemas get a name from the others'."""
    props = {squash(p): p for p in (schema or {}).get("properties", {})}
    names = {}
    for _, name, spec, rust_type, module in fields:
        found = props.get(squash(name))
        if found is not None:
            names[name] = (found, False)
        elif schema is not None and spec.startswith("message") and "repeated" not in spec \
                and any(squash(f[1]) in props for f in messages[resolve(module, rust_type)]):
            names[name] = (name, True)
        elif squash(name) in vocabulary:
            names[name] = (vocabulary[squash(name)], False)
        else:
            head, *rest = name.split("_")
            names[name] = (head + "".join(r[:1].upper() + r[1:] for r in rest), False)
    return names


def main():
    root, schemas_path = Path(sys.argv[1]), sys.argv[2]
    schemas = json.load(open(schemas_path))
    vocabulary = {squash(p): p for schema in schemas.values() for p in schema.get("properties", {})}
    messages = parse(root)
    roots = [n for n, s in schemas.items() if s.get("x-kubernetes-group-version-kind")]
    roots = [n for n in roots if not n.endswith("List")] + EXTRA_ROOTS
    order, seen = [], set()
    todo = [r for r in roots if r in messages]
    missing = [r for r in roots if r not in messages]
    if missing:
        sys.exit(f"no bindings for {missing}")
    while todo:
        name = todo.pop(0)
        if name in seen:
            continue
        seen.add(name)
        order.append(name)
        for _, _, spec, rust_type, module in messages[name]:
            if spec.startswith("message") or "message" in spec.split("=")[-1]:
                todo.append(resolve(module, rust_type))
    order.sort()
    index = {name: i for i, name in enumerate(order)}
    out = []
    out.append("//! Generated by `scripts/gen_protobuf_fields.py`: do not edit. The protobuf fields of every")
    out.append("//! message kplane decodes, from the k8s-pb bindings, with their JSON names from the served")
    out.append("//! OpenAPI schemas.\n")
    out.append("use super::table::{Field, Kind, Message};\n")
    out.append("#[rustfmt::skip]")
    out.append("pub(super) static MESSAGES: &[Message] = &[")
    for name in order:
        out.append(f"    Message {{ name: {json.dumps(name)}, fields: &[")
        if True:
            fields = messages[name]
            # The special messages' fields are read by the decoder under their own names.
            schema, words = (None, {}) if name in SPECIAL else (schemas.get(name), vocabulary)
            names = json_names(schema, fields, words, messages)
            for tag, rust_name, spec, rust_type, module in sorted(fields):
                repeated = "repeated" in spec
                kind = spec.split(",")[0].strip()
                if kind.startswith("btree_map"):
                    value = spec.split("=")[1].strip().strip('"').split(",")[1].strip()
                    kind = {"string": "Kind::MapOfString", "bytes": "Kind::MapOfBytes"}.get(value)
                    if value == "message":
                        kind = f"Kind::MapOfMessage({index[resolve(module, rust_type)]})"
                elif kind == "message":
                    kind = f"Kind::Message({index[resolve(module, rust_type)]})"
                elif kind.startswith("bytes"):
                    kind = "Kind::Bytes"
                else:
                    kind = {"string": "Kind::String", "bool": "Kind::Bool", "int32": "Kind::Int",
                            "int64": "Kind::Int"}[kind]  # no served kind has a double
                json_name, inline = names[rust_name]
                if inline:
                    json_name = ""
                out.append(f"        Field {{ tag: {tag}, json: {json.dumps(json_name)}, repeated: {str(repeated).lower()}, kind: {kind} }},")
        out.append("    ] },")
    out.append("];")
    print("\n".join(out))


main()
