"""An English subject–verb agreement suite, built by rule from reference translations (no tagger).

For each reference the rule finds the subject at the start of the sentence and the first finite present-tense
(or ``was`` / ``were``) verb after it, and makes one contrastive variant that flips the verb's number: ``is`` ↔
``are``, ``was`` ↔ ``were``, ``has`` ↔ ``have``, ``does`` ↔ ``do``, and a lexical verb's third-person ``-s`` ↔ its
bare form (``stands`` ↔ ``stand``, ``watches`` ↔ ``watch``, ``carries`` ↔ ``carry``). The distance is the number of
words from the subject's head noun to the verb (punctuation does not count; adjacent words are 1 apart).

The rule, and what it skips (it skips rather than guesses):

- Subject: the sentence starts with a determiner or numeral (``a``, ``the``, ``two``, ``his`` …), a noun, or
  the pronoun ``he`` / ``she`` / ``it`` / ``they``; its noun phrase runs to the first preposition, comma,
  relative pronoun, ``-ing`` word, ``-ly`` adverb, participle (``dressed in``) or verb, and its head is its last
  word. The number comes from the determiner (``a``, ``one``, ``this`` … singular; ``two``, ``several``,
  ``these`` … plural) and the head's form (irregular plurals ``men``, ``women``, ``children``, ``people`` …; an
  ``-s`` that is not ``-ss`` / ``-us`` / ``-is`` …). Skipped: the two disagree; the head is a collective noun
  (``group``, ``crowd``, ``couple`` …) whose verb may be singular or plural, or looks like the verb itself; the
  noun phrase goes on after a comma (``a long-haired, tall man``); the sentence starts otherwise (``There``, a
  preposition, a participle …).
- Verb: the first word after the head that is ``is`` / ``are`` / ``was`` / ``were`` / ``has`` / ``have`` /
  ``does`` / ``do``, or a lexical verb: a word whose ``-ing`` form occurs in the references (or in the extra
  lexicon texts), not after a determiner, preposition, numeral or possessive, and followed by a word that can
  follow a verb (a determiner, preposition, particle, pronoun, ``-ly`` adverb, or the sentence's end). More than
  one word after the head, a lexical verb must also be followed by a word, and not be used as a noun (after a
  determiner) twice or more in the lexicon texts: fragments without a finite verb are common in captions.
  Skipped when ``and`` / ``or`` / ``but`` / a subordinating conjunction / a pronoun / a modal / a colon,
  semicolon or quote comes first (a coordinated subject, another clause, or no finite verb), when a relative
  pronoun comes after a nearer noun, or when the verb's number is not the subject's.

The precision of the rule on Multi30k, checked by hand, is in ``experiments/contrastive/README.md``.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from adlnmt.analysis.contrastive import SuiteItem

PHENOMENON = "subject-verb agreement"
WORD = re.compile(r"[A-Za-z]+(?:[-'][A-Za-z]+)*|\d+(?:[.,]\d+)*|[^\sA-Za-z\d]")
AUXILIARIES = {"is": "are", "was": "were", "has": "have", "does": "do"}  # singular → plural
PLURAL_AUXILIARIES = {plural: singular for singular, plural in AUXILIARIES.items()}
SINGULAR_DETERMINERS = {"a", "an", "one", "this", "that", "each", "every", "another", "either", "neither"}
PLURAL_DETERMINERS = {"two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
                      "several", "many", "these", "those", "both", "few", "multiple", "various", "numerous",
                      "dozens", "hundreds", "thousands"}  # fmt: skip
OPEN_DETERMINERS = {"the", "his", "her", "its", "their", "our", "my", "your", "some", "all", "no", "any", "other"}
PRONOUNS = {"he": "sg", "she": "sg", "it": "sg", "they": "pl"}
PREPOSITIONS = {"in", "on", "at", "of", "with", "by", "from", "for", "into", "onto", "near", "under", "over",
                "behind", "beside", "between", "among", "through", "across", "along", "around", "against", "about",
                "above", "below", "beneath", "inside", "outside", "toward", "towards", "to", "up", "down", "off",
                "out", "past", "after", "before", "during", "without", "within", "while", "as", "like", "next",
                "alongside", "atop", "upon", "underneath", "amongst", "amid", "amidst", "beyond", "via",
                "than"}  # fmt: skip
SENTENCE_ENDS = {".", "!", "?"}
RELATIVES = {"who", "that", "which", "whose", "whom", "where", "when"}
STOPS = {"and", "or", "but", "nor", "&", ":", ";", '"', "(", ")", "can", "could", "will", "would", "shall",
         "should", "may", "might", "must", "am", "i", "you", "we", "there", "as", "while", "whilst", "because", "if",
         "since", "although", "though", "until", "unless", "whereas", "so"}  # fmt: skip
PARTICLES = {"away", "back", "together", "again", "here", "there", "high", "hard", "fast", "very", "so", "too",
             "something", "someone", "somebody", "everything", "nothing", "him", "her", "them", "it", "himself",
             "herself", "themselves", "itself", "what", "how", "where", "one", "ahead", "home", "forward",
             "straight", "alone", "outdoors", "indoors", "upstairs", "downstairs", "nearby", "well", "not"}  # fmt: skip
IRREGULAR_PLURALS = {"men", "women", "children", "people", "feet", "teeth", "geese", "mice", "oxen", "persons",
                     "folks", "firemen", "policemen", "fishermen", "gentlemen", "businessmen", "workmen",
                     "sportsmen", "cattle", "police"}  # fmt: skip
NOUN_MARKERS = (SINGULAR_DETERMINERS | PLURAL_DETERMINERS | OPEN_DETERMINERS | PREPOSITIONS) - {"that"}
CLOSED_CLASS = NOUN_MARKERS | PARTICLES | RELATIVES | set(AUXILIARIES) | set(PLURAL_AUXILIARIES) | {"that"}
NOUN_USES = 2  # a lexical verb candidate more than one word after the head is refused with this many noun uses
LY_NOUNS = {"family", "butterfly", "dragonfly", "fly", "lily", "belly", "rally", "jelly", "bully", "assembly",
            "supply", "ally", "holly", "italy", "kelly", "molly", "polly", "sally", "emily", "billy"}  # fmt: skip
SINGULAR_S = ("ss", "us", "is", "ics", "ous", "'s")
COLLECTIVES = {"group", "crowd", "team", "couple", "pair", "family", "band", "number", "lot", "bunch", "herd",
               "flock", "audience", "class", "staff", "crew", "majority", "variety", "line", "set", "row",
               "orchestra", "choir", "troupe", "squad", "gang", "army", "dozen", "handful", "sort", "kind", "type",
               "series", "species", "sheep", "deer", "fish", "pack", "swarm", "litter", "mob", "parade",
               "congregation", "committee", "panel", "jury", "public", "company", "troop", "unit", "cast",
               "ensemble", "duo", "trio", "quartet", "party", "rest", "none", "all", "most", "half", "some",
               "everyone", "everybody", "anyone", "nobody", "somebody", "someone", "something"}  # fmt: skip


@dataclass(frozen=True)
class Token:
    text: str
    start: int
    end: int

    @property
    def lower(self) -> str:
        return self.text.lower()

    @property
    def is_word(self) -> bool:
        return self.text[0].isalnum()


def tokenize(sentence: str) -> list[Token]:
    return [Token(match.group(), match.start(), match.end()) for match in WORD.finditer(sentence)]


@dataclass
class Lexicon:
    """What the rule reads from English text: the ``-ing`` words (which tell verbs) and how often each word
    follows a determiner (a noun use: ``the stands``, ``a fight``)."""

    ings: set[str] = field(default_factory=set)
    noun_uses: Counter[str] = field(default_factory=Counter)

    def add(self, texts: Iterable[str]) -> None:
        determiners = SINGULAR_DETERMINERS | PLURAL_DETERMINERS | OPEN_DETERMINERS
        for text in texts:
            words = [token.lower for token in tokenize(text)]
            self.ings.update(word for word in words if word.endswith("ing") and word.isalpha())
            self.noun_uses.update(word for before, word in itertools.pairwise(words) if before in determiners)


def base_has_ing(base: str, ings: set[str]) -> bool:
    """Whether the bare verb ``base`` has its ``-ing`` form in ``ings`` (rid·ing, sitt·ing, play·ing)."""
    if len(base) < 2:
        return False
    forms = {base + "ing", base[:-1] + "ing" if base.endswith("e") else "", base + base[-1] + "ing"}
    return bool(forms & ings)


def third_person(base: str) -> str:
    """The third-person singular of a regular bare verb."""
    if base.endswith(("s", "sh", "ch", "x", "z", "o")):
        return base + "es"
    if base.endswith("y") and len(base) > 1 and base[-2] not in "aeiou":
        return base[:-1] + "ies"
    return base + "s"


def bare_forms(word: str) -> list[str]:
    """The bare verbs whose third-person singular is ``word``."""
    if word.endswith("ies"):
        base = word[:-3] + "y"
    elif word.endswith(("sses", "shes", "ches", "xes", "zzes", "oes")):
        base = word[:-2]
    elif word.endswith("s") and not word.endswith("ss"):
        base = word[:-1]
    else:
        return []
    return [base] if third_person(base) == word else []


def lexical_verb(word: str, ings: set[str]) -> tuple[str, str] | None:
    """(number, flipped form) when ``word`` (lower case) is a present-tense lexical verb by the ``-ing`` test:
    ("sg", bare) for a third-person ``-s`` form, ("pl", third person) for a bare form; else None."""
    if word in CLOSED_CLASS:
        return None
    for base in bare_forms(word):
        if base_has_ing(base, ings):
            return "sg", base
    if not word.endswith("s") and base_has_ing(word, ings) and not word.endswith("ing"):
        return "pl", third_person(word)
    return None


def adverb(word: str) -> bool:
    return word.endswith("ly") and word not in LY_NOUNS


def participle_or_modifier(words: Sequence[str]) -> bool:
    """Whether ``words`` (one word, or none) can start a modifier of the subject after a comma."""
    return bool(words) and (words[0].endswith(("ing", "ed")) or words[0] in PREPOSITIONS or words[0] in RELATIVES)


def noun_number(word: str) -> str | None:
    """sg / pl by the form of a head noun (lower case); None for collectives and quantities."""
    if word in COLLECTIVES:
        return None
    if word in IRREGULAR_PLURALS:
        return "pl"
    if word.endswith("s") and not word.endswith(SINGULAR_S) and len(word) > 3:
        return "pl"
    return "sg"


def follows_verb(token: Token | None) -> bool:
    """Whether ``token`` (None: the end) is a word that can follow a finite verb."""
    if token is None or not token.is_word:
        return token is None or token.text in SENTENCE_ENDS
    word = token.lower
    determiners = SINGULAR_DETERMINERS | PLURAL_DETERMINERS | OPEN_DETERMINERS
    return word in determiners or word in PREPOSITIONS or word in PARTICLES or adverb(word) or word.isdigit()


@dataclass(frozen=True)
class Agreement:
    """A subject head and the verb that agrees with it, by token index, with the verb's flipped form."""

    head: int
    verb: int
    flipped: str
    distance: int


def subject(tokens: Sequence[Token], lexicon: Lexicon) -> tuple[int, str] | None:
    """(index of the head, sg | pl) of the sentence-initial subject, or None when the rule cannot decide."""
    words = [token.lower for token in tokens]
    if not words or not tokens[0].is_word:
        return None
    first = words[0]
    if first in PRONOUNS:
        return 0, PRONOUNS[first]
    if first in STOPS or first in PREPOSITIONS or first in RELATIVES or first.endswith(("ing", "ed")) or adverb(first):
        return None
    by_determiner = ("sg" if first in SINGULAR_DETERMINERS else "pl" if first in PLURAL_DETERMINERS
                     else "pl" if first.isdigit() and first != "1" else None)  # fmt: skip
    start = 1 if by_determiner is not None or first in OPEN_DETERMINERS or first == "1" else 0
    end = start
    while end < len(words):
        word = words[end]
        if not tokens[end].is_word or word in CLOSED_CLASS or word in STOPS or word.endswith("ing") or adverb(word):
            break
        following = tokens[end + 1] if end + 1 < len(tokens) else None
        if end > start and lexical_verb(word, lexicon.ings) and follows_verb(following):
            break
        if end > start and word.endswith("ed") and following is not None and following.lower in NOUN_MARKERS:
            break  # a participle: "a boy dressed in red"
        end += 1
    if end == start:
        return None
    if end < len(words) and words[end] == "," and not participle_or_modifier(words[end + 1 : end + 2]):
        return None  # "a long-haired, male musician": the noun phrase goes on after the comma
    head = end - 1
    if lexical_verb(words[head], lexicon.ings) and lexicon.noun_uses[words[head]] < NOUN_USES:
        return None  # "the spelunker finds water during ...": the head looks like the verb
    by_form = noun_number(words[head])
    if by_form is None or (by_determiner is not None and by_determiner != by_form):
        return None
    return head, by_form


def find_agreement(sentence: str, lexicon: Lexicon) -> Agreement | None:
    """The subject head and first finite verb of an English sentence, or None when the rule cannot decide."""
    tokens = tokenize(sentence)
    found = subject(tokens, lexicon)
    if found is None:
        return None
    head, number = found
    words = [token.lower for token in tokens]
    for index in range(head + 1, len(tokens)):
        word = words[index]
        if word in STOPS or word in PRONOUNS or (word in RELATIVES and index > head + 1):
            return None  # a coordination, another clause, or a relative clause of a nearer noun
        distance = sum(1 for token in tokens[head + 1 : index + 1] if token.is_word)
        if word in AUXILIARIES or word in PLURAL_AUXILIARIES:
            verb_number, flipped = (
                ("sg", AUXILIARIES[word]) if word in AUXILIARIES else ("pl", PLURAL_AUXILIARIES[word])
            )
        else:
            lexical = lexical_verb(word, lexicon.ings) if tokens[index].is_word else None
            before = words[index - 1]
            after = tokens[index + 1] if index + 1 < len(tokens) else None
            if lexical is None or before in NOUN_MARKERS or before.endswith("'s") or before.isdigit():
                continue
            if not follows_verb(after) or (
                distance > 1 and (lexicon.noun_uses[word] >= NOUN_USES or after is None or not after.is_word)
            ):
                continue  # far from the head, a noun use or the sentence's end makes a fragment likelier
            verb_number, flipped = lexical
        if verb_number != number:
            return None
        return Agreement(head, index, flipped, distance)
    return None


def flip(sentence: str, token: Token, flipped: str) -> str:
    """``sentence`` with ``token`` replaced by ``flipped`` (capitalised like it)."""
    text = flipped.capitalize() if token.text[0].isupper() else flipped
    return sentence[: token.start] + text + sentence[token.end :]


def agreement_suite(
    sources: Sequence[str], references: Sequence[str], lexicon_texts: Sequence[Iterable[str]] = ()
) -> list[SuiteItem]:
    """One item per reference whose subject and verb the rule finds (see the module docstring), in order; each
    item records its ``line`` (1-based), the ``subject`` head and the ``verb``. The lexicon is read from the
    references and ``lexicon_texts``."""
    lexicon = Lexicon()
    for texts in (references, *lexicon_texts):
        lexicon.add(texts)
    items = []
    for number, (source, reference) in enumerate(zip(sources, references, strict=True), start=1):
        found = find_agreement(reference, lexicon)
        if found is None:
            continue
        tokens = tokenize(reference)
        verb = tokens[found.verb]
        extra = {"line": number, "subject": tokens[found.head].text, "verb": verb.text}
        items.append(
            SuiteItem(source, reference, [flip(reference, verb, found.flipped)], PHENOMENON, found.distance, extra)
        )
    return items
