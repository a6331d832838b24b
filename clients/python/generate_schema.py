#!/usr/bin/env python3
"""Writes src/baton/schema.py: TypedDicts and Literal types for the parts of openapi/openapi.json
this library sends and reads. Run it after the API document changes:

    python3 clients/python/generate_schema.py            # rewrites src/baton/schema.py
    python3 clients/python/generate_schema.py --stdout   # prints it (the drift test compares)

TypedDicts on Python 3.9 have no NotRequired, so a schema with both required and optional keys is
two classes: `_NameRequired` (total) holds the required keys and `Name` (total=False) adds the rest.
"""
from __future__ import annotations

import json
import keyword
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOCUMENT = HERE.parent.parent / "openapi" / "openapi.json"
OUTPUT = HERE / "src" / "baton" / "schema.py"

# The schemas the library uses, in the order they are written.
SCHEMAS = [
    "JobState",
    "DeadReason",
    "ParentFailurePolicy",
    "RenewOutcome",
    "AckOutcome",
    "ProblemCode",
    "FieldError",
    "Problem",
    "EnqueueRequest",
    "EnqueuedJob",
    "BatchEnqueuedJob",
    "ClaimRequest",
    "ClaimedJob",
    "JobError",
    "JobDependencies",
    "Job",
    "JobAndNext",
    "AwaitResponse",
    "RelatedJob",
    "RelatedJobList",
    "BatchRenewItem",
    "BatchRenewResult",
    "BatchRenewResponse",
    "WorkerError",
    "AckRequest",
    "NackRequest",
]

SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None"}


def type_of(schema: dict) -> str:
    """The Python annotation for a JSON schema (as source text)."""
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[1]
    if "enum" in schema:
        return "Literal[" + ", ".join(json.dumps(v) for v in schema["enum"]) + "]"
    if "anyOf" in schema:
        options = [type_of(option) for option in schema["anyOf"]]
        others = [o for o in options if o != "None"]
        inner = others[0] if len(others) == 1 else "Union[" + ", ".join(others) + "]"
        return f"Optional[{inner}]" if "None" in options else inner
    kind = schema.get("type")
    if kind == "array":
        return f"List[{type_of(schema.get('items', {}))}]"
    if kind == "object":
        return "Dict[str, Any]"
    if kind in SCALARS:
        return SCALARS[kind]
    return "Any"  # no type: any JSON value (a payload, a result, progress)


def comment(text: str | None, indent: str) -> list[str]:
    return [f"{indent}#: {line}".rstrip() for line in text.splitlines()] if text else []


def typed_dict(name: str, schema: dict, bases: list[str]) -> list[str]:
    properties: dict = schema.get("properties", {})
    required = [key for key in properties if key in schema.get("required", [])]
    optional = [key for key in properties if key not in required]
    for key in properties:
        if not key.isidentifier() or keyword.iskeyword(key):
            raise SystemExit(f"{name}.{key} is not a Python identifier: extend the generator")
    lines: list[str] = []

    def body(keys: list[str]) -> list[str]:
        out: list[str] = []
        for key in keys:
            out += comment(properties[key].get("description"), "    ")
            out.append(f"    {key}: {type_of(properties[key])}")
        return out or ["    pass"]

    doc = [f'    """{schema["description"]}"""'] if schema.get("description") else []
    if required and optional:
        lines += [f"class _{name}Required({', '.join(bases)}):", *body(required), "", ""]
        lines += [f"class {name}(_{name}Required, total=False):", *doc, *body(optional)]
    elif optional and bases == ["TypedDict"]:
        lines += [f"class {name}(TypedDict, total=False):", *doc, *body(optional)]
    elif optional:
        lines += [f"class {name}({', '.join(bases)}, total=False):", *doc, *body(optional)]
    else:
        lines += [f"class {name}({', '.join(bases)}):", *doc, *body(required)]
    return lines


def generate(document: dict) -> str:
    schemas = document["components"]["schemas"]
    out = [
        '"""Types of the Baton HTTP API, generated from openapi/openapi.json by',
        "clients/python/generate_schema.py. Do not edit: run the generator (a test fails on drift).",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import Any, Dict, List, Literal, Optional, TypedDict, Union",
        "",
        f"API_VERSION = {json.dumps(document['info']['version'])}",
    ]
    for name in SCHEMAS:
        schema = schemas[name]
        out += ["", ""]
        if "enum" in schema:
            out += comment(schema.get("description"), "")
            out.append(f"{name} = {type_of(schema)}")
        elif "allOf" in schema:
            bases = [type_of(part) for part in schema["allOf"] if "$ref" in part]
            extra = next(part for part in schema["allOf"] if "$ref" not in part)
            out += typed_dict(name, {**extra, "required": []}, bases)
        else:
            out += typed_dict(name, schema, ["TypedDict"])
    return "\n".join(out) + "\n"


def main() -> None:
    text = generate(json.loads(DOCUMENT.read_text()))
    if "--stdout" in sys.argv:
        sys.stdout.write(text)
    else:
        OUTPUT.write_text(text)


if __name__ == "__main__":
    main()
