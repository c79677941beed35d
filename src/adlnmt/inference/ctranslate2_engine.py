"""The CTranslate2 engine: ``ctranslate2.Translator`` on an export directory written by ``adlnmt export --format
ctranslate2`` (:mod:`adlnmt.export.ctranslate2_spec`). It needs neither PyTorch nor the model's layers, so that a
translation with ``--engine ctranslate2`` never imports PyTorch. A lexical shortlist (``--shortlist``) becomes
CTranslate2's vocabulary map (``use_vmap``). ``--workers N`` searches N batches at a time, each on one thread:
CTranslate2's ``inter_threads`` (replicas sharing the weights) with every batch submitted at once, in place of
``intra_threads`` threads splitting each operation (which do not pay on small batches: benchmarks/NOTES.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from adlnmt.data.vocab import BOS, PAD
from adlnmt.inference.batching import length_batches, length_limit
from adlnmt.inference.constraints import EncodedConstraints
from adlnmt.inference.engine import CAPABILITIES, Engine
from adlnmt.inference.options import Hypothesis, SearchOptions, length_penalty
from adlnmt.store import ExportDir

# CTranslate2 beam search with a non-zero length penalty stops a sentence once `beam` hypotheses have ended, the
# PyTorch engine's rule (with 0 it waits for the best candidate to end); score × length gives back the log-prob.
LENGTH_PENALTY = 1.0


class CTranslate2Engine(Engine):
    """``ctranslate2.Translator`` on a CTranslate2 export: CTranslate2 searches (greedy output equals the PyTorch
    engine's; beam search is CTranslate2's, with one length limit per batch, ranked by the GNMT length penalty)."""

    name = "ctranslate2"
    capabilities = CAPABILITIES[name]

    def __init__(self, export: ExportDir, threads: int, device: str = "cpu", compute_type: str | None = None,
                 workers: int = 1) -> None:  # fmt: skip
        """``device``: cpu or cuda; ``compute_type``: CTranslate2's (e.g. float32, bfloat16), else the export's;
        ``workers``: the replicas of the translator loaded now (the searches' ``--workers``)."""
        section = export.manifest["ctranslate2"]
        self.model_path = export.path / section["model"]
        self.settings = {"device": device, "compute_type": compute_type or section["compute_type"],
                         "intra_threads": max(1, threads), "inter_threads": 1}  # fmt: skip
        self.workers = max(1, workers)
        self.translator = self.load(workers=self.workers)
        self.other: tuple[tuple[str | None, int], Any] | None = None  # (shortlist, workers) → its translator
        self.src_vocab, self.tgt_vocab = export.data.src_vocab, export.data.tgt_vocab
        self.barred = [[self.tgt_vocab.piece(PAD)], [self.tgt_vocab.piece(BOS)]]
        # the export stores its decoder's position table with max_target_positions rows: outputs (and targets to
        # score) stop within them, as the PyTorch search stops within learned positions (CTranslate2 raises past it)
        self.max_output_len = export.max_target_positions - 1

    def length_limit(self, source_length: int, options: SearchOptions) -> int:
        """The most tokens (EOS not counted) the output of a source of ``source_length`` tokens may have: the search's
        rule (:func:`~adlnmt.inference.batching.length_limit`) within the export's position tables."""
        return min(length_limit(source_length, options), self.max_output_len)

    def load(self, vmap: str | None = None, workers: int = 1) -> Any:
        """``ctranslate2.Translator`` on the export's model; with ``vmap`` (the text of a vocabulary map), one that
        reads the model's files from memory beside it as ``vmap.txt`` (the export itself is never changed); with
        ``workers`` > 1, that many single-thread replicas."""
        import ctranslate2

        files = None
        if vmap is not None:
            from adlnmt.inference.shortlist import VMAP

            files = {p.name: p.read_bytes() for p in self.model_path.iterdir() if p.is_file() and p.name != VMAP}
            files[VMAP] = vmap.encode("utf-8")
        threads = {"intra_threads": 1, "inter_threads": workers} if workers > 1 else {}
        return ctranslate2.Translator(str(self.model_path), files=files, **{**self.settings, **threads})

    def translator_for(self, options: SearchOptions) -> Any:
        """The translator to search with: the one loaded with the engine, unless ``options`` ask for a shortlist (one
        with that shortlist as its vocabulary map) or another number of workers (one of that many replicas); such
        a one is made on the first search that asks for it (its loading counts in that search's time), and the
        last one made is kept."""
        key = (options.shortlist, max(1, options.workers))
        if key == (None, self.workers):
            return self.translator
        if self.other is None or self.other[0] != key:
            from adlnmt.inference.shortlist import load_shortlist, vmap_text  # numpy: imported only for a shortlist

            shortlist = load_shortlist(options.shortlist) if options.shortlist is not None else None
            vmap = vmap_text(shortlist, self.src_vocab, self.tgt_vocab) if shortlist is not None else None
            self.other = (key, self.load(vmap, key[1]))
        return self.other[1]

    def submit(self, sources: Sequence[Sequence[int]], options: SearchOptions) -> list[Any]:
        """One length-sorted batch handed to the translator, to be searched up to its longest sentence's length
        limit (:meth:`hypotheses` cuts each output to its own); a pending result per sentence. Beam search stops a
        sentence once ``beam`` hypotheses have ended, as the PyTorch search does (CTranslate2's rule with a non-zero
        length penalty)."""
        return self.translator_for(options).translate_batch(
            [self.src_vocab.pieces(s) for s in sources], beam_size=options.beam,
            num_hypotheses=options.beam, length_penalty=LENGTH_PENALTY,
            max_decoding_length=max(self.length_limit(len(s), options) for s in sources), min_decoding_length=0,
            suppress_sequences=self.barred, return_scores=True, use_vmap=options.shortlist is not None,
            asynchronous=True,
        )  # fmt: skip

    def hypotheses(self, sources: Sequence[Sequence[int]], results: list[Any], options: SearchOptions
                   ) -> list[list[Hypothesis]]:  # fmt: skip
        """The ranked hypotheses of one batch's results (:meth:`submit`): outputs cut to their own sentence's limit
        (exactly the PyTorch engine's greedy output, which ends there), their log-probabilities given back (a cut
        output's: its own, EOS at the limit included, as the PyTorch search forces it; :meth:`cut_log_probs`) and
        ranked by our GNMT length penalty: on the Multi30k model 999 of 1,000 beam-5 outputs equal the PyTorch
        engine's. Hypotheses that the cut makes equal are given once (an n-best list may then be shorter)."""
        limits = [self.length_limit(len(s), options) for s in sources]
        cut = self.cut_log_probs(sources, results, limits, options)
        found = []
        for row, (result, limit) in enumerate(zip(results, limits, strict=True)):
            hyps: dict[tuple[int, ...], Hypothesis] = {}
            for rank, (tokens, normalised) in enumerate(zip(result.hypotheses, result.scores, strict=True)):
                log_prob = cut.get((row, rank), normalised * (len(tokens) + 1) ** LENGTH_PENALTY)  # + 1: the EOS
                ids = self.tgt_vocab.ids(tokens[:limit])
                penalty = 1.0 if options.beam == 1 else length_penalty(len(ids) + 1, options.length_penalty)
                hyps.setdefault(tuple(ids), Hypothesis(ids, log_prob, log_prob / penalty))  # greedy: unnormalised
            found.append(sorted(hyps.values(), key=lambda h: h.score, reverse=True)[: options.nbest])
        return found

    def cut_log_probs(self, sources: Sequence[Sequence[int]], results: list[Any], limits: Sequence[int],
                      options: SearchOptions) -> dict[tuple[int, int], float]:  # fmt: skip
        """(row, rank) → the log-probability of each hypothesis longer than its sentence's limit, cut there and ended
        by EOS: CTranslate2's forced score of it (``score_batch``; with a shortlist, over the full vocabulary), as
        the batch's one length limit let CTranslate2 run on past the sentence's own."""
        cut = [(row, rank) for row, (result, limit) in enumerate(zip(results, limits, strict=True))
               for rank, tokens in enumerate(result.hypotheses) if len(tokens) > limit]  # fmt: skip
        if not cut:
            return {}
        scored = self.translator_for(options).score_batch(
            [self.src_vocab.pieces(sources[row]) for row, _ in cut],
            [results[row].hypotheses[rank][: limits[row]] for row, rank in cut],
        )
        return {key: float(sum(result.log_probs)) for key, result in zip(cut, scored, strict=True)}

    def translate_ids(
        self,
        sources: Sequence[Sequence[int]],
        options: SearchOptions,
        prefixes: Sequence[Sequence[int]] | None = None,
        constraints: Sequence[EncodedConstraints | None] | None = None,
    ) -> list[list[Hypothesis]]:
        """Like :func:`~adlnmt.inference.search.translate_ids`, on the same length-sorted batches."""
        self.check(options, prefixes is not None and any(prefixes), constraints is not None and any(constraints))
        results: list[list[Hypothesis]] = [[] for _ in sources]
        batches = list(length_batches([len(s) for s in sources], options.batch_size))
        # every batch handed over at once: with --workers N, the translator searches N of them at a time
        pending = [self.submit([sources[i] for i in rows], options) for rows in batches]
        for rows, found in zip(batches, pending, strict=True):
            batch = [sources[i] for i in rows]
            for row, hyps in zip(rows, self.hypotheses(batch, [r.result() for r in found], options), strict=True):
                results[row] = hyps
        return results
