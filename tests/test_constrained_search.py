"""Lexically constrained search (dynamic beam allocation) on tiny untrained models of every decoder family: every
hypothesis contains its include phrases and none of its exclude phrases, constraints stay with their sentences under
length-sorted batching, no constraints is exactly the plain search, and the translator, ensemble and CLI paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from adlnmt.cli import main
from adlnmt.data.data_dir import DataDir
from adlnmt.errors import UserError
from adlnmt.inference.constraints import Constraints, EncodedConstraints, occurrences, unmet
from adlnmt.inference.ensemble import Ensemble
from adlnmt.inference.options import SearchOptions
from adlnmt.inference.search import translate_ids
from adlnmt.inference.translator import Translator
from adlnmt.model import ModelConfig, Seq2Seq

ENCODER = "pos -> repeat(1, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm"
DECODERS = {
    "transformer": "pos -> repeat(2, res_nd(mh_dot_self_att) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm",
    "rnn": "pos -> rnn -> res_nd(mh_dot_src_att) -> res_nd(ffl) -> norm",
    "cnn": "pos -> repeat(2, res_nd(cnn(act=relu)) -> res_nd(mh_dot_src_att)) -> norm",
    "aan": "pos -> res(aan) -> norm -> res(mh_dot_src_att) -> norm",
    "none": "pos -> res_nd(mh_dot_src_att) -> res_nd(ffl) -> norm",
    "comet": "pos -> res_d(mh_dot_src_att) -> norm -> res(comet_conv(norm=layer)) -> norm",
}
VOCAB = 40
SOURCES = [[5, 6, 7, 8, 9, 3], [10, 11, 3], [12, 13, 14, 15, 3], [16, 3], [17, 18, 19, 20, 21, 22, 23, 3]]
# 0, 1 and 3 include phrases, and exclusions, on sentences of different lengths (sorted into other batch orders)
LINES = [
    EncodedConstraints(((30, 31),)),
    None,
    EncodedConstraints(((32,), (33, 34, 35), (36,)), ((20,),)),
    EncodedConstraints((), ((24,), (25, 26))),
    EncodedConstraints(((37, 38), (30,)), ((4,),)),
]


def tiny(decoder: str, seed: int = 0) -> Seq2Seq:
    torch.manual_seed(seed)
    return Seq2Seq(ModelConfig(ENCODER, decoder, VOCAB, VOCAB, d_model=16, heads=2)).eval()


def holds(tokens: list[int], line: EncodedConstraints | None) -> bool:
    """Every include phrase in ``tokens`` (as often as given) and no exclude phrase."""
    if line is None:
        return True
    return not unmet(tokens, line.include) and all(occurrences(tokens, phrase) == 0 for phrase in line.exclude)


def tokens(found: list) -> list[list[list[int]]]:
    return [[h.tokens for h in hyps] for hyps in found]


@pytest.mark.parametrize("family", list(DECODERS))
@pytest.mark.parametrize("beam", [1, 5])
def test_every_family_meets_includes_and_avoids_excludes(family: str, beam: int) -> None:
    model = tiny(DECODERS[family])
    options = SearchOptions(beam=beam, nbest=min(beam, 3), batch_size=2)
    found = translate_ids(model, SOURCES, options, constraints=LINES)
    for hyps, line in zip(found, LINES, strict=True):
        assert hyps and all(holds(h.tokens, line) for h in hyps)
    plain = translate_ids(model, SOURCES, options)
    assert tokens(found)[1] == tokens(plain)[1]  # the line without constraints: the plain search's output
    assert found[1][0].score == pytest.approx(plain[1][0].score, abs=1e-4)


def test_without_constraints_the_output_is_the_plain_search() -> None:
    model = tiny(DECODERS["transformer"])
    for beam in (1, 4):
        options = SearchOptions(beam=beam, nbest=beam)
        plain = translate_ids(model, SOURCES, options)
        for none in (None, [None] * len(SOURCES), [EncodedConstraints()] * len(SOURCES)):
            same = translate_ids(model, SOURCES, options, constraints=none)
            assert [[(h.tokens, h.log_prob, h.score) for h in hyps] for hyps in same] == [
                [(h.tokens, h.log_prob, h.score) for h in hyps] for hyps in plain
            ]


def test_lines_without_constraints_in_a_constrained_batch_keep_their_translation() -> None:
    model = tiny(DECODERS["rnn"], seed=3)
    options = SearchOptions(beam=4, nbest=2)
    plain = translate_ids(model, SOURCES, options)
    only_one = [None, None, LINES[2], None, None]
    found = translate_ids(model, SOURCES, options, constraints=only_one)
    for i, (got, want) in enumerate(zip(found, plain, strict=True)):
        if i != 2:
            assert [h.tokens for h in got] == [h.tokens for h in want]
            assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-5)


@pytest.mark.parametrize("batch_size", [1, 2, 64])
def test_constraints_stay_with_their_sentences_under_length_sorting(batch_size: int) -> None:
    """Sentences of different lengths are searched in length order; each keeps its own constraints whatever the
    batch composition (fairseq#3279)."""
    model = tiny(DECODERS["cnn"], seed=1)
    options = SearchOptions(beam=4, batch_size=batch_size)
    found = translate_ids(model, SOURCES, options, constraints=LINES)
    for hyps, line in zip(found, LINES, strict=True):
        assert holds(hyps[0].tokens, line)
    reordered = [4, 2, 0, 3, 1]  # the same sentences in another order: each result follows its sentence
    again = translate_ids(model, [SOURCES[i] for i in reordered], options, constraints=[LINES[i] for i in reordered])
    assert tokens(again) == [tokens(found)[i] for i in reordered]


@pytest.mark.parametrize("family", ["transformer", "cnn"])
def test_constrained_search_cached_equals_refeeding_the_prefix(family: str) -> None:
    model = tiny(DECODERS[family], seed=4)
    cached = translate_ids(model, SOURCES, SearchOptions(beam=3, nbest=2), constraints=LINES)
    refed = translate_ids(model, SOURCES, SearchOptions(beam=3, nbest=2, incremental=False), constraints=LINES)
    assert tokens(cached) == tokens(refed)


def test_an_ensemble_meets_the_constraints_too() -> None:
    ensemble = Ensemble([tiny(DECODERS["transformer"], 0), tiny(DECODERS["rnn"], 1)])
    found = ensemble.translate_ids(SOURCES, SearchOptions(beam=4, nbest=2), constraints=LINES)
    for hyps, line in zip(found, LINES, strict=True):
        assert hyps and all(holds(h.tokens, line) for h in hyps)


def test_a_prefix_and_constraints_together() -> None:
    model = tiny(DECODERS["aan"])
    prefixes = [[29, 28]] * len(SOURCES)
    found = translate_ids(model, SOURCES, SearchOptions(beam=4), prefixes=prefixes, constraints=LINES)
    for hyps, line in zip(found, LINES, strict=True):
        assert hyps[0].tokens[:2] == [29, 28] and holds(hyps[0].tokens, line)


def test_the_length_limit_grows_by_the_include_tokens() -> None:
    model = tiny(DECODERS["transformer"])
    long_phrase = tuple(range(4, 30))  # 26 tokens for a 2-token source with a limit of 1·2 + 0
    options = SearchOptions(beam=3, max_len_ratio=1.0, max_len_extra=0)
    found = translate_ids(model, [[10, 3]], options, constraints=[EncodedConstraints((long_phrase,))])
    assert holds(found[0][0].tokens, EncodedConstraints((long_phrase,)))
    assert len(found[0][0].tokens) <= 2 + len(long_phrase)


def test_an_include_phrase_that_cannot_be_met_falls_back_to_the_search_without_it() -> None:
    """Including 7 8 while excluding 8 cannot be met: the line is translated without its include phrases, its
    exclusions kept."""
    model = tiny(DECODERS["rnn"])
    line = EncodedConstraints(((7, 8),), ((8,),))
    found = translate_ids(model, [[10, 11, 3]], SearchOptions(beam=3), constraints=[line])
    plain = translate_ids(model, [[10, 11, 3]], SearchOptions(beam=3), constraints=[line.without_include()])
    assert tokens(found) == tokens(plain) and 8 not in found[0][0].tokens


def test_sampling_with_constraints_is_refused() -> None:
    with pytest.raises(UserError, match="lexical constraints need beam or greedy search"):
        translate_ids(tiny(DECODERS["rnn"]), SOURCES, SearchOptions(sampling="topk:3"), constraints=LINES)


@pytest.fixture(scope="module")
def translator(demo_data: Path) -> Translator:
    data = DataDir.load(demo_data / "data")
    torch.manual_seed(2)
    config = ModelConfig(ENCODER, DECODERS["transformer"], data.src_vocab.size, data.tgt_vocab.size, d_model=16,
                         heads=2)  # fmt: skip
    return Translator(Seq2Seq(config), data, 64)


def test_the_translator_encodes_phrases_as_target_text(translator: Translator, capsys) -> None:
    lines = ["The dog sees a cat.", "", "A king sleeps."]
    constraints = [Constraints(("Lo kane",), ("un",)), Constraints(("Lo",)), None]
    found = translator.search(lines, SearchOptions(beam=4), constraints=constraints)
    vocab = translator.data.tgt_vocab
    assert found[1] == []
    assert occurrences(vocab.ids(found[0][0].pieces), vocab.encode("Lo kane")) >= 1
    assert occurrences(vocab.ids(found[0][0].pieces), vocab.encode("un")) == 0
    # the include phrase of the empty line 2 has no translation to go into: said, not dropped in silence
    assert capsys.readouterr().err == (
        "warning: input line 2: include phrase(s) 'Lo' not used, as the line is empty (an empty line gets an empty "
        "translation)\n"
    )


def test_include_phrases_on_an_empty_line_are_warned_of_not_dropped(translator: Translator, capsys) -> None:
    """An empty (or blank) line gets an empty translation, which cannot hold its include phrases: a warning names
    the line and the phrases, as for a prefix on an empty line; its exclusions alone need none."""
    lines = ["A king sleeps.", "  ", ""]
    constraints = [None, Constraints(("Lo kane", "un")), Constraints((), ("Lo",))]
    found = translator.search(lines, SearchOptions(beam=3), constraints=constraints)
    assert found[1] == [] and found[2] == []
    assert capsys.readouterr().err == (
        "warning: input line 2: include phrase(s) 'Lo kane', 'un' not used, as the line is empty (an empty line gets "
        "an empty translation)\n"
    )


def test_the_translator_warns_per_line_when_a_phrase_cannot_be_spelled_or_met(translator: Translator, capsys) -> None:
    vocab = translator.data.tgt_vocab
    assert occurrences(vocab.encode("Lo kane"), vocab.encode("kane")) == 1  # excluding it bars the include phrase
    lines = ["The dog sees a cat.", "A king sleeps."]
    constraints = [Constraints(("Ωψ",)), Constraints(("Lo kane",), ("kane",))]
    found = translator.search(lines, SearchOptions(beam=3), constraints=constraints)
    err = capsys.readouterr().err
    assert "warning: input line 1: include phrase(s) 'Ωψ' cannot be spelled by the target vocabulary" in err
    assert "warning: input line 2: include phrase 'Lo kane' cannot be met (it holds the exclude phrase 'kane');" in err
    assert all(hyps for hyps in found) and occurrences(vocab.ids(found[1][0].pieces), vocab.encode("kane")) == 0


def test_translate_constraints_flag_and_its_errors(demo_data: Path, tmp_path: Path, capsys) -> None:
    model_dir = tmp_path / "model"
    argv = ["train", "--data", str(demo_data / "data"), "--model", str(model_dir), "--encoder", ENCODER,
            "--decoder", DECODERS["rnn"], "--d-model", "16", "--heads", "2", "--max-updates", "3",
            "--no-valid-bleu", "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    source, constraints = tmp_path / "in.txt", tmp_path / "c.jsonl"
    source.write_text("The dog sees a cat.\nA king sleeps.\nThe cat.\n", encoding="utf-8")
    records = [{"include": ["Lo kane"]}, {}, {"include": ["un", "kane"], "exclude": ["Lo"]}]
    constraints.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    translate = ["translate", "--model", str(model_dir), "--input", str(source), "--constraints", str(constraints)]
    assert main([*translate, "--nbest", "2"]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    vocab = DataDir.load(demo_data / "data").tgt_vocab
    pieces = [[vocab.ids(h["pieces"]) for h in record["hypotheses"]] for record in out]
    assert occurrences(pieces[0][0], vocab.encode("Lo kane")) >= 1
    assert all(holds(h, EncodedConstraints((tuple(vocab.encode("un")), tuple(vocab.encode("kane"))),
                                           (tuple(vocab.encode("Lo")),))) for h in pieces[2])  # fmt: skip
    constraints.write_text('{"include": ["Lo"]}\n{}\n', encoding="utf-8")
    assert main(translate) == 2
    assert f"{constraints}: 2 lines of constraints for 3 input lines" in capsys.readouterr().err
    constraints.write_text('{}\n{"include": ["Lo"}\n{}\n', encoding="utf-8")
    assert main(translate) == 2
    assert f"{constraints}:2: malformed JSON" in capsys.readouterr().err
    assert main([*translate[:5], "--sampling", "topk:3", "--constraints", str(constraints)]) == 2
    assert "--constraints needs beam or greedy search" in capsys.readouterr().err


def test_one_string_for_a_list_of_sentences_is_a_type_error(translator: Translator) -> None:
    """``t.translate("Ein Hund läuft.")`` would search each character as a sentence and return one translation per
    character, in silence: a string where a list of sentences goes is refused (lines, prefixes, forced scoring)."""
    from adlnmt.analysis.forced import PairScorer

    with pytest.raises(TypeError, match=r"lines: give a list of sentences, not one string \(one sentence: \['A k"):
        translator.translate("A king sleeps.")
    with pytest.raises(TypeError, match="prefixes: give a list of sentences, not one string"):
        translator.search(["A king sleeps."], SearchOptions(beam=2), prefixes="Lo")
    with pytest.raises(TypeError, match="targets: give a list of sentences, not one string"):
        PairScorer(translator).score(["A king sleeps."], "Lo rey")
    assert len(translator.translate(["A king sleeps."])) == 1
