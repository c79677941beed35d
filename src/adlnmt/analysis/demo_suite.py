"""An exact agreement suite for the demo language (:mod:`adlnmt.data.demo`).

Articles, adjectives and verbs of the demo target language agree in gender and number with their noun (the
subject, for verbs), and its vocabulary is closed, so every agreeing word of a target sentence is found by
lookup and flipped exactly: one item per agreeing word and feature, whose variant changes the word's gender
(``lo`` → ``la``) or number (``lo`` → ``li``) and nothing else. Phenomena: ``article gender``, ``article number``,
``adjective …``, ``verb …``; the distance is the number of words from the controlling noun to the agreeing word
(the subject's noun is the first noun of its clause). ``du`` / ``tre`` (the same for both genders, plural only)
are not flipped, nor are ``rapide`` / ``kalme`` (adverbs that are also feminine plural adjectives), to
or from.

Items are balanced per phenomenon: as many whose reference is masculine as feminine (singular as plural), so a
model that prefers one form regardless of context scores 50 %.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from adlnmt.analysis.contrastive import SuiteItem
from adlnmt.data import demo
from adlnmt.errors import UserError

Features = tuple[str, str]  # (gender, number)
FLIPS = {"gender": {"m": "f", "f": "m"}, "number": {"sg": "pl", "pl": "sg"}}
CONJUNCTIONS = {target for _, target in demo.CONJUNCTIONS}


@dataclass(frozen=True)
class Form:
    """One inflected target word: its category, the forms of its paradigm by features, and its own features."""

    category: str  # article, adjective, verb or noun
    paradigm: tuple[tuple[Features, str], ...]
    features: Features

    def flipped(self, feature: str) -> str | None:
        """The form with ``feature`` (gender or number) flipped, or None when the paradigm has no distinct one."""
        gender, number = self.features
        wanted = (FLIPS["gender"][gender], number) if feature == "gender" else (gender, FLIPS["number"][number])
        forms = dict(self.paradigm)
        flipped = forms.get(wanted)
        return None if flipped is None or flipped == forms[self.features] else flipped


def lexicon() -> dict[str, Form]:
    """Every inflected word of the demo target language → its :class:`Form`."""
    forms: dict[str, Form] = {}

    def add(category: str, paradigm: dict[Features, str]) -> None:
        ordered = tuple(sorted(paradigm.items()))
        words = list(paradigm.values())
        for features, word in paradigm.items():
            if words.count(word) > 1:  # du, tre: no gender
                continue
            if word in forms and forms[word].category != category:
                raise AssertionError(f"demo word {word!r} is ambiguous")
            forms.setdefault(word, Form(category, ordered, features))

    for _, _, table in demo.DETERMINERS:
        add("article", dict(table))
    for _, stem in demo.ADJECTIVES:
        add("adjective", {features: stem + ending for features, ending in demo.ADJECTIVE_ENDINGS.items()})
    for *_, stem in demo.TRANSITIVE + demo.INTRANSITIVE:
        for endings in demo.VERB_ENDINGS.values():
            add("verb", {features: stem + ending for features, ending in endings.items()})
    for _, _, singular, plural, gender in demo.ANIMATES + demo.THINGS + demo.PLACES:
        add("noun", {(gender, "sg"): singular, (gender, "pl"): plural})
    for _, adverb in demo.ADVERBS:  # rapide, kalme: also feminine plural adjectives
        forms.pop(adverb, None)
    return forms


LEXICON = lexicon()


def controller(words: Sequence[str], position: int, category: str) -> int | None:
    """The index of the noun the word at ``position`` agrees with: the next noun (articles), the previous noun
    (adjectives), or the first noun of the clause (verbs)."""
    is_noun = [LEXICON.get(word, None) is not None and LEXICON[word].category == "noun" for word in words]
    if category == "article":
        return next((i for i in range(position + 1, len(words)) if is_noun[i]), None)
    if category == "adjective":
        return next((i for i in range(position - 1, -1, -1) if is_noun[i]), None)
    start = max((i + 1 for i in range(position) if words[i] in CONJUNCTIONS), default=0)
    return next((i for i in range(start, position) if is_noun[i]), None)


def sentence_items(source: str, target: str) -> Iterator[SuiteItem]:
    """Every single-word agreement flip of one demo pair (target: capitalised, ending with a full stop)."""
    words = target.rstrip(".").split()
    lowered = [words[0].lower(), *words[1:]]
    for position, word in enumerate(lowered):
        form = LEXICON.get(word)
        if form is None or form.category == "noun":
            continue
        noun = controller(lowered, position, form.category)
        if noun is None or LEXICON[lowered[noun]].features != form.features:
            raise AssertionError(f"demo target {target!r}: {word!r} does not agree with its noun")
        for feature in FLIPS:
            flipped = form.flipped(feature)
            if flipped is None or flipped not in LEXICON:  # no such form, or an adverb's (rapide)
                continue
            variant = [*words[:position], flipped.capitalize() if position == 0 else flipped, *words[position + 1 :]]
            yield SuiteItem(
                source,
                target,
                [" ".join(variant) + "."],
                f"{form.category} {feature}",
                abs(position - noun),
                {"reference_form": form.features[0 if feature == "gender" else 1]},
            )


def demo_items(sources: Sequence[str], targets: Sequence[str], size: int | None = None, seed: int = 7
               ) -> list[SuiteItem]:  # fmt: skip
    """The flips of the demo pairs, balanced per phenomenon (equal counts of each reference form, drawn with
    ``random.Random(seed)``), then at most ``size`` items drawn evenly over the phenomena, in pair order; a UserError
    when ``size`` cannot hold one item of each form of each phenomenon found."""
    found = [(index, item) for index, (s, t) in enumerate(zip(sources, targets, strict=True))
             for item in sentence_items(s, t)]  # fmt: skip
    rng = random.Random(seed)
    groups: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for number, (_, item) in enumerate(found):
        groups[item.phenomenon][item.extra["reference_form"]].append(number)
    if size is not None and size < 2 * len(groups):
        raise UserError(f"--size {size}: a balanced suite of these pairs holds at least {2 * len(groups)} items (one "
                        f"of each form of each of its {len(groups)} phenomena)")  # fmt: skip
    per_phenomenon = None if size is None else size // max(1, len(groups))
    kept: list[int] = []
    for phenomenon in sorted(groups):
        forms = groups[phenomenon]
        each = min(len(members) for members in forms.values()) if len(forms) == 2 else 0
        if per_phenomenon is not None:
            each = min(each, per_phenomenon // 2)
        for form in sorted(forms):
            kept += rng.sample(forms[form], each)
    return [found[number][1] for number in sorted(kept)]


def demo_suite(size: int = 500, seed: int = 7) -> list[SuiteItem]:
    """A balanced suite of about ``size`` items from fresh demo pairs (``random.Random(seed)``)."""
    rng = random.Random(seed)
    pairs = [demo.generate_pair(rng) for _ in range(max(size, 50))]
    return demo_items([s for s, _ in pairs], [t for _, t in pairs], size, seed)
