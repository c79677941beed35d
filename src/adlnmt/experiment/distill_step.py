"""A grid's distillation step: the ``distill:`` section names a variant and seed whose trained model teaches, and
the variants marked ``distilled: true`` (students) train on its translations of the training source (sequence-level
knowledge distillation, :mod:`adlnmt.distill.kd`) instead of the references (docs/experiments.md, Grid format).

    distill: {teacher: Transformer, seed: 1, checkpoint: best, beam: 5}
    variants:
      - {name: Transformer, preset: transformer-postnorm}
      - {name: 5-1 SSRU (KD), preset: student-10-2-ssru, distilled: true}

A student's data is a :class:`~adlnmt.experiment.grid.DataSpec` with its ``distill`` step set: its directory
``data/distilled-<teacher>-seed-<n>`` is written by the step (:mod:`adlnmt.experiment.distill_runs`) once the teacher
has trained, and its runs' fingerprints cover the step and the teacher's training fingerprint, so a student of
another teacher, checkpoint or search is another run.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from adlnmt.distill.kd import CHUNK_SIZE, SEARCH_KEYS
from adlnmt.experiment.schema import Reader, show
from adlnmt.flags import bounds_of
from adlnmt.inference.options import SearchOptions

CHECKPOINTS = ("best", "last", "averaged")
STEP_KEYS = ("teacher", "seed", "checkpoint", "chunk_size", *SEARCH_KEYS)
SEARCH_KINDS: dict[str, type] = {"beam": int, "batch_size": int, "length_penalty": float, "max_len_ratio": float,
                                 "max_len_extra": int}  # fmt: skip


@dataclass(frozen=True)
class DistillStep:
    """The teacher (a variant and one of the grid's seeds), the checkpoint that teaches and how it searches."""

    teacher: str  # the variant's name
    teacher_slug: str
    seed: int
    checkpoint: str = "best"
    search: tuple[tuple[str, Any], ...] = ()  # SearchOptions fields that differ from the default (beam 5)
    chunk_size: int = CHUNK_SIZE

    @property
    def key(self) -> str:
        """The distilled data's directory name under the grid's ``data/``."""
        return f"distilled-{self.teacher_slug}-seed-{self.seed}"

    def options(self) -> SearchOptions:
        return SearchOptions(**dict(self.search))

    def identity(self) -> dict[str, Any]:
        """What the students' results depend on besides the teacher's training (their fingerprints' share)."""
        options = self.options()
        search = {key: getattr(options, key) for key in SEARCH_KEYS}
        return {"teacher": self.teacher, "seed": self.seed, "checkpoint": self.checkpoint, "search": search,
                "chunk_size": self.chunk_size}  # fmt: skip


def read_step(reader: Reader, value: Any, names: dict[str, str], seeds: tuple[int, ...]) -> DistillStep | None:
    """The ``distill`` section (None when absent); ``names``: variant name → directory name."""
    if value is None:
        return None
    block = reader.mapping(value, "distill", STEP_KEYS)
    if "teacher" not in block:
        reader.fail("distill", "missing 'teacher' (the variant whose trained model translates the training source)")
    teacher = reader.name(block["teacher"], "distill.teacher")
    if teacher not in names:
        reader.unknown("distill.teacher", teacher, list(names), "variant")
    seed = reader.typed(block.get("seed", seeds[0]), int, "distill.seed")
    if seed not in seeds:
        reader.fail("distill.seed", f"{seed} is not one of the grid's seeds {list(seeds)} (the teacher's run)")
    checkpoint = block.get("checkpoint", "best")
    if checkpoint not in CHECKPOINTS:
        reader.fail("distill.checkpoint", f"expected one of {', '.join(CHECKPOINTS)}, got {show(checkpoint)}")
    search = {key: reader.typed(block[key], SEARCH_KINDS[key], f"distill.{key}") for key in SEARCH_KEYS if key in block}
    for f in fields(SearchOptions):
        if f.name in search and (bounds := bounds_of(f)) is not None and not bounds.holds(search[f.name]):
            reader.fail(f"distill.{f.name}", bounds.refusal(search[f.name]))
    chunk_size = reader.typed(block.get("chunk_size", CHUNK_SIZE), int, "distill.chunk_size")
    if chunk_size < 1:
        reader.fail("distill.chunk_size", f"must be at least 1, got {chunk_size}")
    return DistillStep(teacher, names[teacher], seed, checkpoint, tuple(sorted(search.items())), chunk_size)


def students(reader: Reader, raw_variants: list[Any], step: DistillStep | None) -> set[str]:
    """The names of the variants marked ``distilled: true`` (checked against the step)."""
    found = set()
    for i, block in enumerate(raw_variants):
        if not isinstance(block, dict) or "distilled" not in block:
            continue
        where = f"variants[{i}] ({block.get('name')!r}).distilled"
        if not reader.typed(block["distilled"], bool, where):
            continue
        if step is None:
            reader.fail(where, "a distilled variant needs the grid's 'distill' section (its teacher)")
        if block.get("name") == step.teacher:
            reader.fail(where, "the teacher trains on the references, not on its own translations")
        if block.get("data") is not None:
            reader.fail(where, "a student trains on the teacher's data; its own 'data' options would change it")
        found.add(str(block.get("name")))
    return found
