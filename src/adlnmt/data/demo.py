"""A deterministic toy language pair (English-like → an invented language) on which attention matters.

The target language differs from the source in ways a model must learn from context:

* word order: the verb goes to the end of its clause (SVO → SOV), adjectives follow their noun (two adjectives are
  mirrored), an adverb moves right after the subject, a prepositional phrase moves before the verb;
* agreement: every noun has a grammatical gender that the source never shows; articles, adjectives and verbs agree in
  gender and number with their noun / subject (``the`` → ``lo la li le``, ``big`` → ``grando granda grandi grande``,
  ``sees`` → ``videt videta viden videna``), also in the past tense where the source verb shows no number;
* negation: ``does not see`` → ``ne videt`` (before the verb).

Sentences have 3–20 source words: optional adjectives, adverbs, prepositional phrases, negation and a second clause
joined by a conjunction. Only ``random.Random(seed)`` is used, so the same seed gives byte-identical files.
"""

from __future__ import annotations

import random
import shutil
import stat
from collections.abc import Sequence
from hashlib import blake2b
from pathlib import Path

from adlnmt.atomic import atomic_text_streams
from adlnmt.errors import UserError
from adlnmt.memory import available_memory

# What a pair costs, rounded up: its two lines on disk (99.96 bytes on average, measured on 440,000 pairs of seed 1),
# and the generator's memory: the pairs are written as they are generated, and each source is kept as a hash in a
# table of 10.7-21.3 bytes a pair (_SeenSources; 17.8 bytes a pair measured on 1,100,000 pairs, the resident memory
# above that of a run of 101 pairs). It held every pair and the set of sources until it wrote, ~510 bytes a pair.
PAIR_DISK_BYTES = 100
PAIR_MEMORY_BYTES = 24
WRITE_PAIRS = 10_000  # pairs generated, then written, at a time

# Nouns: source singular, source plural, target singular, target plural, gender ("m" / "f").
ANIMATES = [
    ("cat", "cats", "gato", "gatos", "m"),
    ("dog", "dogs", "kane", "kanes", "m"),
    ("bird", "birds", "avi", "avis", "f"),
    ("horse", "horses", "kavalo", "kavalos", "m"),
    ("man", "men", "omo", "omos", "m"),
    ("woman", "women", "fema", "femas", "f"),
    ("child", "children", "nino", "ninos", "m"),
    ("teacher", "teachers", "mestra", "mestras", "f"),
    ("farmer", "farmers", "kampen", "kampenen", "m"),
    ("king", "kings", "rey", "reyes", "m"),
    ("queen", "queens", "regina", "reginas", "f"),
    ("girl", "girls", "pupa", "pupas", "f"),
]
THINGS = [
    ("apple", "apples", "poma", "pomas", "m"),
    ("book", "books", "libro", "libros", "m"),
    ("letter", "letters", "karta", "kartas", "f"),
    ("ball", "balls", "pila", "pilas", "f"),
    ("song", "songs", "kanto", "kantos", "m"),
    ("flower", "flowers", "flor", "floren", "f"),
    ("stone", "stones", "petra", "petras", "f"),
    ("hat", "hats", "kapelo", "kapelos", "m"),
    ("key", "keys", "klave", "klaves", "f"),
]
PLACES = [
    ("house", "houses", "kasa", "kasas", "f"),
    ("garden", "gardens", "jardin", "jardinen", "m"),
    ("city", "cities", "urbe", "urbes", "f"),
    ("river", "rivers", "flumen", "flumenen", "f"),
    ("tree", "trees", "arbor", "arboren", "m"),
    ("table", "tables", "mensa", "mensas", "f"),
    ("boat", "boats", "barka", "barkas", "f"),
    ("car", "cars", "auto", "autos", "m"),
    ("window", "windows", "fenestra", "fenestras", "f"),
    ("bridge", "bridges", "ponte", "pontes", "m"),
]
# Adjectives: source, target stem (+ o / a / i / e for masculine / feminine singular / plural).
ADJECTIVES = [
    ("big", "grand"),
    ("small", "pikol"),
    ("red", "rub"),
    ("green", "verd"),
    ("old", "vek"),
    ("young", "jov"),
    ("happy", "felik"),
    ("tall", "alt"),
    ("quiet", "kalm"),
    ("fast", "rapid"),
    ("black", "negr"),
    ("white", "blank"),
    ("beautiful", "bel"),
    ("strange", "strang"),
]
ADJECTIVE_ENDINGS = {("m", "sg"): "o", ("f", "sg"): "a", ("m", "pl"): "i", ("f", "pl"): "e"}
# Determiners: source singular, source plural, target forms by (gender, number).
DETERMINERS = [
    ("the", "the", {("m", "sg"): "lo", ("f", "sg"): "la", ("m", "pl"): "li", ("f", "pl"): "le"}),
    ("a", "some", {("m", "sg"): "un", ("f", "sg"): "una", ("m", "pl"): "uni", ("f", "pl"): "une"}),
    ("this", "these", {("m", "sg"): "esto", ("f", "sg"): "esta", ("m", "pl"): "esti", ("f", "pl"): "este"}),
    (None, "two", {("m", "pl"): "du", ("f", "pl"): "du"}),
    (None, "three", {("m", "pl"): "tre", ("f", "pl"): "tre"}),
]
DETERMINER_WEIGHTS = [6, 3, 2, 1, 1]
# Verbs: source 3rd singular present, plural present (= bare form), past, target stem.
TRANSITIVE = [
    ("sees", "see", "saw", "vid"),
    ("likes", "like", "liked", "am"),
    ("finds", "find", "found", "trov"),
    ("carries", "carry", "carried", "port"),
    ("follows", "follow", "followed", "sekw"),
    ("watches", "watch", "watched", "spekt"),
    ("paints", "paint", "painted", "pint"),
    ("opens", "open", "opened", "aper"),
    ("builds", "build", "built", "konstru"),
    ("wants", "want", "wanted", "vol"),
    ("helps", "help", "helped", "ajut"),
    ("throws", "throw", "threw", "jet"),
]
INTRANSITIVE = [
    ("sleeps", "sleep", "slept", "dorm"),
    ("runs", "run", "ran", "kur"),
    ("sings", "sing", "sang", "kant"),
    ("waits", "wait", "waited", "atend"),
    ("laughs", "laugh", "laughed", "rid"),
    ("swims", "swim", "swam", "nat"),
]
# Verb endings by tense, then (gender, number) of the subject.
VERB_ENDINGS = {
    "present": {("m", "sg"): "et", ("f", "sg"): "eta", ("m", "pl"): "en", ("f", "pl"): "ena"},
    "past": {("m", "sg"): "it", ("f", "sg"): "ita", ("m", "pl"): "in", ("f", "pl"): "ina"},
}
ADVERBS = [
    ("quickly", "rapide"),
    ("slowly", "lente"),
    ("often", "ofte"),
    ("quietly", "kalme"),
    ("again", "ankor"),
    ("today", "oje"),
    ("yesterday", "jeri"),
]
PREPOSITIONS = [("in", "en"), ("near", "prope"), ("under", "sub"), ("behind", "dop"), ("with", "kon"), ("on", "sur")]
CONJUNCTIONS = [("and", "e"), ("but", "ma"), ("because", "porke"), ("while", "dum")]
NEGATION = "ne"
MAX_WORDS = 20

_Phrase = tuple[list[str], list[str]]


_Noun = tuple[str, str, str, str, str]


def _noun_phrase(rng: random.Random, nouns: list[_Noun]) -> tuple[list[str], list[str], str, str]:
    """A determiner, 0–2 adjectives and a noun: (source words, target words, gender, number)."""
    src_sg, src_pl, tgt_sg, tgt_pl, gender = rng.choice(nouns)
    number = rng.choice(("sg", "pl"))
    det_sg, det_pl, det_tgt = rng.choices(DETERMINERS, weights=DETERMINER_WEIGHTS)[0]
    if number == "sg" and det_sg is None:  # "two" / "three" are plural only
        det_sg, det_tgt = DETERMINERS[0][0], DETERMINERS[0][2]
    n_adj = rng.choices((0, 1, 2), weights=(11, 7, 2))[0]
    adjectives = rng.sample(ADJECTIVES, n_adj)
    src_words = [a for a, _ in adjectives] + [src_sg if number == "sg" else src_pl]
    determiner = det_sg if number == "sg" else det_pl
    if determiner == "a" and src_words[0][0] in "aeiou":
        determiner = "an"
    ending = ADJECTIVE_ENDINGS[gender, number]
    tgt_words = [
        det_tgt[gender, number],
        tgt_sg if number == "sg" else tgt_pl,
        *(stem + ending for _, stem in reversed(adjectives)),
    ]
    return [determiner, *src_words], tgt_words, gender, number


def _clause(rng: random.Random) -> _Phrase:
    """One clause: subject, optional negation, verb, optional object, prepositional phrase and adverb."""
    subj_src, subj_tgt, gender, number = _noun_phrase(rng, ANIMATES)
    transitive = rng.random() < 0.65
    sg_form, pl_form, past_form, stem = rng.choice(TRANSITIVE if transitive else INTRANSITIVE)
    tense = "past" if rng.random() < 0.4 else "present"
    adverb = rng.choice(ADVERBS) if rng.random() < 0.25 else None
    if adverb is not None and adverb[0] == "yesterday":
        tense = "past"
    elif adverb is not None and adverb[0] == "today" and tense == "past":
        adverb = None
    negated = rng.random() < 0.12
    if negated:
        auxiliary = "did" if tense == "past" else ("does" if number == "sg" else "do")
        verb_src = [auxiliary, "not", pl_form]
    else:
        verb_src = [past_form if tense == "past" else (sg_form if number == "sg" else pl_form)]
    verb_tgt = [NEGATION] if negated else []
    verb_tgt.append(stem + VERB_ENDINGS[tense][gender, number])
    obj_src, obj_tgt = [], []
    if transitive:
        obj_src, obj_tgt, _, _ = _noun_phrase(rng, ANIMATES + THINGS)
    pp_src, pp_tgt = [], []
    if rng.random() < 0.3:
        prep_src, prep_tgt = rng.choice(PREPOSITIONS)
        np_src, np_tgt, _, _ = _noun_phrase(rng, PLACES)
        pp_src, pp_tgt = [prep_src, *np_src], [prep_tgt, *np_tgt]
    adv_src = [adverb[0]] if adverb else []
    adv_tgt = [adverb[1]] if adverb else []
    src = subj_src + verb_src + obj_src + pp_src + adv_src
    tgt = subj_tgt + adv_tgt + obj_tgt + pp_tgt + verb_tgt
    return src, tgt


def generate_pair(rng: random.Random) -> tuple[str, str]:
    """One sentence pair of at most ``MAX_WORDS`` source words, capitalised and ending with a full stop."""
    while True:
        src, tgt = _clause(rng)
        if rng.random() < 0.25:
            conj_src, conj_tgt = rng.choice(CONJUNCTIONS)
            src2, tgt2 = _clause(rng)
            src, tgt = [*src, conj_src, *src2], [*tgt, conj_tgt, *tgt2]
        if len(src) <= MAX_WORDS:
            break
    return _sentence(src), _sentence(tgt)


def _sentence(words: list[str]) -> str:
    text = " ".join(words) + "."
    return text[0].upper() + text[1:]


def split_sizes(size: int) -> dict[str, int]:
    """The pairs of each split of a corpus of ``size`` training pairs: ``max(size // 20, 50)`` valid and test."""
    held_out = max(size // 20, 50)
    return {"train": size, "valid": held_out, "test": held_out}


def check_room(out_dir: str | Path, size: int, replaced: Sequence[Path] = ()) -> None:
    """UserError naming ``--size`` when the corpus of ``size`` training pairs would not fit: its files in the free
    disk space under ``out_dir`` (its nearest existing folder), or its generator in the available memory (where that
    can be told). A huge ``--size`` otherwise filled the disk (or memory) beside whatever else runs on the machine.
    Files it replaces (``--overwrite``, ``replaced``) are not counted as room: they stay until the new ones are
    complete and renamed over them (:func:`~adlnmt.atomic.atomic_text_streams`), so the free space must hold the new
    files in full; where removing them first would make room, the message says so."""
    pairs = sum(split_sizes(size).values())
    folder = Path(out_dir).absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    need, free = pairs * PAIR_DISK_BYTES, shutil.disk_usage(folder).free
    if need > free:
        freed = _freed_by_removing(replaced, folder)
        remove = (f", or remove the old corpus in {out_dir} first (its files take {freed / 2**30:,.1f} GiB; the new "
                  "one then fits)" if freed and need <= free + freed else "")  # fmt: skip
        raise UserError(f"--size {size:,}: the corpus ({pairs:,} pairs) would take about {need / 2**30:,.1f} GiB, "
                        f"more than the {free / 2**30:,.1f} GiB free on the disk of {folder}; "
                        f"lower --size{remove}")  # fmt: skip
    need, available = pairs * PAIR_MEMORY_BYTES, available_memory()
    if available is not None and need > available:
        raise UserError(f"--size {size:,}: generating the corpus ({pairs:,} pairs) would take about "
                        f"{need / 2**30:,.1f} GiB of memory, more than the {available / 2**30:,.1f} GiB available; "
                        "lower --size")  # fmt: skip


def _freed_by_removing(files: Sequence[Path], folder: Path) -> int:
    """The bytes that removing ``files`` would free on the disk of ``folder``: regular files there with no other
    name (a symbolic link or a hard-linked file frees its data elsewhere, or not at all)."""
    device, freed = folder.stat().st_dev, 0
    for path in files:
        try:
            status = path.lstat()
        except OSError:
            continue
        if stat.S_ISREG(status.st_mode) and status.st_nlink == 1 and status.st_dev == device:
            freed += status.st_size
    return freed


class _SeenSources:
    """The sources generated so far, as 64-bit hashes (BLAKE2b of the UTF-8 text) in a flat open-addressing table of
    ``capacity * 4 / 3`` to ``capacity * 8 / 3`` slots of 8 bytes, allocated at the start (10.7–21.3 bytes a source;
    a set of Python ints would take ~70, the strings ~100 more). Two distinct sources with the same hash would count
    as one: the later would be skipped as a duplicate, and the corpus would differ from one checked on the strings
    themselves. The chance that this happens anywhere in n sources is about n² / 2⁶⁵: 1 in 12,000 at ``--size``
    50,000,000 (55M pairs), 1 in 30 million at 1,000,000."""

    def __init__(self, capacity: int) -> None:
        slots = 1 << max(4, (4 * capacity // 3).bit_length())  # at most 3/4 full: linear probing stays short
        self._table = memoryview(bytearray(8 * slots)).cast("Q")
        self._mask = slots - 1

    def add(self, source: str) -> bool:
        """Record ``source``; False where it (or another with its hash) was recorded before."""
        key = int.from_bytes(blake2b(source.encode("utf-8"), digest_size=8).digest(), "little") or 1  # 0: empty slot
        table, mask = self._table, self._mask
        slot = key & mask
        while stored := table[slot]:
            if stored == key:
                return False
            slot = (slot + 1) & mask
        table[slot] = key
        return True


def write_demo_corpus(out_dir: str | Path, size: int = 12000, seed: int = 1) -> dict[str, int]:
    """Write ``train/valid/test.{src,tgt}`` (``size`` and ``max(size // 20, 50)`` pairs each) under ``out_dir``.

    Source sentences are unique across all splits (so no test sentence appears in train: see :class:`_SeenSources`);
    the same ``seed`` gives byte-identical files. The pairs are written as they are generated, ``WRITE_PAIRS`` at a
    time, to temporary files renamed into place once all six are complete (a failed write, e.g. on a full disk, names
    the file and keeps the previous corpus). Returns the number of pairs per split.
    """
    if size < 1:
        raise ValueError(f"size must be positive, got {size}")
    sizes = split_sizes(size)
    rng = random.Random(seed)
    seen = _SeenSources(sum(sizes.values()))
    out = Path(out_dir)
    paths = [out / f"{split}.{side}" for split in sizes for side in ("src", "tgt")]
    with atomic_text_streams(paths) as write:
        for index, count in enumerate(sizes.values()):
            while count > 0:
                sources, targets = [], []
                while len(sources) < min(count, WRITE_PAIRS):
                    src, tgt = generate_pair(rng)
                    if seen.add(src):
                        sources.append(src + "\n")
                        targets.append(tgt + "\n")
                write(2 * index, "".join(sources))
                write(2 * index + 1, "".join(targets))
                count -= len(sources)
    return sizes
