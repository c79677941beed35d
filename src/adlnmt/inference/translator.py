"""Load a trained model directory and translate raw text: the Python API behind `adlnmt translate`.

PyTorch is imported only where the torch engine needs it: a translator on a CTranslate2 export runs on
sentencepiece and CTranslate2 alone. A model directory runs on the torch engine; the export engines run an export
of it (``adlnmt export``), never one made on the fly."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from adlnmt.data.language_codes import SourceEncoder
from adlnmt.data.vocab import tag_text
from adlnmt.devices import check_cpu_count, checked_device
from adlnmt.errors import UserError
from adlnmt.inference.constraints import Constraints, EncodedConstraints, encode_constraints, occurrences, unmet
from adlnmt.inference.engine import CAPABILITIES, PRECISIONS, Engine
from adlnmt.inference.options import DEFAULT_OPTIONS, SearchOptions, sampling_rule
from adlnmt.memory import available_memory
from adlnmt.store import ExportDir, ModelDir, is_export_dir

if TYPE_CHECKING:
    from adlnmt.data.data_dir import DataDir
    from adlnmt.model import Seq2Seq


@dataclass(frozen=True)
class EncodedLine:
    """An input line as the encoder reads it: ``ids`` (cut to the model's input limit, with its markers and EOS)
    and ``pieces``, how many subword pieces the line has before the cut."""

    ids: list[int]
    pieces: int


def search_rows(options: SearchOptions, sentences: int) -> int:
    """The most rows a batch of the search of ``sentences`` has: ``beam`` per sentence; sampling: ``nbest`` samples
    per sentence, one row each."""
    if options.sampling:
        return min(options.batch_size, sentences * options.nbest)
    return min(options.batch_size, sentences) * options.beam


def search_bytes(options: SearchOptions, vocab_size: int, sentences: int) -> int:
    """Bytes the scores of one search step of ``sentences`` take at most: a batch's rows (:func:`search_rows`) of
    ``vocab_size`` float32 log-probabilities, held about three times (log-probabilities, hypothesis scores, the top-k
    candidates)."""
    return 3 * 4 * search_rows(options, sentences) * vocab_size


def output_bytes(options: SearchOptions, sentences: int, longest_source: int) -> float:
    """Bytes a batch's hypotheses hold at the longest output the length flags allow, ``max_len_ratio · S +
    max_len_extra`` tokens for the longest source of S tokens: at least each token's id (int64) in every row, and
    with ``alignments`` a float32 per source token. A lower bound (the decoder's own state grows with it too), as a
    float: absurd flags (``--max-len-ratio 1e30``) give a number, not an overflow."""
    longest_output = options.max_len_ratio * longest_source + options.max_len_extra
    per_token = 8 + (4 * longest_source if options.alignments else 0)
    return float(search_rows(options, sentences)) * longest_output * per_token


def with_precision(model: Seq2Seq, precision: str, device: str) -> Seq2Seq:
    """The model in inference ``precision`` (see :meth:`Translator.load`)."""
    import torch
    from torch import nn

    on_cuda = device.startswith("cuda")
    if precision not in PRECISIONS:
        raise UserError(f"unknown precision '{precision}'; choose one of {', '.join(PRECISIONS)}")
    if (precision == "fp16" and not on_cuda) or (precision == "int8" and on_cuda):
        raise UserError(f"precision {precision} needs {'a CUDA device' if precision == 'fp16' else 'the CPU'}")
    if precision in ("bf16", "fp16"):
        return model.to(torch.bfloat16 if precision == "bf16" else torch.float16)
    if precision == "int8":
        with warnings.catch_warnings():  # deprecated in favour of torchao (not a dependency); still works
            warnings.simplefilter("ignore", UserWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            from torch.ao.quantization import quantize_dynamic

            return quantize_dynamic(model, {nn.Linear, nn.LSTM, nn.GRU}, dtype=torch.qint8)
    return model


@dataclass
class Translation:
    """One hypothesis: detokenised text, its subword pieces, scores and (optionally) alignment."""

    text: str
    pieces: list[str]
    score: float  # log_prob / GNMT length penalty
    log_prob: float
    alignment: list[list[float]] | None = None  # [len(pieces) + 1 (EOS)][source pieces + markers + EOS]

    def to_dict(self) -> dict:
        record = {"translation": self.text, "score": self.score, "log_prob": self.log_prob, "pieces": self.pieces}
        if self.alignment is not None:
            record["alignment"] = self.alignment
        return record


def not_one_string(value: object, name: str) -> None:
    """A TypeError when ``value``, meant as a list of sentences, is one string: iterated, it would be one sentence
    per character, searched and returned in silence."""
    if isinstance(value, str):
        raise TypeError(f"{name}: give a list of sentences, not one string (one sentence: [{value[:40]!r}])")


def hard_alignment(translation: Translation, first: int, count: int) -> str:
    """fairseq's ``--print-alignment`` of ``translation`` (which has an alignment): ``i-j`` pairs, space-separated,
    one per target piece j (0-based, EOS not counted) with i the source piece it attends to most (0-based among the
    ``count`` source pieces from column ``first``: markers and EOS not counted); no pairs for an empty source."""
    assert translation.alignment is not None
    if count < 1:
        return ""
    rows = translation.alignment[: len(translation.pieces)]
    pairs = []
    for j, row in enumerate(rows):
        source = row[first : first + count]
        pairs.append(f"{max(range(count), key=source.__getitem__)}-{j}")
    return " ".join(pairs)


ENGINE_PRECISIONS = {"fp32": "none", "int8": "int8"}  # --precision → the export's quantization


class Translator:
    """``Translator.load("model_dir").translate(["Ein Hund läuft."], SearchOptions(beam=5))`` → detokenised
    strings. ``engine`` searches: by default the torch engine on ``model``; another engine (an ensemble, an export
    engine) without a PyTorch ``model`` (:mod:`adlnmt.inference.engines`)."""

    def __init__(
        self,
        model: Seq2Seq | None,
        data: DataDir,
        max_input_len: int,
        device: str = "cpu",
        model_dir: Path | None = None,
        engine: Engine | None = None,
    ) -> None:
        self.model = None if model is None else model.eval()
        self.model_dir = model_dir
        self.data = data
        self.source_encoder = SourceEncoder(data.src_vocab)
        self.tags = data.src_vocab.tags()  # --target-tags
        self.max_input_len = max_input_len
        self.device = device
        if engine is None:
            from adlnmt.inference.search import TorchEngine

            assert self.model is not None, "a Translator needs a model or an engine"
            engine = TorchEngine(self.model, device)
        self.engine = engine

    @property
    def engine_name(self) -> str:
        return self.engine.name

    @classmethod
    def load(
        cls,
        model_dir: str | Path,
        checkpoint: str = "best",
        device: str = "cpu",
        precision: str | None = None,
        engine: str | None = None,
        options: SearchOptions = DEFAULT_OPTIONS,
        threads: int = 0,
    ) -> Translator:
        """``precision``: fp32 (None: fp32 for a model directory, an export as exported); bf16 or fp16 weights
        and activations (fp16: CUDA only); int8: dynamic int8 quantisation of every linear and recurrent layer (CPU
        only; activations stay fp32). ``checkpoint`` other than best with an export directory is a UserError.

        ``engine``: None (the directory's own: torch for a model directory, the export's engine for an export
        directory) | torch | onnxruntime | ctranslate2 | auto. A model directory runs on torch (auto says on stderr
        why, and when an export would run it on CTranslate2: :func:`adlnmt.inference.engines.auto_note`, which reads
        the ``options`` to be searched); an export engine given a model directory is a UserError naming the
        ``adlnmt export`` command to run first. ``model_dir`` may also be an export directory (:meth:`from_export`).
        ``threads``: CPU threads of the engine, 0 for its default (:func:`adlnmt.inference.engines.engine_threads`);
        the torch engine sets them process-wide (``torch.set_num_threads``). An export directory run by another
        engine is loaded without importing PyTorch."""
        from adlnmt.inference.engines import auto_note, check_model_dir_engine

        model_dir = Path(model_dir)
        if is_export_dir(model_dir):
            if checkpoint != "best":
                raise UserError(f"{model_dir} is an export directory: it holds the one checkpoint it was exported "
                                f"from; --checkpoint {checkpoint} is for model directories (adlnmt export --checkpoint "
                                f"{checkpoint} exports that one)")  # fmt: skip
            return cls.from_export(ExportDir.load(model_dir), engine or "auto", precision, threads, device,
                                   options.workers)  # fmt: skip
        precision = precision or "fp32"
        engine = engine or "torch"
        check_model_dir_engine(engine, model_dir)
        device = checked_device(device)
        check_cpu_count("--threads", threads)
        import torch

        if threads:
            torch.set_num_threads(threads)
        model, data, max_len = ModelDir(model_dir).load_model(checkpoint)
        if engine == "auto":
            print(f"engine auto: torch ({auto_note(model, model_dir, precision, device, options)})", file=sys.stderr)
        return cls(with_precision(model.to(device), precision, device), data, max_len, device, model_dir)

    @classmethod
    def from_export(
        cls,
        export: ExportDir,
        engine: str = "auto",
        precision: str | None = None,
        threads: int = 0,
        device: str = "cpu",
        workers: int = 1,
    ) -> Translator:
        """A translator on an export directory's engine (``engine``: the export's, or auto); ``precision``: None
        (as exported), or the export's own (int8 for an int8 export, fp32 for an unquantized one; anything else is a
        UserError, never silently ignored); ``threads`` as in :meth:`load`; ``device`` one the engine runs on;
        ``workers``: the batches its searches will run at a time (``--workers``: CTranslate2 loads that many
        replicas; another number later loads again)."""
        from adlnmt.inference.engines import check_export_engine, engine_threads, load_engine

        check_cpu_count("--threads", threads)
        wanted = check_export_engine(engine, export.path, export.format)
        capabilities = CAPABILITIES[wanted]
        if device.split(":")[0] not in capabilities.devices:
            raise UserError(f"engine {wanted} runs on {' or '.join(capabilities.devices)}, not {device}")
        quantize = export.manifest["quantize"]
        if precision is not None and (
            precision not in capabilities.precisions or ENGINE_PRECISIONS[precision] != quantize
        ):
            raise UserError(f"{export.path} is exported with quantization {quantize}; it cannot run in {precision} "
                            "(leave --precision out: it runs as exported)")  # fmt: skip
        runner = load_engine(export, engine_threads(threads), workers)
        max_input_len = export.max_input_len
        if (positions := export.manifest.get(export.format, {}).get("max_positions")) is not None:
            # the encoder's exported position table holds max_positions rows, a sinusoidal one's too: sources are cut
            # to them (markers and EOS take positions), or the engine raises past them
            max_input_len = max(1, min(max_input_len, int(positions) - 1 - int(export.data.source_markers)))
        return cls(None, export.data, max_input_len, "cpu", export.path, runner)

    def source_pieces(self, ids: Sequence[int]) -> list[str]:
        """The pieces of encoder input ``ids`` (:meth:`encode`'s: cut to the input limit, with markers and EOS)."""
        return [self.data.src_vocab.piece(i) for i in ids]

    def encode_line(self, line: str) -> EncodedLine:
        """``line`` as the encoder reads it (subword-encoded once; a multilingual MarianMT model's leading
        target-language code one piece: :mod:`adlnmt.data.language_codes`), with its length before the cut."""
        pieces = self.source_encoder(line)
        return EncodedLine(self.data.source_ids(pieces, self.max_input_len), len(pieces))

    def input_warning(self, line: EncodedLine, number: int) -> str | None:
        """The warning for input line ``number`` when it is longer than the model's input limit (it is cut to
        ``max_input_len`` pieces), else None."""
        if line.pieces > self.max_input_len:
            return f"input line {number}: {line.pieces} pieces truncated to {self.max_input_len}"
        return None

    def tag_warning(self, line: str, number: int) -> str | None:
        """The warning for input line ``number`` of a model trained with target-language tags when it starts with
        a tag the model lacks (``<2cs>`` for a model of ``<2en>`` and ``<2fr>``: read as text, so the output
        language is anyone's guess), else None."""
        head = line.lstrip().partition(" ")[0]
        if self.tags and tag_text(head) and head not in self.tags:
            return (f"input line {number}: {head} is not a language tag of this model (its tags: "
                    f"{', '.join(self.tags)}); it is read as text")  # fmt: skip
        return None

    def check(
        self,
        options: SearchOptions,
        prefix: bool = False,
        sentences: int | None = None,
        constraints: bool = False,
        longest_source: int = 0,
        beam_name: str = "--beam",
    ) -> None:
        """A UserError, before any search, for what the engine lacks (target prefixes, with ``prefix``; lexical
        constraints, with ``constraints``: :meth:`~adlnmt.inference.engine.Engine.check`), an output limit of 0
        tokens, constraints with sampling or beside a shortlist, a beam or a top-k sampling wider than the target
        vocabulary, and (given the number of ``sentences``) a search whose scores (:func:`search_bytes`) or, where no
        learned position table bounds the output (:attr:`max_target_len`), whose hypotheses at the longest output
        ``--max-len-ratio`` and ``--max-len-extra`` allow for sources of up to ``longest_source`` tokens
        (:func:`output_bytes`) would not fit in half the device's available memory. ``beam_name``: how the refusal of
        a beam names it (the flag; the server's request field, ``beam``)."""
        self.engine.check(options, prefix, constraints)
        if options.max_len_ratio == 0 and options.max_len_extra == 0:
            raise UserError("--max-len-ratio 0 --max-len-extra 0: every output would be empty (at most 0 tokens); "
                            "raise one of them")  # fmt: skip
        if constraints and options.sampling:
            raise UserError("--constraints needs beam or greedy search, not --sampling")
        if constraints and options.shortlist is not None:
            raise UserError("--constraints with --shortlist: the constrained search runs over the full vocabulary; "
                            "leave out one of them")  # fmt: skip
        vocab = self.data.tgt_vocab.size
        if options.sampling and (rule := sampling_rule(options.sampling))[0] == "topk" and rule[1] > vocab:
            raise UserError(f"--sampling {options.sampling}: K exceeds the target vocabulary ({vocab:,} pieces); use "
                            f"K <= {vocab:,} (topk:{vocab} samples from the whole vocabulary)")  # fmt: skip
        if not options.sampling and options.beam > vocab:
            raise UserError(f"{beam_name} {options.beam}: wider than the target vocabulary ({vocab:,} pieces); a beam "
                            f"of at most {vocab:,} hypotheses can tell them apart")  # fmt: skip
        if sentences is None:
            return
        need, available = search_bytes(options, vocab, sentences), available_memory(self.device)
        if available is not None and need > available // 2:
            raise UserError(f"--beam {options.beam} --batch-size {options.batch_size}: the search's scores alone "
                            f"would take about {need / 2**30:,.1f} GiB, more than half of the {available / 2**30:,.1f} "
                            f"GiB available on {self.device}; lower --beam or --batch-size")  # fmt: skip
        outputs = output_bytes(options, sentences, longest_source)
        if available is not None and self.max_target_len is None and outputs > available // 2:
            tokens = options.max_len_ratio * longest_source + options.max_len_extra
            raise UserError(f"--max-len-ratio {options.max_len_ratio:g} --max-len-extra {options.max_len_extra}: "
                            f"outputs of up to {f'{tokens:,.0f}' if tokens < 1e12 else f'{tokens:.3g}'} tokens (for "
                            f"a source of {longest_source:,}) would take at least {outputs / 2**30:,.3g} "
                            f"GiB for --beam {options.beam} --batch-size {options.batch_size}, more than half of the "
                            f"{available / 2**30:,.1f} GiB available on {self.device}; lower --max-len-ratio or "
                            "--max-len-extra")  # fmt: skip

    @property
    def max_target_len(self) -> int | None:
        """The most target pieces (a prefix, a target to score; EOS not counted) the model reads: its
        ``max_output_len`` (None: no bound)."""
        return self.engine.max_output_len

    def target_warning(self, ids: list[int], number: int, what: str = "target prefix") -> str | None:
        """The warning for target pieces ``ids`` of line ``number`` longer than :attr:`max_target_len` (which
        :meth:`cut_target` cuts them to), None when they fit."""
        limit = self.max_target_len
        if limit is None or len(ids) <= limit:
            return None
        return f"{what} line {number}: {len(ids)} pieces truncated to {limit}"

    def cut_target(self, ids: list[int], number: int, what: str = "target prefix") -> list[int]:
        """Target pieces ``ids`` of line ``number`` cut to :attr:`max_target_len`, with :meth:`target_warning` on
        stderr when cut: the length rule of sources (:meth:`encode`) for the target side."""
        if warning := self.target_warning(ids, number, what):
            print(f"warning: {warning}", file=sys.stderr)
            return ids[: self.max_target_len]
        return ids

    def encode(self, line: str, number: int) -> list[int]:
        """The encoder's ids of input line ``number``, with a warning on stderr when it is cut."""
        encoded = self.encode_line(line)
        for warning in (self.tag_warning(line, number), self.input_warning(encoded, number)):
            if warning:
                print(f"warning: {warning}", file=sys.stderr)
        return encoded.ids

    def search(
        self,
        lines: Sequence[str],
        options: SearchOptions = DEFAULT_OPTIONS,
        prefixes: Sequence[str] | None = None,
        constraints: Sequence[Constraints | None] | None = None,
    ) -> list[list[Translation]]:
        """``options.nbest`` translations per input line, best first (samples: in the order drawn), in input order;
        an empty line gets none. ``prefixes[i]`` (target text) starts every translation of line i; ``constraints[i]``
        are its lexical constraints (phrases to include and to exclude), with a warning on stderr for each line whose
        include phrases cannot be met (it is translated without them). A UserError for what the engine lacks
        (:meth:`~adlnmt.inference.engine.Engine.check`)."""
        not_one_string(lines, "lines")
        not_one_string(prefixes, "prefixes")
        sources = [self.encode(line, number) if line.strip() else None for number, line in enumerate(lines, 1)]
        encoded_constraints, warnings_before = self.encode_constraints(constraints)
        found = self.search_encoded(sources, options, prefixes, encoded_constraints)
        for warning in warnings_before + self.unmet_warnings(encoded_constraints, found):
            print(f"warning: {warning}", file=sys.stderr)
        return found

    def encode_constraints(
        self, constraints: Sequence[Constraints | None] | None, first: int = 1
    ) -> tuple[list[EncodedConstraints | None] | None, list[str]]:
        """Each line's constraints through the target sentencepiece model (:func:`encode_constraints`), and a
        warning for each line (numbered from ``first``) with include phrases the vocabulary cannot spell (they are
        left out)."""
        if constraints is None:
            return None, []
        encoded: list[EncodedConstraints | None] = []
        warnings: list[str] = []
        for number, line in enumerate(constraints, first):
            if not line:
                encoded.append(None)
                continue
            ids, unspellable = encode_constraints(line, self.data.tgt_vocab)
            encoded.append(ids)
            if unspellable:
                phrases = ", ".join(map(repr, unspellable))
                warnings.append(f"input line {number}: include phrase(s) {phrases} cannot be spelled by the target "
                                "vocabulary (unknown pieces); translated without them")  # fmt: skip
        return encoded, warnings

    def unmet_warnings(
        self, constraints: Sequence[EncodedConstraints | None] | None, found: Sequence[list[Translation]],
        first: int = 1,
    ) -> list[str]:  # fmt: skip
        """A warning for each include phrase the best translation of its line (numbered from ``first``) lacks: the
        phrase holds one of the line's exclude phrases, or the search could not meet it within the length limit, and
        the line was translated without its include phrases; one for an empty line's, as it has no translation."""
        warnings: list[str] = []
        vocab = self.data.tgt_vocab
        for number, (line, hyps) in enumerate(zip(constraints or [], found, strict=False), first):
            if not line or not line.include:
                continue
            if not hyps:  # only an empty line gets no translation
                phrases = ", ".join(repr(vocab.decode(phrase)) for phrase in line.include)
                warnings.append(f"input line {number}: include phrase(s) {phrases} not used, as the line is empty "
                                "(an empty line gets an empty translation)")  # fmt: skip
                continue
            for index in unmet(vocab.ids(hyps[0].pieces), line.include):
                phrase = line.include[index]
                barring = [vocab.decode(bar) for bar in line.exclude if occurrences(phrase, bar)]
                why = f"it holds the exclude phrase {barring[0]!r}" if barring else "not within the length limit"
                warnings.append(f"input line {number}: include phrase {vocab.decode(phrase)!r} cannot be met ({why}); "
                                "translated without the include phrases")  # fmt: skip
        return warnings

    def search_encoded(
        self,
        encoded: Sequence[list[int] | None],
        options: SearchOptions = DEFAULT_OPTIONS,
        prefixes: Sequence[str] | None = None,
        constraints: Sequence[EncodedConstraints | None] | None = None,
    ) -> list[list[Translation]]:
        """:meth:`search` for lines already encoded (:meth:`encode_line`'s ``ids``; None for an empty line, which
        gets no translation; ``constraints`` from :meth:`encode_constraints`); it warns only of prefixes cut to
        :attr:`max_target_len`."""
        if prefixes is not None and len(prefixes) != len(encoded):
            raise UserError(f"{len(prefixes)} target prefixes for {len(encoded)} input lines: need one per line")
        if constraints is not None and len(constraints) != len(encoded):
            raise UserError(f"{len(constraints)} lines of constraints for {len(encoded)} input lines: need one per "
                            "line")  # fmt: skip
        rows = [i for i, ids in enumerate(encoded) if ids is not None]
        sources = [ids for ids in encoded if ids is not None]
        encode = self.data.tgt_vocab.encode
        forced = None if prefixes is None else [self.cut_target(encode(prefixes[i]), i + 1) for i in rows]
        forced = forced if forced is not None and any(forced) else None  # empty prefixes: plain search
        lexical = None if constraints is None else [constraints[i] for i in rows]
        lexical = lexical if lexical is not None and any(lexical) else None  # no constraints: plain search
        longest = max(map(len, sources), default=0)
        self.check(options, forced is not None, len(sources), lexical is not None, longest)
        if options.shortlist is not None:
            from adlnmt.inference.shortlist import load_shortlist

            load_shortlist(options.shortlist).check_vocabularies(self.data, options.shortlist)
        found = self.engine.translate_ids(sources, options, forced, lexical)
        results: list[list[Translation]] = [[] for _ in encoded]
        vocab = self.data.tgt_vocab
        for row, hyps in zip(rows, found, strict=True):
            results[row] = [
                Translation(
                    vocab.decode(h.tokens),
                    [vocab.piece(t) for t in h.tokens],
                    h.score,
                    h.log_prob,
                    None if h.alignment is None else h.alignment.tolist(),
                )
                for h in hyps
            ]
        return results

    def translate(self, lines: Sequence[str], options: SearchOptions = DEFAULT_OPTIONS) -> list[str]:
        """One detokenised translation per input line, in order; an empty line gives an empty line."""
        found = self.search(lines, options)
        return [hyps[0].text if hyps else "" for hyps in found]
