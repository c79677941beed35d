"""Fuzz: random and mutated ADL strings raise nothing but ADLError (parse and build, both sides)."""

from __future__ import annotations

import random
import re

import torch

from adlnmt.adl.errors import ADLError
from adlnmt.adl.parser import parse_assignments
from adlnmt.adl.registry import REGISTRY, Side
from adlnmt.layers.builder import build_chain
from adlnmt.layers.context import ModelOptions
from adlnmt.published import DECODERS, ENCODERS

ALPHABET = "()[],=->→$ _.e0123456789abcdefghijklmnopqrstuvwxyzABCXYZ\n\t'\"@#"
TOKENS = [
    *REGISTRY,
    "mh_dot_att",
    "mlp_att",
    "->",
    "(",
    ")",
    ",",
    "=",
    "true",
    "relu",
    "glu",
    "lstm",
    "heads=",
    "source=",
    "increasing",
    "-1",
    "0",
    "3",
    "99999",
    "1e-3",
    "$NUM_HIDDEN",
    "[1, 2]",
    "[]",
]
VARIABLES = parse_assignments(["FF_NUM_HIDDEN=32", "NUM_HIDDEN=16"])
SEEDS = [*ENCODERS.values(), *DECODERS.values()]


def swap_token(text: str, rng: random.Random) -> str:
    """Keep the syntax, change the meaning: another layer name, or another number."""
    names = list(re.finditer(r"[A-Za-z_]+", text))
    numbers = list(re.finditer(r"\d+", text))
    if numbers and rng.random() < 0.3:
        m = rng.choice(numbers)
        return text[: m.start()] + rng.choice(["0", "1", "2", "3", "5", "7", "64", "100000"]) + text[m.end() :]
    m = rng.choice(names)
    return text[: m.start()] + rng.choice(TOKENS[: len(REGISTRY) + 2]) + text[m.end() :]


def mutate(text: str, rng: random.Random) -> str:
    if rng.random() < 0.5:
        return swap_token(text, rng)
    for _ in range(rng.randint(1, 2)):
        i = rng.randrange(len(text) + 1)
        j = min(len(text), i + rng.randint(1, 12))
        op = rng.randrange(5)
        if op == 0:
            text = text[:i] + text[j:]
        elif op == 1:
            text = text[:i] + rng.choice(ALPHABET) + text[i:]
        elif op == 2:
            text = text[:i] + rng.choice(TOKENS) + text[i:]
        elif op == 3:
            text = text[:i] + text[i:j] + text[i:]
        else:
            text = text[:i] + rng.choice(TOKENS) + text[j:]
    return text


def random_text(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 40)))
    return " ".join(rng.choice(TOKENS) for _ in range(rng.randint(1, 15)))


def only_adl_errors(text: str, side: Side) -> bool:
    """True if ``text`` built, False if it raised ADLError; anything else fails the test."""
    try:
        with torch.device("meta"):
            build_chain(text, side, 16, ModelOptions(d_model=16, heads=4, max_len=32), VARIABLES)
    except ADLError as err:
        assert err.message and str(err)
        return False
    return True


def test_random_and_mutated_strings_raise_only_adl_errors() -> None:
    rng = random.Random(20261121)
    built = failed = 0
    for i in range(3000):
        text = mutate(rng.choice(SEEDS), rng) if i % 3 else random_text(rng)
        for side in Side:
            if only_adl_errors(text, side):
                built += 1
            else:
                failed += 1
    # The fuzzer must exercise both outcomes to mean anything.
    assert built > 100 and failed > 1000, (built, failed)


def test_non_text_input_is_an_adl_error() -> None:
    assert not only_adl_errors(None, Side.ENCODER)  # type: ignore[arg-type]
