"""Universal claims in the notebooks' prose are proved or bounded, not sampled.

The rule: a sentence that says something holds "for every b", "always" or "never" either derives it (a
proof, an identity, the structure of the code it describes), or states the range it was checked on ("for
every base from 10 to 10⁶ on a grid"), or is a definition or a tautology. A property seen on a sample and
written as if it held everywhere is the mistake this test is for: such a sentence is rewritten, not listed.

Every sentence of a markdown cell that uses one of the universal phrases (``UNIVERSAL``) is listed in
``tests/universal_claims_reviewed.json`` (``{"notebooks": {notebook: {snippet: reason}}}``), keyed by a
normalised snippet of the sentence (``snippet``: up to ``WINDOW`` words either side of its universal phrases,
whitespace and emphasis normalised), so that an edit of the claim makes its entry stale. A reason starts with
its category (``CATEGORIES``) and names where the proof or the range is:

- ``proved:`` derived in the notebook (a derivation, an identity, an assertion that covers every case), or
  following from the structure of the code or formula it describes (named);
- ``range:`` stated for the range that was checked, and the check covers it (the cell that checks it);
- ``definition:`` a definition, a tautology, a quotation, or a description of the notebook's own procedure.

There is no category for a claim that is sampled and stated as unbounded, or false: such a sentence stays
unlisted, so that this test fails until the notebook is fixed. The test also fails on an entry that no longer
matches a sentence of its notebook (stale), so that the reviewed file stays reviewed.

The phrases, chosen narrow so that the list stays reviewable: "for every", "for all", "for any", "always",
"never", "in every", "at every", "no matter" and "whatever". Left out, and why: the bare "every", "all",
"any", "each" and "none" mostly count or describe ("every pair", "all heads") rather than quantify over an
unbounded range, and "exactly" and "cannot" are claims of precision and of impossibility that other checks
(the printed verdicts) cover; listing them would make thousands of entries that no one reviews.

Not prose, and skipped: fenced code blocks (the folded answers' code), inline code spans, HTML tags, link
targets and web addresses, and quotations (text in double quotes, and a single-quoted word or phrase such as an
exercise's option 'never'), which are someone else's words or labels: the notebook's claim about them is in
its own words around them.
"""

from __future__ import annotations

import json
import pathlib
import re
from dataclasses import dataclass

import nbformat
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
REVIEWED = ROOT / "tests" / "universal_claims_reviewed.json"

UNIVERSAL = re.compile(
    r"\b(?:for\s+every|for\s+all|for\s+any|always|never|in\s+every|at\s+every|no\s+matter|whatever)\b",
    re.IGNORECASE,
)
CATEGORIES = ("proved", "range", "definition")
WINDOW = 10  # words kept either side of the universal phrases of a sentence

# Blanked before the phrases are searched (the blanks keep every offset, so the snippet reads the original).
NOT_PROSE = (
    re.compile(r"```.*?```", re.DOTALL),  # fenced code: the folded answers
    re.compile(r"<[^>\n]*>"),  # HTML tags
    re.compile(r"(?<=\])\([^)\s]*\)"),  # link targets
    re.compile(r"https?://\S+"),  # web addresses
)
NOT_CLAIM = (
    re.compile(r"`[^`\n]+`"),  # a code span: a name or a formula
    re.compile(r"\"[^\"\n]*\"|“[^”\n]*”"),  # a quotation
    re.compile(r"(?<!\w)'[^'\n]{1,60}'(?!\w)"),  # a quoted label: the option 'never'
)
# Where a sentence ends: a blank line; a new list item, table row, quote or heading; a full stop, question or
# exclamation mark before a capital, a code span, emphasis, a bracket or a quote (not "e.g. the", not "0.5");
# and a heading line, which is a sentence of its own (HEADING_LINE).
BOUNDARY = re.compile(
    r"\n[ \t]*\n"
    r"|\n(?=[ \t]*(?:[-*+][ \t]|\d+\.[ \t]|#|\||>))"
    r"|(?<=[.!?])[ \t\n]+(?=[A-Z`*(\"“\[])"
)
HEADING_LINE = re.compile(r"^#[^\n]*$", re.MULTILINE)


def _blank(text: str, pattern: re.Pattern, fill: str = " ") -> str:
    return pattern.sub(lambda m: re.sub(r"[^\n]", fill, m.group(0)), text)


def normalise(text: str) -> str:
    """A snippet as it is keyed: emphasis markers dropped, whitespace collapsed."""
    text = re.sub(r"\*\*|__", "", text)
    return " ".join(text.split())


def _sentence_spans(text: str) -> list[tuple[int, int]]:
    cuts = {0, len(text)}
    for m in BOUNDARY.finditer(text):
        cuts.update((m.start(), m.end()))
    for m in HEADING_LINE.finditer(text):  # a heading is a sentence of its own
        cuts.update((m.start(), m.end()))
    cuts = sorted(cuts)
    return [(a, b) for a, b in zip(cuts, cuts[1:], strict=False) if text[a:b].strip()]


@dataclass(frozen=True)
class Claim:
    """A sentence of a markdown cell that uses a universal phrase: its key and where it is."""

    snippet: str  # the key: WINDOW words either side of the phrases, normalised
    phrases: tuple[str, ...]
    cell: int
    sentence: str


def find_claims(source: str, cell: int = 0) -> list[Claim]:
    """The sentences of a markdown cell that use a universal phrase, one claim per sentence."""
    text = source
    for pattern in NOT_PROSE:
        text = _blank(text, pattern)
    searched = text
    for pattern in NOT_CLAIM:  # filled with a word character: "at `Δ = 0` every" is no "at every"
        searched = _blank(searched, pattern, "_")
    claims = []
    for start, end in _sentence_spans(text):
        hits = list(UNIVERSAL.finditer(searched, start, end))
        if not hits:
            continue
        words = [m.start() for m in re.finditer(r"\S+", text[start : hits[0].start()])]
        first = start + (words[-WINDOW] if len(words) >= WINDOW else 0)
        words = [m.end() for m in re.finditer(r"\S+", text[hits[-1].end() : end])]
        last = hits[-1].end() + (words[WINDOW - 1] if len(words) >= WINDOW else end - hits[-1].end())
        snippet = normalise(text[first:last])
        phrases = tuple(" ".join(h.group(0).lower().split()) for h in hits)
        claims.append(Claim(snippet, phrases, cell, normalise(text[start:end])))
    return claims


def read_claims(nb) -> list[Claim]:
    claims = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            claims += find_claims(cell.source, index)
    return claims


_CLAIMS: dict[str, list[Claim]] = {}


def claims_of(path: pathlib.Path) -> list[Claim]:
    if path.name not in _CLAIMS:
        _CLAIMS[path.name] = read_claims(nbformat.read(path, as_version=4))
    return _CLAIMS[path.name]


def reviewed() -> dict[str, dict[str, str]]:
    return json.loads(REVIEWED.read_text())["notebooks"]


def review(claims: list[Claim], listed: dict[str, str]) -> tuple[list[Claim], list[str]]:
    """The claims the reviewed entries do not list, and the entries that match no claim (stale)."""
    missing = [c for c in claims if c.snippet not in listed]
    present = {c.snippet for c in claims}
    return missing, [s for s in listed if s not in present]


def category(reason: str) -> str | None:
    head, colon, rest = reason.partition(":")
    return head if colon and head in CATEGORIES and rest.strip() else None


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_every_universal_claim_is_reviewed(path):
    missing, _ = review(claims_of(path), reviewed().get(path.name, {}))
    report = "\n".join(f"  cell {c.cell}: {c.snippet!r}\n    in: {c.sentence}" for c in missing)
    assert not missing, (
        f"{path.name}: sentences with a universal phrase that {REVIEWED.name} does not list. Prove the claim, "
        f"state the range it was checked on, or list it with its category ({', '.join(CATEGORIES)}) and where "
        f"the proof or the range is:\n{report}"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_every_reviewed_entry_is_still_needed(path):
    listed = reviewed().get(path.name, {})
    bad = {s: r for s, r in listed.items() if category(r) is None}
    assert not bad, f"{path.name}: entries whose reason does not start with one of {CATEGORIES} and a colon: {bad}"
    _, stale = review(claims_of(path), listed)
    assert not stale, f"{path.name}: remove (or re-key) these entries of {REVIEWED.name}, gone from the prose: {stale}"


def test_the_reviewed_file_names_only_notebooks_that_exist():
    names = {p.name for p in NOTEBOOKS}
    assert set(reviewed()) <= names, set(reviewed()) - names


# ----- the checker, on planted instances ------------------------------------------------------------------


def _tiny(*markdown: str) -> list[Claim]:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(m) for m in markdown] + [nbformat.v4.new_code_cell("x = 1")]
    return read_claims(nb)


def test_a_planted_universal_claim_is_flagged_until_listed_and_an_edit_makes_its_entry_stale():
    planted = (
        "We tried bases 10, 100 and 1000. The hand **never** comes back exactly,\nfor every base.\n\n"
        "The clocks turn at different speeds."
    )
    (claim,) = _tiny(planted)
    assert claim.snippet == "The hand never comes back exactly, for every base."
    assert claim.phrases == ("never", "for every")
    missing, stale = review([claim], {})
    assert missing == [claim] and stale == []
    listed = {claim.snippet: "range: bases 10, 100 and 1000, the cell that prints them"}
    assert review([claim], listed) == ([], [])
    # The same claim after an edit: it is flagged again, and the old entry is stale.
    (edited,) = _tiny(planted.replace("every base", "every base we tried"))
    missing, stale = review([edited], listed)
    assert missing == [edited] and stale == [claim.snippet]


def test_only_the_window_around_the_phrases_is_kept():
    words = " ".join(f"w{i}" for i in range(30))
    (claim,) = _tiny(f"{words} always {words}.")
    assert claim.snippet == " ".join([*(f"w{i}" for i in range(20, 30)), "always", *(f"w{i}" for i in range(10))])
    # Two phrases in one sentence make one claim, whose window spans both.
    (claim,) = _tiny("For every shift there is one matrix, the same for all positions.")
    assert claim.phrases == ("for every", "for all")


@pytest.mark.parametrize(
    "prose",
    [
        "Answer one of 'never', 'after 3 tokens'.",
        'The paper says "for any fixed offset k" here.',
        "The flag `always_scale` is set, and the option `never` is a string.",
        "```python\nwhile True:  # never stops\n    pass\n```\n",
        "[a story](https://example.org/never-ending)",
        "<details><summary>Answer</summary></details>",
        "Every pair turns; all heads agree; each one is a clock.",
        "The kernel is 1 at `Δ = 0` every time, and the sum is taken for `x` any way.",
    ],
)
def test_what_is_not_a_claim_is_skipped(prose):
    assert _tiny(prose) == []


def test_sentences_end_at_full_stops_list_items_and_headings():
    claims = _tiny("### It never ends\nA sentence. Another one is always here.\n- an item that is never\n- next")
    assert [c.snippet for c in claims] == [
        "### It never ends",
        "Another one is always here.",
        "- an item that is never",
    ]
    # A decimal point, "e.g." and "et al." do not end a sentence.
    (claim,) = _tiny("It is 0.5, e.g. as Su et al. 2021 says, always.")
    assert claim.snippet == "It is 0.5, e.g. as Su et al. 2021 says, always."
