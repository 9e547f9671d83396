"""Pass 1 of spec loading: structure against the JSON Schema, control characters, non-finite numbers."""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from importlib import resources
from typing import Any

import jsonschema

from attnscore.spec.located import Positioned, SpecProblem

_FLOAT_LIKE = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+$")
_YAML11_BOOLS = {"yes", "no", "on", "off", "y", "n", "true", "false"}


@lru_cache(maxsize=1)
def spec_schema() -> dict[str, Any]:
    """The JSON Schema of spec format v1, as a dict."""
    # Next to the bundled specs, so that their "# yaml-language-server: $schema=spec-v1.schema.json"
    # line finds it both in a checkout (specs/) and in an installed package (attnscore/bundled_specs/).
    text = (resources.files("attnscore") / "bundled_specs" / "spec-v1.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "mapping"
    return "null" if value is None else type(value).__name__


def found_text(value: Any) -> str:
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{_json_type(value)} {text}"


def _schema_message(error: jsonschema.ValidationError) -> str:
    """Turn a jsonschema error into 'expected ..., found ...'."""
    v, inst = error.validator, error.instance
    if v == "type":
        types = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        msg = f"expected {' or '.join(types)}, found {found_text(inst)}"
        if isinstance(inst, str) and _FLOAT_LIKE.match(inst):
            msg += " (a quoted number is text: drop the quotes)"
        elif isinstance(inst, bool) and "string" in types:
            msg += " (YAML 1.1 reads yes/no/on/off as booleans: quote the text)"
        return msg
    if v == "required":
        named = re.match(r"^'(.+)' is a required property$", error.message)
        missing = [k for k in error.validator_value if isinstance(inst, dict) and k not in inst]
        name = named.group(1) if named else (missing[0] if missing else None)
        return f"expected field {name!r}, found it missing" if name else error.message
    if v == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(inst) - set(allowed)) if isinstance(inst, dict) else []
        hint = f"; allowed: {', '.join(allowed)}" if allowed else ""
        return f"expected only known fields, found unknown field {extra[0] if extra else '?'!r}{hint}"
    if v == "enum":
        msg = f"expected one of {', '.join(map(str, error.validator_value))}, found {found_text(inst)}"
        if isinstance(inst, bool) and any(isinstance(choice, str) for choice in error.validator_value):
            msg += " (YAML 1.1 reads yes/no/on/off as booleans: quote the text)"
        return msg
    if v == "const":
        return f"expected {error.validator_value!r}, found {found_text(inst)}"
    if v == "pattern":
        return f"expected text matching {error.validator_value}, found {found_text(inst)}"
    if v in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        op = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}[v]
        return f"expected a number {op} {error.validator_value}, found {inst!r}"
    if v == "minItems":
        return f"expected at least {error.validator_value} item(s), found {len(inst)}"
    if v == "minLength":
        return f"expected non-empty text, found {found_text(inst)}"
    if v == "uniqueItems":
        return f"expected unique items, found duplicates in {found_text(inst)}"
    return error.message


def _strict_integer(checker: Any, instance: Any) -> bool:
    """JSON Schema's integer accepts 20.0; a spec's integer must be written as one (20)."""
    return isinstance(instance, int) and not isinstance(instance, bool)


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _strict_integer),
)


@lru_cache(maxsize=1)
def assignment_schema() -> dict[str, Any]:
    """The JSON Schema of assignment format v1 (``assignment-v1.schema.json``, beside the spec schema), as a dict."""
    text = (resources.files("attnscore") / "bundled_specs" / "assignment-v1.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


def schema_problems(doc: Positioned, schema: dict[str, Any] | None = None) -> list[SpecProblem]:
    """Every place ``doc`` breaks ``schema`` (default: the spec schema), each located."""
    validator = _Validator(spec_schema() if schema is None else schema)
    problems = []
    for error in sorted(validator.iter_errors(doc.data), key=lambda e: list(map(str, e.absolute_path))):
        message = _schema_message(error)
        path = tuple(error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            allowed = set(error.schema.get("properties", {}))
            extras = sorted(set(error.instance) - allowed)
            for extra in extras:
                problems.append(doc.problem(path + (extra,), message.replace(repr(extras[0]), repr(extra)), key=True))
            continue
        problems.append(doc.problem(path, message))
    return problems


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def control_problems(doc: Positioned) -> list[SpecProblem]:
    """Text with control characters (a terminal escape written as "\\e" in YAML) never reaches a report."""
    found: list[SpecProblem] = []

    def walk(value: Any, path: tuple[Any, ...]) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(k, path + (k,))
                walk(v, path + (k,))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, path + (i,))
        elif isinstance(value, str) and (control := _CONTROL.search(value)):
            code = ord(control.group())
            found.append(doc.problem(path, f"expected printable text, found the control character U+{code:04X}"))

    walk(doc.data, ())
    return found


def nonfinite_problems(doc: Positioned) -> list[SpecProblem]:
    """NaN and ±inf may appear only in worked examples' inputs and expected values."""
    problems = []

    def walk(value: Any, path: tuple[Any, ...]) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, path + (key,))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, path + (i,))
        elif isinstance(value, float) and not math.isfinite(value):
            in_example = len(path) >= 3 and path[0] == "worked_examples" and path[2] in ("inputs", "expected")
            if not in_example:
                problems.append(doc.problem(path, f"expected a finite number, found {value!r}"))

    walk(doc.data, ())
    return problems
