"""Lexical constraints without a model: parsing and its errors, the include trie's states (fairseq's test set,
tables re-derived by hand for adlnmt's rules), exclusions, and the round-robin of dynamic beam allocation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adlnmt.errors import DataError, UserError
from adlnmt.inference.allocation import Candidate, allocate
from adlnmt.inference.constraint_state import ConstraintTrie, Exclusions
from adlnmt.inference.constraints import (
    MAX_PHRASES,
    Constraints,
    EncodedConstraints,
    constraint_pieces,
    parse_line,
    read_constraints,
    unmet,
)
from adlnmt.inference.engine import CAPABILITIES, Engine
from adlnmt.inference.options import SearchOptions

FAIRSEQ_SET = [[1, 2, 3], [1, 3], [1, 4], [4, 5, 6, 7], [1], [4, 5]]  # 14 tokens


def walk(trie: ConstraintTrie, tokens: list[int]):
    state = trie.start()
    for token in tokens:
        state = trie.advance(state, token)
    return state


@pytest.mark.parametrize(
    ("tokens", "progress", "completed", "finished", "at_root"),
    [
        ([], 0, 0, False, True),
        ([1], 2, 1, False, False),  # [1] done (1) + the prefix [1] of [1,2,3], [1,3], [1,4] (1)
        ([1, 2], 3, 1, False, False),
        ([1, 2, 3], 4, 2, False, False),  # [1,2,3] done; nothing is needed below it
        ([1, 2, 3, 1], 5, 2, False, False),  # from the root again: [1] is done but [1,3], [1,4] need it
        ([1, 2, 3, 1, 3], 6, 3, False, False),
        ([1, 2, 3, 1, 3, 1, 4], 8, 4, False, False),
        ([1, 2, 3, 1, 3, 1, 4, 4], 9, 4, False, False),  # 4 is not under [1,4]: it starts [4,…] at the root
        ([1, 2, 3, 1, 3, 1, 4, 4, 5], 12, 5, False, False),  # [4,5] done (2) + prefix [4,5] of [4,5,6,7] (2)
        ([1, 2, 3, 1, 3, 1, 4, 4, 5, 6, 7], 14, 6, True, False),
        ([4, 5, 6, 8], 2, 1, False, True),  # 8 drops the prefix [4,5,6]: only [4,5] (done) counts
        ([9, 1, 9, 4], 2, 1, False, False),  # [1] done; 9 drops the prefix; 4 starts [4,…]
        ([1, 1, 1], 2, 1, False, False),  # [1] is given once: repeating it gains nothing
    ],
)
def test_trie_states_of_fairseqs_constraint_set(tokens, progress, completed, finished, at_root) -> None:
    trie = ConstraintTrie(FAIRSEQ_SET)
    assert trie.total_tokens == 14
    state = walk(trie, tokens)
    assert (trie.progress(state), sum(state.completed), trie.finished(state), state.node == 0) == (
        progress,
        completed,
        finished,
        at_root,
    )


def test_next_tokens_continue_the_prefix_or_start_a_needed_phrase() -> None:
    trie = ConstraintTrie(FAIRSEQ_SET)
    assert trie.next_tokens(trie.start()) == {1, 4}
    assert trie.next_tokens(walk(trie, [1])) == {1, 2, 3, 4}
    assert trie.next_tokens(walk(trie, [1, 2, 3, 1, 3, 1, 4])) == {4}  # every phrase through 1 is done
    assert trie.next_tokens(walk(trie, [1, 2, 3, 1, 3, 1, 4, 4, 5, 6, 7])) == set()


def test_a_phrase_given_twice_must_be_written_twice() -> None:
    trie = ConstraintTrie([[7], [7], [8, 9]])
    assert not trie.finished(walk(trie, [7, 8, 9]))
    assert trie.progress(walk(trie, [7, 8, 9])) == 3
    assert trie.finished(walk(trie, [7, 8, 9, 5, 7]))
    assert trie.finished(walk(trie, [7, 7, 8, 9]))


def test_no_include_phrases_are_met_from_the_start() -> None:
    trie = ConstraintTrie([])
    assert trie.finished(trie.start()) and trie.progress(trie.start()) == 0 and trie.next_tokens(trie.start()) == set()


def test_exclusions_bar_the_token_that_would_complete_a_phrase() -> None:
    exclusions = Exclusions([[5], [6, 7], [6, 8, 9]])
    assert exclusions.context == 2
    assert exclusions.banned([]) == {5}
    assert exclusions.banned([1, 6]) == {5, 7}
    assert exclusions.banned([6, 8]) == {5, 9}
    assert exclusions.banned([8]) == {5}


def test_unmet_counts_occurrences_of_each_phrase() -> None:
    assert unmet([4, 5, 6, 4, 5], [[4, 5], [4, 5], [6]]) == []
    assert unmet([4, 5, 6], [[4, 5], [4, 5], [6], [9]]) == [1, 3]


def candidate(bank: int, score: float, row: int = 0) -> Candidate:
    return Candidate(bank, score, row, 10 + row, ConstraintTrie([]).start())


def test_allocation_goes_round_robin_over_the_banks_best_bank_first() -> None:
    found = [candidate(0, -1.0, 0), candidate(0, -2.0, 1), candidate(0, -3.0, 2), candidate(2, -9.0, 3),
             candidate(1, -5.0, 4), candidate(1, -6.0, 5), candidate(2, -8.0, 6)]  # fmt: skip
    assert [c.row for c in allocate(found, 3)] == [6, 4, 0]  # the best of banks 2, 1, 0
    assert [c.row for c in allocate(found, 5)] == [6, 4, 0, 3, 5]  # then the second best of each
    assert [c.row for c in allocate(found, 10)] == [6, 4, 0, 3, 5, 1, 2]  # a bank's unused slots go to the others


def test_allocation_in_one_bank_is_by_score() -> None:
    found = [candidate(0, -3.0, 0), candidate(0, -1.0, 1), candidate(0, -2.0, 2)]
    assert [c.row for c in allocate(found, 2)] == [1, 2]


def test_a_constraints_line_is_parsed() -> None:
    line = parse_line('{"include": ["ein Hund", "Katze"], "exclude": ["nicht"]}', "c.jsonl", 1)
    assert line == Constraints(("ein Hund", "Katze"), ("nicht",))
    assert not parse_line("", "c.jsonl", 2) and not parse_line("{}", "c.jsonl", 3)
    assert parse_line('{"exclude": ["x"]}', "c.jsonl", 4) == Constraints((), ("x",))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"include": ["a"', "c.jsonl:3: malformed JSON"),
        ('["a"]', "c.jsonl:3: constraints must be a JSON object"),
        ('{"include": "a"}', "c.jsonl:3: 'include' must be a list of strings, not a string"),
        ('{"include": ["a", 3]}', "c.jsonl:3: 'include' must be a list of strings; item 2 is a number"),
        ('{"include": ["a", "  "]}', "c.jsonl:3: 'include' phrase 2 is empty"),
        ('{"exclude": [""]}', "c.jsonl:3: 'exclude' phrase 1 is empty"),
        ('{"include": ["a b"], "exclude": ["a b "]}', "c.jsonl:3: phrase 'a b' is both in 'include' and in 'exclude'"),
        ('{"includes": ["a"]}', "c.jsonl:3: unknown constraint key(s) 'includes'"),
        ('{"include": ["a"], "include": ["b"]}', "c.jsonl:3: malformed JSON (key 'include' given twice in one object)"),
        (json.dumps({"include": ["w"] * 1000}), f"1,000 constraint phrases on one line; at most {MAX_PHRASES}"),
    ],
)
def test_a_bad_constraints_line_is_one_clear_error(text: str, message: str) -> None:
    with pytest.raises(DataError) as caught:
        parse_line(text, "c.jsonl", 3)
    assert message in str(caught.value)


def test_a_constraints_file_needs_one_line_per_input_line(tmp_path: Path) -> None:
    assert len(read_constraints(["{}", '{"include": ["a"]}'], tmp_path / "c.jsonl", 2)) == 2
    with pytest.raises(DataError, match=r"c\.jsonl: 2 lines of constraints for 3 input lines"):
        read_constraints(["{}", "{}"], tmp_path / "c.jsonl", 3)


def test_the_api_checks_constraints_as_the_file_does() -> None:
    with pytest.raises(UserError, match="is both in 'include' and in 'exclude'"):
        Constraints(include=("Hund",), exclude=("Hund",))
    with pytest.raises(UserError, match="'include' phrase 1 is empty"):
        Constraints(include=("",))


def test_constraint_pieces_count_into_the_request_cost() -> None:
    assert constraint_pieces(None) == 0
    assert constraint_pieces(EncodedConstraints(((4, 5), (6,)), ((7, 8, 9),))) == 6
    assert EncodedConstraints(((4, 5), (6,)), ((7,),)).include_tokens == 3


@pytest.mark.parametrize("engine", ["ctranslate2", "onnxruntime"])
def test_engines_that_cannot_constrain_refuse_constraints(engine: str) -> None:
    capabilities = CAPABILITIES[engine]
    assert capabilities.missing(SearchOptions(), constraints=True) == ["constraints"]

    class Refusing(Engine):
        name = engine

        def translate_ids(self, sources, options, prefixes=None, constraints=None):  # type: ignore[override]
            raise AssertionError("not reached")

    Refusing.capabilities = capabilities
    with pytest.raises(UserError, match=f"lexical constraints need the torch engine, not {engine}"):
        Refusing().check(SearchOptions(), constraints=True)
    assert CAPABILITIES["torch"].missing(SearchOptions(), constraints=True) == []
    assert CAPABILITIES["ensemble"].missing(SearchOptions(), constraints=True) == []
