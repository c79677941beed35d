"""Grid files: validation errors name the file and the key; every shipped grid parses at every scale."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from adlnmt.cli import main
from adlnmt.errors import UserError
from adlnmt.experiment.grid import load_grid, scale_names, slugify
from adlnmt.experiment.worker import bucket_labels, bucket_of

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
SHIPPED = sorted(EXPERIMENTS.glob("*.yaml"))
ENCODER = "pos -> repeat(1, res_nd(mh_dot_self_att) -> res_nd(ffl)) -> norm"
DECODER = "pos -> repeat(1, res_nd(mh_dot_self_att) -> res_nd(mh_dot_src_att) -> res_nd(ffl)) -> norm"
RAW = {"train_src": "tr.src", "train_tgt": "tr.tgt", "valid_src": "va.src", "valid_tgt": "va.tgt"}  # to prepare


def base_grid() -> dict:
    return {
        "name": "g",
        "data": "data",
        "test": [{"name": "test", "src": "t.src", "ref": "t.tgt"}],
        "train": {"d_model": 32, "heads": 4, "max_updates": 5},
        "scales": {"small": {"train": {"max_updates": 2}}, "full": {}},
        "variants": [{"name": "a", "encoder": ENCODER, "decoder": DECODER}, {"name": "b", "preset": "transformer"}],
        "baseline": "a",
    }


def write(tmp_path: Path, grid: dict) -> Path:
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(grid, sort_keys=False), encoding="utf-8")
    return path


def error(tmp_path: Path, grid: dict, scale: str | None = None) -> str:
    path = write(tmp_path, grid)
    with pytest.raises(UserError) as caught:
        load_grid(path, scale)
    message = str(caught.value)
    assert message.startswith(str(path))
    return message


def test_a_valid_grid_resolves_scales_and_paths(tmp_path: Path) -> None:
    grid = base_grid()
    grid["variants"][1]["train"] = {"dropout": 0.3, "lr": "1e-3"}  # YAML 1.1 reads 1e-3 as a string
    grid["variants"][1]["scales"] = {"small": {"train": {"d_model": 64}}}
    path = write(tmp_path, grid)
    full, small = load_grid(path), load_grid(path, "small")
    assert full.scale == "full" and small.scale == "small"
    assert full.variant("a").train["max_updates"] == 5 and small.variant("a").train["max_updates"] == 2
    assert small.variant("b").train == {"d_model": 64, "heads": 4, "max_updates": 2, "dropout": 0.3, "lr": 1e-3,
                                        "preset": "transformer"}  # fmt: skip
    assert full.variant("b").train["d_model"] == 32
    assert full.tests[0].src == (tmp_path / "t.src").resolve()
    assert full.variants[0].data.prepared == (tmp_path / "data").resolve()
    assert full.translate["beam"] == 5 and full.metrics == ("bleu", "chrf") and full.seeds == (1,)


def test_a_variant_may_name_its_own_prepared_directory(tmp_path: Path) -> None:
    """Issue 65's multilingual example: bilingual rows beside a multilingual one, each on its own prepared data."""
    from adlnmt.experiment.runner import fingerprints

    grid = base_grid()
    grid["variants"].append({"name": "c", "preset": "transformer", "data": "other"})
    loaded = load_grid(write(tmp_path, grid))
    a, b, c = loaded.variants
    assert a.data == b.data and a.data.prepared == (tmp_path / "data").resolve()
    assert c.data.prepared == (tmp_path / "other").resolve() and c.data.key != a.data.key  # one data dir each
    same_model = [fingerprints(loaded, variant, 1)[0] for variant in (b, c)]  # b and c differ only in their data
    assert same_model[0] != same_model[1]
    grid["variants"][2]["data"] = ""
    assert "variants[2] ('c').data: expected a file path" in error(tmp_path, grid)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda g: g.update(variantz=[]), "variantz: unknown key (did you mean 'variants'?)"),
        (lambda g: g["train"].update(d_modle=8), "train.d_modle: unknown training option (did you mean 'd_model'?)"),
        (lambda g: g["train"].update(max_updates="ten"), "train.max_updates: expected int, got str 'ten'"),
        (lambda g: g["train"].update({"d-model": 64}), "train.d-model: 'd-model' and 'd_model' are one option"),
        (lambda g: g["train"].update(seed=3), "train.seed: set by the experiment (from 'seeds')"),
        (lambda g: g["train"].update(lr_schedule="cosine"), "train.lr_schedule: 'cosine' is not one of"),
        (lambda g: g["train"].update(preset="transformer"), "train.preset: the architecture belongs to a variant"),
        (lambda g: g["variants"][1].pop("preset"), "variants[1] ('b'): give either 'preset' or both 'encoder'"),
        (lambda g: g["variants"][0].pop("decoder"), "variants[0] ('a'): give either 'preset' or both"),
        (lambda g: g["variants"][0].pop("name"), "variants[0]: missing 'name'"),
        (lambda g: g["variants"][0].update(trian={}), "variants[0] ('a').trian: unknown key (did you mean 'train'?)"),
        (lambda g: g["variants"][1].update(name="a"), "variants[1] ('a') and variants[0] ('a') have the same name"),
        (lambda g: g.update(name=".."), "name: use only letters, digits, '.', '_' and '-', not dots alone"),  # the
        (lambda g: g.update(name="."), "name: use only letters, digits, '.', '_' and '-', not dots alone"),  # folder
        (lambda g: g["test"][0].update(name=".."), "test[0].name: '..' must be unique and use only letters"),  # above
        (lambda g: g["variants"][1].update(name="x,y"), "variants[1] ('x,y').name: no commas in a variant's name"),
        (  # issue 69 point 20: say why two names share a run folder
            lambda g: g["variants"][1].update(name="a\u00e9"),
            "variants[1] ('a\u00e9') and variants[0] ('a') have the same slug 'a' (a run folder keeps A-Z, a-z, "
            "0-9, '.' and '_' of a name, other characters become '-'): runs/a; rename one",
        ),
        (lambda g: g["variants"][1].update(preset="transformr"), "variants[1] ('b'): unknown preset 'transformr'"),
        (lambda g: g["variants"][0].update(encoder="pos -> nrom"), "variants[0] ('a'): ADL error in encoder"),
        (lambda g: g["variants"][1].update(train={"d_ff": 33}), "variants[1] ('b'): --d-ff (33) must be a multiple"),
        (lambda g: g["variants"][1].update(data={"vocab_size": 10}), "variants[1] ('b').data: per-variant prepare"),
        (lambda g: g.update(data={**RAW, "vocab_size": 3}), "data: vocabulary size 3 is too small"),  # as the run
        (lambda g: g.update(data={**RAW, "max_len": 0}), "data: max_len must be at least 1, got 0"),  # says it
        (
            lambda g: (g.update(data=RAW), g["variants"][1].update(data={"vocab_size": 4})),
            "variants[1] ('b').data: vocabulary size 4 is too small",
        ),
        (lambda g: g.update(baseline="c"), "baseline: unknown variant"),
        (lambda g: g.update(metrics=["bleu", "rouge"]), "metrics: unknown metric 'rouge'"),
        (lambda g: g.update(seeds=[1, 1]), "seeds: values must be distinct"),
        (lambda g: g.update(length_buckets=[20, 10]), "length_buckets: values must be distinct and increasing"),
        (lambda g: g["train"].update(max_updates=-1), "train.max_updates: must be >= 0, got -1"),  # not variants[0]
        (lambda g: g["scales"]["full"].update(train={"lr": -1}), "scales.full.train.lr: must be >= 0, got -1.0"),
        (lambda g: g["variants"][1].update(train={"warmup": -1}), "variants[1] ('b').train.warmup: must be >= 0"),
        (lambda g: g.update(translate={"beam": 0}), "translate.beam: must be >= 1, got 0"),
        (lambda g: g.update(translate={"length_penalty": -1}), "translate.length_penalty: must be >= 0, got -1.0"),
        (lambda g: g.update(translate={"average": {"first": 3}}), "translate.average: expected {last: N}"),
        (lambda g: g["test"][0].pop("ref"), "test[0]: missing 'ref'"),
        (lambda g: g["scales"].update(tiny={"trian": {}}), "scales.tiny.trian: unknown key"),
        (lambda g: g.pop("data"), "missing 'data'"),
    ],
)
def test_errors_name_the_file_and_the_key(tmp_path: Path, change, expected: str) -> None:
    grid = base_grid()
    change(grid)
    assert expected in error(tmp_path, grid)


def test_an_unknown_scale_is_an_error(tmp_path: Path) -> None:
    assert "no scale 'tiny' in this grid (scales: small, full)" in error(tmp_path, base_grid(), "tiny")
    grid = base_grid()
    grid["scales"] = {"small": {}, "medium": {}}
    assert "choose one with --scale (small, medium)" in error(tmp_path, grid)
    grid = base_grid()
    grid["variants"][0]["scales"] = {"smal": {}}  # a variant's scale the grid does not define: said "unknown key"
    assert error(tmp_path, grid) == (
        f"{tmp_path / 'grid.yaml'}: variants[0] ('a').scales: unknown scale 'smal' (did you mean 'small'?)"
    )
    grid["variants"][0]["scales"] = {"full": {}, "huge": {}}
    assert error(tmp_path, grid) == (
        f"{tmp_path / 'grid.yaml'}: variants[0] ('a').scales: unknown scale 'huge'; expected one of: small, full"
    )
    del grid["scales"]
    grid["variants"][0]["scales"] = {"huge": {}}
    assert error(tmp_path, grid) == (
        f"{tmp_path / 'grid.yaml'}: variants[0] ('a').scales: this grid defines no scales (no top-level 'scales:'), "
        "so a variant cannot choose one (given: huge); define them under the top-level 'scales:', or put their "
        "options in the variant's 'train:'"
    )


def test_a_directory_as_the_grid_file_is_named_so(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=f"^{tmp_path}: a directory, not a file$"):
        load_grid(tmp_path)


def test_the_command_exits_2_with_the_message(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    grid = base_grid()
    grid["train"]["batch_tokens"] = -1
    path = write(tmp_path, grid)
    assert main(["experiment", str(path), "--dry-run"]) == 2
    assert f"error: {path}: train.batch_tokens: must be >= 1, got -1" in capsys.readouterr().err


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_every_shipped_grid_parses_at_every_scale(path: Path) -> None:
    scales = scale_names(path)
    assert {"small", "cpu", "full"} <= set(scales) <= {"small", "mid", "cpu", "cpu6", "cpu-mixed", "full"}
    small, full = load_grid(path, "small"), load_grid(path)  # full is the default scale
    assert full.scale == "full" and full.baseline is not None and len(full.seeds) >= 2
    for variant in small.variants:  # small runs are capped by updates, never by minutes
        assert variant.train["max_updates"] > 0 and not variant.train.get("max_minutes")
        assert variant.train["d_model"] <= 256
    for variant in full.variants:
        assert "max_minutes" not in variant.train
        assert variant.train.get("d_model", 512) >= 256
    cpu_scales = [load_grid(path, name) for name in scales if name.startswith("cpu") or name == "mid"]
    for variant in (v for grid in cpu_scales for v in grid.variants):  # they stop when validation converged:
        assert variant.train["patience"] > 0  # its perplexity, or the BLEU of a row that says so (with BLEU on)
        assert variant.train.get("early_stop_metric", "ppl") == "ppl" or variant.train.get("valid_bleu", True)
        assert variant.train["max_updates"] > 0 and variant.train["precision"] == "fp32"  # same on any CPU
    if "cpu-mixed" in scales:  # the cpu recipe with mixed-length batches, nothing else changed
        for cpu, mixed in zip(load_grid(path, "cpu").variants, load_grid(path, "cpu-mixed").variants, strict=True):
            assert (cpu.train.get("batching", "length"), mixed.train["batching"]) == ("length", "mixed")
            assert {k: v for k, v in mixed.train.items() if k != "batching"} == cpu.train
    for test in full.tests:  # the corpus itself is only read when the grid runs
        assert test.src.name.endswith(".gz") and "multi30k" in str(test.src)


def test_slugs_and_length_buckets() -> None:
    assert slugify("+ multi-att-1h") == "multi-att-1h"
    assert slugify("self-att/RNN") == "self-att-RNN"
    assert bucket_labels([10, 20]) == ["1-10", "11-20", "21+"]
    assert [bucket_of(n, [10, 20]) for n in (0, 1, 10, 11, 20, 21, 99)] == [0, 0, 0, 1, 1, 2, 2]


def test_repeat_scale_makes_the_published_strings_shallower(tmp_path: Path) -> None:
    grid = base_grid()
    grid["scales"]["half"] = {"repeat_scale": 0.5}
    grid["baseline"] = "combined"
    grid["variants"] = [{"name": "combined", "preset": "t5-self-att-combined"}, {"name": "rnn", "preset": "t5-rnn-rnn"},
                        {"name": "rnmt", "preset": "rnmt"}]  # fmt: skip
    path = write(tmp_path, grid)
    full, half = load_grid(path, "full"), load_grid(path, "half")
    assert full.variant("combined").train["preset"] == "t5-self-att-combined"
    combined, rnn, rnmt = (half.variant(n).train for n in ("combined", "rnn", "rnmt"))
    assert "preset" not in combined and combined["decoder"].startswith("pos -> repeat(1, res(norm -> mh_dot_self_att(")
    assert "repeat(2, res(norm -> rnn" in rnn["encoder"] and "repeat(3, res(norm -> rnn" in rnn["decoder"]
    assert rnmt["input_feeding"] is True and "repeat(2, res_d(rnn))" in rnmt["encoder"]  # the preset's options stay
    assert combined["d_model"] == 32  # the grid's options win over the preset's size
    grid["scales"]["half"] = {"repeat_scale": 2}
    assert "scales.half.repeat_scale: must be in (0, 1]" in error(tmp_path, grid, "half")


def test_an_adl_error_at_a_shallower_scale_shows_the_sentence_as_written(tmp_path: Path) -> None:
    grid = base_grid()
    grid["scales"]["half"] = {"repeat_scale": 0.5}
    grid["variants"][0]["decoder"] = DECODER.replace("repeat(1,", "repeat(10,").replace("res_nd(ffl)", "res_nd(fflx)")
    message = error(tmp_path, grid, "half")
    sentence, caret = message.splitlines()[-2:]
    assert "unknown layer 'fflx'" in message and sentence.strip() == grid["variants"][0]["decoder"]  # not repeat(5, …)
    assert sentence[caret.index("^") :].startswith("fflx")


def test_a_scale_may_train_some_rows_and_keeps_the_claims_on_them(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    grid = base_grid()
    grid["variants"].append({"name": "c", "preset": "transformer"})
    grid["claims"] = [{"quote": "q1", "better": ["a", "b"]}, {"quote": "q2", "better": ["a", "c"]},
                      {"quote": "q3", "larger_gain": [["c", "a"], ["b", "a"]]}]  # fmt: skip
    grid["scales"]["some"] = {"variants": ["c", "a"]}
    path = write(tmp_path, grid)
    every, some = load_grid(path, "small"), load_grid(path, "some")
    assert [v.name for v in every.variants] == ["a", "b", "c"] and len(every.claims) == 3
    assert [v.name for v in some.variants] == ["a", "c"]  # the grid's order
    assert [c.quote for c in some.claims] == ["q2"]  # a claim on a row the scale leaves out is not its claim
    assert some.variant("c").train == every.variant("c").train | {"max_updates": 5}
    assert main(["experiment", str(path), "--scale", "some", "--variants", "b", "--dry-run"]) == 2
    assert f"--variants: b not in {path} at scale some (variants: a, c)" in capsys.readouterr().err
    grid["scales"]["some"] = {"variants": ["a", "d"]}
    assert "scales.some.variants[1]: unknown variant 'd'; expected one of: a, b, c" in error(tmp_path, grid, "some")
    grid["scales"]["some"] = {"variants": ["b"]}
    assert "scales.some.variants: keep the grid's baseline 'a'" in error(tmp_path, grid, "some")
    grid["scales"]["some"] = {"variants": []}
    assert "scales.some.variants: expected a non-empty list" in error(tmp_path, grid, "some")


def test_published_scores_are_numbers(tmp_path: Path) -> None:
    grid = base_grid()
    grid["variants"][0]["paper"] = {"IWSLT BLEU": "high"}
    assert "variants[0] ('a').paper.IWSLT BLEU: expected finite float" in error(tmp_path, grid)
    grid["variants"][0]["paper"] = {"IWSLT BLEU": 25.4}
    assert load_grid(write(tmp_path, grid)).variants[0].paper == {"IWSLT BLEU": 25.4}


@pytest.mark.parametrize("value", [float("nan"), float("inf"), ".nan", "1e400"])
def test_a_float_is_finite(tmp_path: Path, value: float | str) -> None:
    """YAML's .nan compares false with every bound: a claim's margin (or ratio, a published score, a scale's
    repeat_scale) of .nan passed its range check and was judged with."""
    grid = base_grid()
    for claim in ({"quote": "q", "close": ["a", "b"], "margin": value}, {"quote": "q", "faster": ["a", "b"],
                                                                         "ratio": value}):  # fmt: skip
        grid["claims"] = [claim]
        key = "margin" if "margin" in claim else "ratio"
        assert f"claims[0].{key}: expected finite float, got" in error(tmp_path, grid)
    grid["claims"] = []
    grid["scales"]["small"]["repeat_scale"] = value
    assert "scales.small.repeat_scale: expected finite float" in error(tmp_path, grid, "small")


def test_claims_are_checked(tmp_path: Path) -> None:
    grid = base_grid()
    grid["claims"] = [{"quote": "q", "better": ["a", "c"]}]
    assert "claims[0].better: unknown variant" in error(tmp_path, grid)
    grid["claims"] = [{"quote": "q", "better": ["a", "b"], "close": ["a", "b"]}]
    assert "claims[0]: give 'quote' and one of" in error(tmp_path, grid)
    grid["claims"] = [{"quote": ["q"], "better": ["a", "b"]}]  # YAML's `quote: [q]`: a list, not the text "['q']"
    assert "claims[0].quote: expected non-empty text (in quotes where YAML would read it" in error(tmp_path, grid)
    grid["claims"] = [{"quote": "q", "where": 2018, "better": ["a", "b"]}]
    assert "claims[0].where: expected text (in quotes where YAML would read it as something else), got int 2018" in (
        error(tmp_path, grid)
    )
    grid["claims"] = [{"quote": "q", "close": ["a", "b"], "margin": 0.5, "metric": "ter"}]
    assert "claims[0].metric: unknown metric" in error(tmp_path, grid)
    grid["claims"][0]["metric"] = "bleu"
    (claim,) = load_grid(write(tmp_path, grid)).claims
    assert (claim.kind, claim.first, claim.second, claim.margin, claim.test) == ("close", "a", "b", 0.5, "test")
    assert claim.registered == "" and claim.out_of_scope == ""
    grid["claims"] = [{"quote": "q", "equivalent": ["a", "b"]}]
    assert "claims[0].margin: expected a positive margin, got 0" in error(tmp_path, grid)
    grid["claims"] = [{"quote": "q", "better": ["a", "b"], "metric": "valid_ppl", "min_source_words": 12}]
    assert "claims[0]: min_source_words/max_source_words: expected 0 ≤ min ≤ max" in error(tmp_path, grid)
    grid["claims"] = [{"quote": "q", "better": ["a", "b"], "min_source_words": 12, "max_source_words": 11}]
    assert "claims[0]: min_source_words/max_source_words" in error(tmp_path, grid)
    grid["claims"] = [{"quote": "q", "better": ["a", "b"], "registered": "5499228"}]
    assert "claims[0].registered: expected 'COMMIT DATE'" in error(tmp_path, grid)
    grid["claims"][0].update(registered="5499228 2026-11-23T16:57:42+00:00", out_of_scope=" not IWSLT ")
    (claim,) = load_grid(write(tmp_path, grid)).claims
    assert (claim.registered, claim.registered_at, claim.out_of_scope) == ("5499228", "2026-11-23T16:57:42+00:00",
                                                                          "not IWSLT")  # fmt: skip
    for scope, shown in ((None, "nothing"), ("", "str ''"), (True, "bool True")):  # `out_of_scope: null` read
        grid["claims"][0]["out_of_scope"] = scope  # as the reason "None": the claim set out of scope, not judged
        assert f"claims[0].out_of_scope: expected non-empty text (in quotes where YAML would read it as something " \
               f"else), got {shown}" in error(tmp_path, grid)  # fmt: skip
    grid["test"].append({"name": "test2", "src": "t.src", "ref": "t.tgt"})
    grid["claims"] = [{"quote": "q", "close": ["a", "b"], "margin": 1.0, "test": ["test", "test2"]}]
    assert load_grid(write(tmp_path, grid)).claims[0].test == "test + test2"  # the two pooled into one corpus
    for pooled, kind in ((["test"], "close"), (["test", "test"], "close"), (["test", "test2"], "faster")):
        grid["claims"] = [{"quote": "q", kind: ["a", "b"], "margin": 1.0, "test": pooled}]
        assert "claims[0].test: a pooled claim names two or more different test sets" in error(tmp_path, grid)
    grid["claims"] = [{"quote": "q", "close": ["a", "b"], "margin": 1.0, "test": ["test", "test3"]}]
    assert "claims[0].test: unknown test set 'test3'" in error(tmp_path, grid)
    grid["claims"] = [{"quote": "q", "better": ["a", "b"], "own_test_only": "yes please"}]
    assert "claims[0].own_test_only: expected bool" in error(tmp_path, grid)
    grid["claims"] = [{"quote": "q", "faster": ["a", "b"], "ratio": 0}]
    assert "claims[0].ratio: expected a positive speed ratio" in error(tmp_path, grid)
    grid["claims"][0]["ratio"] = 4
    (claim,) = load_grid(write(tmp_path, grid)).claims
    assert (claim.kind, claim.ratio, claim.metric) == ("faster", 4.0, "sentences_per_s")
    grid["claims"] = [{"quote": "q", "better": ["a", "a"]}]
    assert "claims[0].better: expected two different variant names [A, B]" in error(tmp_path, grid)
    grid["claims"] = [{"quote": "q", "larger_gain": ["a", "b"]}]
    assert "claims[0].larger_gain: expected two steps [[A, from A0], [B, from B0]]" in error(tmp_path, grid)
    grid["claims"] = [{"quote": "q", "larger_gain": [["a", "b"], ["a", "b"]]}]
    assert "claims[0].larger_gain: expected two different steps" in error(tmp_path, grid)
    grid["claims"] = [{"quote": "q", "larger_gain": [["a", "b"], ["b", "c"]]}]
    assert "claims[0].larger_gain: unknown variant" in error(tmp_path, grid)
    grid["claims"] = [{"quote": "q", "larger_gain": [["a", "b"], ["b", "a"]], "metric": "valid_ppl"}]
    assert "claims[0].metric: larger_gain compares test-set metrics" in error(tmp_path, grid)
    del grid["claims"][0]["metric"]
    (claim,) = load_grid(write(tmp_path, grid)).claims
    assert (claim.kind, claim.rows) == ("larger_gain", ("a", "b", "b", "a"))


@pytest.mark.parametrize(
    ("claim", "refused"),
    [
        ({"better": ["a", "b"], "margin": 1.0}, "claims[0].margin: a better claim does not read it"),
        ({"larger_gain": [["a", "b"], ["b", "a"]], "ratio": 2}, "claims[0].ratio: a larger_gain claim does not"),
        ({"close": ["a", "b"], "margin": 1.0, "ratio": 2}, "claims[0].ratio: a close claim does not read it"),
        ({"faster": ["a", "b"], "ratio": 2, "margin": 0.5}, "claims[0].margin: a faster claim does not read it"),
        ({"faster": ["a", "b"], "metric": "bleu"}, "claims[0].metric: a faster claim does not read it"),
        ({"faster": ["a", "b"], "min_source_words": 12}, "claims[0].min_source_words: a faster claim does not"),
    ],
)
def test_a_claim_key_its_kind_does_not_read_is_refused(tmp_path: Path, claim: dict, refused: str) -> None:
    """`better: [a, b]` with `margin: 1` reads as "a better by a point"; the verdict would ignore the margin."""
    grid = base_grid()
    grid["claims"] = [{"quote": "q", **claim}]
    assert refused in error(tmp_path, grid)


def test_a_description_is_text(tmp_path: Path) -> None:
    """YAML's `description: [a, b]` is a list: refused, not shown as "['a', 'b']" in the report."""
    grid = {**base_grid(), "description": ["a", "b"]}
    assert "description: expected text (in quotes where YAML would read it as something else)" in error(tmp_path, grid)
    grid = base_grid()
    grid["scales"]["small"]["description"] = {"what": "x"}
    assert "scales.small.description: expected text" in error(tmp_path, grid, "small")
    grid["scales"]["small"]["description"] = " two updates "
    assert load_grid(write(tmp_path, grid), "small").scale_description == "two updates"
