"""Options that declare their own command-line flags: a dataclass field made with :func:`option` carries its flag's
help, choices and range (:mod:`adlnmt.bounds`) beside its default, so that a default, a range or a help text is
written once. :func:`add_flags` gives a parser one flag per field, :func:`from_flags` builds the options back from
the parsed arguments and :func:`out_of_bounds` lists the values outside their ranges.

Used by :class:`~adlnmt.train.config.TrainConfig` (which adds YAML files), the search's
:class:`~adlnmt.inference.options.SearchOptions`, the server's :class:`~adlnmt.serve.limits.ServeOptions` and
``prepare``'s :class:`~adlnmt.data.options.PrepareOptions`. Without PyTorch, so that ``--help`` stays fast."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from dataclasses import MISSING, Field, field, fields
from typing import Any, TypeVar

from adlnmt.bounds import FINITE, Bounds, flag_type

Options = TypeVar("Options")


def option(
    default: Any = MISSING,
    help: str = "",
    *,
    flag: str | None = None,
    choices: tuple[str, ...] | None = None,
    bounds: Bounds | None = None,
    switch: bool = False,
    negatable: bool = False,
    parse: Callable[[str], Any] | None = None,
    metavar: str | None = None,
    action: str | type[argparse.Action] | None = None,
) -> Any:
    """A dataclass field and its flag (no ``default``: a required flag).

    ``help`` may show the default as ``%(default)s``; ``flag``: the flag's name where it is not the field's
    (``--d-model`` for ``d_model``); ``bounds``: a number's range (floats are finite at least); ``switch``: a bool
    set by a flag without value (``--x`` sets it, or clears one that defaults to True, e.g. ``--uncached``;
    ``negatable``: ``--x`` and ``--no-x``); ``parse``: the flag's text → the value, for types other than numbers and
    text; ``action="append"``: a repeatable flag collecting a list; an ``argparse.Action`` subclass (e.g.
    :class:`OneModel`): the flag's action."""
    metadata = {"help": help, "flag": flag, "choices": choices, "bounds": bounds, "switch": switch,
                "negatable": negatable, "parse": parse, "metavar": metavar, "action": action}  # fmt: skip
    return field(default=default, metadata=metadata)


class GivenOnce(argparse.Action):
    """A flag of one value: given again, an error naming both values (argparse would keep the last in silence)."""

    hint = ""  # said after the error, e.g. what to do instead

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: str | None = None
    ) -> None:
        previous = getattr(namespace, self.dest, self.default)
        if previous is not self.default:
            parser.error(f"argument {option}: given twice ({previous!r}, then {values!r}){self.hint}")
        setattr(namespace, self.dest, values)


class OneModel(GivenOnce):
    """``--model`` of a command that runs one model (``adlnmt translate --model A --model B`` decodes an
    ensemble)."""

    hint = "; this command runs one model (an ensemble of several: adlnmt translate --model A --model B)"


def flag_of(f: Field) -> str:
    """``--max-len-ratio`` for ``max_len_ratio`` (or the flag the field names)."""
    return "--" + (f.metadata.get("flag") or f.name).replace("_", "-")


def kind_of(f: Field) -> type:
    """int, float, bool or str: the type of a field's values, from its annotation (``int | None`` → int)."""
    text = str(f.type)
    kinds = {"int": int, "float": float, "bool": bool}
    return next((kind for name, kind in kinds.items() if text.startswith(name)), str)


def bounds_of(f: Field) -> Bounds | None:
    """The range a numeric field's values must lie in (None for other fields)."""
    return f.metadata.get("bounds") or (FINITE if kind_of(f) is float else None)


def flagged(options: type) -> list[Field]:
    """The fields of the dataclass ``options`` that declare a flag (made with :func:`option`)."""
    return [f for f in fields(options) if "help" in f.metadata]


def add_flags(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    options: type,
    names: Iterable[str] | None = None,
    *,
    bounded: bool = True,
    unset: bool = False,
) -> None:
    """One flag per field of the dataclass ``options`` (those of ``names`` only, in that order, when given), its
    value stored under the field's name. ``bounded``: argparse checks each number's range (else the options do, all
    problems in one message); ``unset``: every default is None, so that given flags can be told apart from values
    given elsewhere (TrainConfig's YAML), and the help of a flag with a value names its default."""
    chosen = {f.name: f for f in flagged(options)}
    for f in [chosen[name] for name in names] if names is not None else chosen.values():
        parser.add_argument(flag_of(f), dest=f.name, **_argument(f, bounded, unset))


def _argument(f: Field, bounded: bool, unset: bool) -> dict[str, Any]:
    """``add_argument``'s keywords for the flag of field ``f``."""
    meta = f.metadata
    default = None if unset or f.default is MISSING else f.default
    if meta["switch"]:
        action = argparse.BooleanOptionalAction if meta["negatable"] else "store_false" if f.default else "store_true"
        return {"action": action, "default": default, "help": meta["help"]}
    if meta["action"] == "append":
        return {"action": "append", "default": default, "metavar": meta["metavar"], "help": meta["help"]}
    kind, bounds = kind_of(f), bounds_of(f)
    parse = meta["parse"] or (flag_type(kind, bounds) if bounded and bounds is not None else kind)
    metavar = meta["metavar"] or (None if meta["choices"] else flag_of(f)[2:].upper().replace("-", "_"))
    return {
        **({"action": meta["action"]} if meta["action"] else {}),
        "type": None if parse is str else parse,
        "default": default,
        "required": f.default is MISSING,
        "choices": meta["choices"],
        "metavar": metavar,
        "help": f"{meta['help']} (default: {f.default})" if unset else meta["help"],
    }


def from_flags(options: type[Options], args: argparse.Namespace, names: Iterable[str] | None = None) -> Options:
    """The dataclass ``options`` from the arguments parsed by the flags of :func:`add_flags` (those of ``names``
    when given; the other fields keep their defaults)."""
    chosen = list(names) if names is not None else [f.name for f in flagged(options)]
    return options(**{name: getattr(args, name) for name in chosen})


def out_of_bounds(options: Any) -> list[str]:
    """``--flag must be ..., got value`` for every field of the dataclass instance ``options`` out of its range."""
    return [
        f"{flag_of(f)} {bounds.refusal(value)}"
        for f in flagged(type(options))
        if (bounds := bounds_of(f)) is not None
        and (value := getattr(options, f.name)) is not None
        and not bounds.holds(value)
    ]
