"""The ``speed:`` section of a grid as written: its keys, claims and checks (:func:`parse_speed`); the grid reads
it here, :mod:`adlnmt.experiment.speed` times and reports what it asks for, and its claims (``faster`` claims
with an engine and beam, :class:`adlnmt.verdicts.claims.Claim`) are judged with the grid's other claims
(:mod:`adlnmt.experiment.judge`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from adlnmt.experiment.schema import Reader, show
from adlnmt.verdicts.claims import Claim, registration_of

SPEED_KEYS = ("test", "engines", "precision", "threads", "workers", "beams", "repeats", "lines", "claims")
CLAIM_KEYS = ("quote", "where", "faster", "ratio", "beam", "engine", "registered")
ENGINES = ("torch", "ctranslate2", "onnxruntime")
EXPORTS = {"ctranslate2": ("ctranslate2", "CTranslate2"), "onnxruntime": ("onnx", "ONNX")}  # engine → format, name
PRECISIONS = {"fp32": "none", "int8": "int8"}  # → the export's quantization


@dataclass(frozen=True)
class SpeedSpec:
    """The ``speed:`` section of a grid."""

    test: str
    engines: tuple[str, ...] = ("torch",)
    precision: str = "fp32"
    threads: int = 1
    workers: int = 1  # > 1: that many batches searched at a time, on one thread each (translate --workers)
    beams: tuple[int, ...] = (1, 5)
    repeats: int = 3
    lines: int = 0  # the first N lines of the test set; 0: all
    claims: tuple[Claim, ...] = ()  # faster, with the engine and beam timed

    def of_rows(self, variants: tuple[str, ...]) -> SpeedSpec:
        """The section with only the claims on ``variants`` (a scale's rows)."""
        return replace(self, claims=tuple(c for c in self.claims if {c.first, c.second} <= set(variants)))

    def settings(self) -> dict[str, Any]:
        """What the timings depend on (a record with other settings is timed again)."""
        return {"test": self.test, "engines": list(self.engines), "precision": self.precision,
                "threads": self.threads, **({"workers": self.workers} if self.workers > 1 else {}),
                "beams": list(self.beams), "repeats": self.repeats, "lines": self.lines}  # fmt: skip


def parse_speed(reader: Reader, value: Any, tests: tuple[str, ...], variants: tuple[str, ...]) -> SpeedSpec | None:
    """The grid's ``speed:`` section (None without one); errors name the key."""
    if value is None:
        return None
    block = reader.mapping(value, "speed", SPEED_KEYS)
    test = reader.name(block.get("test", tests[0]), "speed.test")
    if test not in tests:
        reader.unknown("speed.test", test, tests, "test set")
    engines = block.get("engines", ["torch"])
    if not isinstance(engines, list) or not engines or len(set(map(str, engines))) != len(engines):
        reader.fail("speed.engines", f"expected a list of distinct engines of {', '.join(ENGINES)}, got {engines!r}")
    for i, engine in enumerate(engines):
        if engine not in ENGINES:
            reader.unknown(f"speed.engines[{i}]", str(engine), ENGINES, "engine")
    precision = str(block.get("precision", "fp32"))
    if precision not in PRECISIONS:
        reader.unknown("speed.precision", precision, tuple(PRECISIONS), "precision")
    numbers = {}
    for key, default, low in (("threads", 1, 1), ("workers", 1, 1), ("repeats", 3, 1), ("lines", 0, 0)):
        numbers[key] = reader.typed(block.get(key, default), int, f"speed.{key}")
        if numbers[key] < low:
            reader.fail(f"speed.{key}", f"must be at least {low}, got {numbers[key]}")
    beams = reader.positive_ints(block.get("beams", [1, 5]), "speed.beams")
    listed = block.get("claims") or []
    if not isinstance(listed, list):
        reader.fail("speed.claims", f"expected a list of claims, got {show(listed)}")
    claims = tuple(_claim(reader, item, f"speed.claims[{i}]", variants, test, beams, tuple(engines))
                   for i, item in enumerate(listed))  # fmt: skip
    return SpeedSpec(test, tuple(engines), precision, beams=beams, claims=claims, **numbers)


def _claim(reader: Reader, value: Any, where: str, variants: tuple[str, ...], test: str, beams: tuple[int, ...],
           engines: tuple[str, ...]) -> Claim:  # fmt: skip
    block = reader.mapping(value, where, CLAIM_KEYS)
    for key in ("quote", "faster", "ratio"):
        if key not in block:
            reader.fail(where, f"missing '{key}'")
    pair = block["faster"]
    if not isinstance(pair, list) or len(pair) != 2 or pair[0] == pair[1]:
        reader.fail(f"{where}.faster", f"expected two different variants [A, B], got {pair!r}")
    for name in pair:
        if name not in variants:
            reader.unknown(f"{where}.faster", str(name), variants, "variant")
    ratio = reader.typed(block["ratio"], float, f"{where}.ratio")
    if ratio <= 0:
        reader.fail(f"{where}.ratio", f"expected a positive speed ratio, got {ratio:g}")
    beam = reader.typed(block.get("beam", beams[-1]), int, f"{where}.beam")
    if beam not in beams:
        reader.fail(f"{where}.beam", f"{beam} is not among the timed beams {list(beams)}")
    engine = str(block.get("engine", engines[0]))
    if engine not in engines:
        reader.unknown(f"{where}.engine", engine, engines, "timed engine")
    try:
        registered = registration_of(str(block.get("registered", "")))
    except ValueError as err:
        reader.fail(f"{where}.registered", str(err))
    quote = reader.text(block["quote"], f"{where}.quote")
    source = reader.text(block.get("where", ""), f"{where}.where", empty=True)
    return Claim(quote, source, "faster", pair[0], pair[1], 0.0,
                 "sentences_per_s", test, ratio, registered=registered[0], registered_at=registered[1], engine=engine,
                 beam=beam)  # fmt: skip
