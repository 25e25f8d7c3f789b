"""Every number the notebooks' prose states is backed by the notebook's own code, by the articles, or reviewed.

The rule: a number in a markdown cell must be printed by a code cell of the same notebook, be a parameter set
in its code, or be listed in ``data/article_numbers.json``; anything else is listed, with the reason someone
checked, in ``tests/prose_numbers_reviewed.json`` (``{"notebooks": {notebook: {number as written: reason}}}``).
The test fails on a number that is neither backed nor listed (a stale count such as "nine notebooks", a figure
copied from memory such as "stays near 1e-3" where the code prints 0.04), and on a listed entry that no longer
stands for an unbacked number of its notebook (gone from the prose, or backed by now), so that the reviewed
file stays reviewed. A number is listed by how it is written, once per notebook, whatever the cells it is in.

What counts as a number (``NUMBER``, ``COUNT_WORD``):

- digits, decimals and scientific notation: ``12``, ``0.35``, ``1e-3``, ``3.2 × 10⁻⁵``, ``10^6``, ``10⁶``,
  ``2^-9``; thousands separators (``2,048`` is 2048); a percentage (``45%`` is 45 or 0.45); a size suffix
  (``128k`` is 128,000 or 131,072; ``100M``); a multiple or an ordinal (``4x``, ``3rd``). A run of digits glued
  to the letters before it is part of a name and no number (``float32``, ``θ_0``, ``x2``, ``Qwen2.5``), and so is
  a dotted id (``9.6.1``);
- the count words zero, two to twenty, thirty to ninety (with "sixty-four"), hundred, thousand, million,
  billion, and "twice". Left out, and why: "one" is also English's pronoun and article ("the one that", "one
  another", "one at a time") and cannot be told from a count by its spelling; fractions and ordinals in words
  ("half", "a third", "quarter", "first", "second") name a part or an item, not a quantity ("half" is also a
  RoPE layout, "second" a unit of time). The digits ``1``, ``1/2`` and ``1st`` are checked like any number.

What is not a claim, and is skipped: each rule in ``SKIPS``, as narrow as the notebooks allow.

- Not prose: fenced code blocks (the folded answers' code, which ``tests/test_exercises.py`` runs), HTML
  tags, link targets and web addresses (file names, arXiv ids and issue numbers live there).
- References: article sections (``§6.5``, ``§7-8``, "section 3", "sections 3.2-3.5, 4 and 9.5"), the
  notebook's own numbered headings (``## 3. Notation``), figures, tables, parts and exercises ("Figure 2",
  "Exercise 6", "练习 6", the article title's "part 21"), arXiv identifiers and issue or pull request numbers
  (``huggingface/transformers#29285``, ``#25306``).
- Names: a notebook's number (two digits with a leading zero, ``06`` or ``05-07``; "notebook 10"; a link
  title or page title ``[10 · Bugs``, ``# 10 · Bugs``; a file name ``00_start_here``), an article's id (three
  digits with leading zeros: ``000``, ``001``, ``003``), a model's name with its version and size
  (``Llama 3.1 8B``, ``Gemma 3 4B``, ``Mistral 7B v0.1``, ``DeepSeek-V3``), a library's version
  (``transformers 5.25``), a year in a citation (after "et al." or a month, in a parenthesis such as
  ``(2023)`` or ``(vLLM, 2024)``, after a link and a comma, after "and Lewis"), and an hour on a clock face
  ("twelve o'clock").
- The structure of a formula in a code span (the notebooks write formulas in backticks; inline ``$...$``,
  which they do not use today, is read the same way). An index, or a number in an exponent that holds a free
  symbol or sits on one (``θ_0``, ``p_(m+10)``, ``b^(-2i/d)``, ``x^2``); and the numerals 1 and 2 where they
  are notation: a coefficient of a symbol (``2i``, ``2π``, ``2(m - n)``) or an operand whose other operand
  holds a free symbol (``d/2``, ``n + 1``, ``d/2 - 1``, ``1/θ``). Every other number in a formula is a value
  and is checked: ``10000`` in ``θ = 10000``, ``4`` in ``π/4`` (π is a constant, not a free symbol), ``8`` in
  ``8L``, ``0.1`` in ``0.1 · ln s + 1``, ``510`` in ``10000^(-510/512)`` (an exponent of numbers on a
  number), all of ``Δ = 10 - 8 = +2``. In plain prose only a 1 or a 2 written against a letter is skipped
  (the coefficient ``2π``, ``2D``): a hyphen there joins words, and "a 5-token window" is a claim.

What backs a number (``backing``): the same magnitude (the sign is not compared: in prose a hyphen is as
often a range or a formula's minus as a sign), to the precision the number is written with: ``1.66`` is
backed by 1.6593, 1.66 or 1.664 but not by 1.67; ``6283`` by 6283.19; ``1e-3`` by 0.0012 but not by 0.04;
``2,048`` by 2048; ``10^6`` by ``10**6``. An integer below 10 and a count word need an exact integer (3.2 does
not back "3 heads"). The sources:

- the Python number literals of the notebook's code cells (comments and strings are not parameters), and the
  value of every constant subexpression (``10**6``, ``2 * 1024``, ``-1``);
- the numbers in the text outputs of its code cells, except cells marked ``# NBVAL_IGNORE_OUTPUT`` (their
  output is not compared, so it may say anything next week);
- every number in ``data/article_numbers.json`` (numeric values, and the exact values its ``known_slips``
  quote);
- the notebook's exercises in ``helpers/exercises/_nbNN.py``, read from the module's source: the numbers in
  their ``params``, ``options``, ``rtol``, ``atol`` and ``sig``. Their expected answers are not computed here
  (that would import torch and the whole collection); a number only an answer backs is reviewed.

Limits, by design: a number backed by an unrelated literal of the same value passes (a count "three" is
backed by any ``3`` in the code), so the test finds unsupported and stale numbers; it does not prove that a
backed one is the right one.
"""

from __future__ import annotations

import ast
import io
import json
import math
import pathlib
import re
import tokenize
from dataclasses import dataclass, field

import nbformat
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
REVIEWED = ROOT / "tests" / "prose_numbers_reviewed.json"
ARTICLE = ROOT / "data" / "article_numbers.json"

# ----- reading numbers ------------------------------------------------------------------------------------

SUPERSCRIPT = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
_SUP = "[⁻⁺]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+"
NUMBER = re.compile(
    r"(?<![\w.,\d])"  # not the tail of a name (float32) or of a longer number
    r"(?P<mant>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:_\d+)*\.\d+|\d+(?:_\d+)*)"
    r"(?:"
    r"(?P<exp>[eE][-+−]?\d+)"  # 1e-3, 6.1e+04
    rf"|\s*[×x·*]\s*10\s*(?:\^\s*\(?(?P<tenpow>[-−]?\d+)\)?|\*\*\s*\(?(?P<tenpow2>[-−]?\d+)\)?|(?P<tensup>{_SUP}))"
    r"|(?:\^|\*\*)\s*(?P<pow_paren>\()?(?P<pow>[-−]?\d+(?:\.\d+)?)(?(pow_paren)\))(?![\w/.(])"  # 10^6, 2^(-8), 2**15
    rf"|(?P<sup>{_SUP})"  # 10⁶, 10⁻⁴
    r")?"
    r"(?P<suffix>%|[kKMB](?![\w])|[x×](?![\w\d])|st\b|nd\b|rd\b|th\b)?"
    r"(?![\d]|\.\d)"  # a dotted id such as 9.6.1 is no number
)
COUNT_WORDS = {
    "zero": 0,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
    "hundred": 100,
    "thousand": 1000,
    "million": 10**6,
    "billion": 10**9,
    "twice": 2,
}
UNITS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
TENS = ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
COUNT_WORD = re.compile(
    rf"\b(?:(?P<tens>{'|'.join(TENS)})[- ](?P<unit>{'|'.join(UNITS)})|(?P<word>{'|'.join(COUNT_WORDS)}))\b",
    re.IGNORECASE,
)


def count_value(match: re.Match) -> int:
    """The value of a ``COUNT_WORD`` match: "twelve" is 12, "Sixty-four" 64."""
    if match["tens"]:
        return COUNT_WORDS[match["tens"].lower()] + UNITS.index(match["unit"].lower()) + 1
    return COUNT_WORDS[match["word"].lower()]


SUFFIX_SCALES = {"k": (1000, 1024), "K": (1000, 1024), "M": (10**6, 2**20), "B": (10**9,)}


@dataclass(frozen=True)
class Number:
    """A number as a markdown cell writes it: the text, the value(s) it may stand for, and how exactly."""

    written: str
    values: tuple[float, ...]  # what it may mean: 45% is 45 or 0.45; 128k is 128000 or 131072
    tolerances: tuple[float, ...]  # half a unit of the last written digit, for each value
    exact: bool  # an integer below 10, or a count word: needs an exact integer
    cell: int
    context: str


def _half_unit(mantissa: str) -> float:
    """Half a unit of the last digit written: 0.005 for '1.66', 0.5 for '2048'."""
    if "." in mantissa:
        return 0.5 * 10.0 ** -len(mantissa.split(".")[1])
    return 0.5


def parse(match: re.Match) -> tuple[float, float, str]:
    """The value of a ``NUMBER`` match, half a unit of its last written digit, and its suffix."""
    mant = match["mant"].replace(",", "").replace("_", "")
    value, tol = float(mant), _half_unit(mant)
    exponent = match["exp"] or match["tenpow"] or match["tenpow2"] or match["tensup"]
    if exponent:
        if match["exp"]:
            exponent = exponent[1:]
        scale = 10.0 ** int(exponent.translate(SUPERSCRIPT).replace("−", "-"))
        value, tol = value * scale, tol * scale
    elif match["pow"] or match["sup"]:
        power = float((match["pow"] or match["sup"]).translate(SUPERSCRIPT).replace("−", "-"))
        value, tol = value**power, abs(value**power) * 1e-9
    return value, tol, match["suffix"] or ""


# ----- what is not a claim --------------------------------------------------------------------------------

_YEAR = r"(?:19[5-9]\d|20[0-3]\d)\b"
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_LIST = r"(?:\s*(?:,|and|or|to|-|–|/)\s*§?\s*\d+(?:\.\d+)*)*"  # sections 3.2-3.5, 4 and 9.5
_NOTEBOOK_LIST = r"(?:\s*(?:,|and|or|to|-|–)\s*\d\d\b)*"  # notebooks 02 and 03; 05-07
# Spans whose numbers are references or names, not claims: (rule, pattern).
SKIPS = (
    ("section reference", re.compile(r"§\s*\d+(?:\.\d+)*(?:\s*(?:-|–|and|or|to)\s*\d+(?:\.\d+)*)*")),
    (
        "section, figure, table, part or exercise number",
        re.compile(
            r"\b(?:sections?|chapters?|figures?|fig\.|tables?|parts?|exercises?|equations?|eq\.)\s+\d+(?:\.\d+)*"
            + _LIST,
            re.IGNORECASE,
        ),
    ),
    ("exercise number", re.compile(r"练习\s*\d+")),
    ("the notebook's own heading number", re.compile(r"^#{1,6}\s+\d+(?:\.\d+)*\.?(?=\s)", re.MULTILINE)),
    ("notebook number", re.compile(r"\bnotebooks?\s+\d+" + _NOTEBOOK_LIST, re.IGNORECASE)),
    ("notebook number", re.compile(r"\[\s*\d\d\s*·")),
    ("notebook number", re.compile(r"^#\s+\d\d\s*·", re.MULTILINE)),
    ("notebook number", re.compile(r"\b\d\d_[a-z]\w*")),
    ("notebook number", re.compile(r"(?<![\d.,])0\d(?:\s*[-–]\s*\d\d)?(?![\d.,]\d)")),
    ("article id", re.compile(r"(?<![\d.,])00\d(?![\d.,]\d)")),
    ("arXiv identifier", re.compile(r"arXiv:?\s*\d{4}\.\d{4,5}(?:v\d+)?", re.IGNORECASE)),
    ("an issue or pull request number", re.compile(r"(?:\b[\w.-]+/[\w.-]+)?#\d+")),
    ("a year in a citation", re.compile(rf"et al\.?,?\s*\(?\s*{_YEAR}")),  # Su et al. 2021, et al. (2024,
    ("a year in a citation", re.compile(rf"\b(?:{_MONTHS})\s+{_YEAR}")),  # June 2023
    ("a year in a citation", re.compile(rf"\((?:[^()]*?,\s*)?{_YEAR}(?=\s*[),;])")),  # (2023), (vLLM, 2024)
    ("a year in a citation", re.compile(rf"[\])\"”]\s*,\s*{_YEAR}")),  # [owner/repo#1](...), 2024; "Title", 2024
    ("a year in a citation", re.compile(rf"\band\s+[A-Z][a-z]+\s+\(?{_YEAR}")),  # Press, Smith and Lewis (2022)
    (
        "a library's version",
        re.compile(
            r"\b(?:torch|PyTorch|transformers|Python|numpy|NumPy|scipy|SciPy|matplotlib|nbconvert|nbval|"
            r"ipywidgets|JupyterLab|jupyterlab|CUDA)\s+v?\d+(?:\.\d+)+"
        ),
    ),
    (
        "a model's name",
        re.compile(
            r"\b(?:Llama|LLaMA|Code Llama|Gemma|Mistral|Mixtral|Qwen|Phi|GPT|DeepSeek|Falcon|OLMo|Yi|GLM|ChatGLM|"
            r"CodeGen|Pythia|MPT|BLOOM|Baichuan|InternLM|Command R)"
            r"(?:[-\s]?[vV]?\d+(?:\.\d+)*(?![\dBMbm.]))?"  # its version: Llama 3.1, Qwen2.5, DeepSeek-V3
            r"(?:[-\s]+\d+(?:\.\d+)?[BMbm]\b)?"  # its size: 8B
            r"(?:\s+v\d+(?:\.\d+)*)?"  # Mistral 7B v0.1
        ),
    ),
    ("an hour on a clock face", re.compile(r"\b\w+\s+o'clock", re.IGNORECASE)),
)
FENCE = re.compile(r"```.*?```", re.DOTALL)
NOT_TEXT = (
    FENCE,  # code blocks: the folded answers, run by tests/test_exercises.py
    re.compile(r"<[^>\n]*>"),  # HTML tags
    re.compile(r"(?<=\])\([^)\s]*\)"),  # link targets
    re.compile(r"https?://\S+"),  # web addresses
)
FORMULA_SPAN = re.compile(r"`[^`\n]+`|\$[^$\n]+\$")  # a code span, or inline LaTeX should a notebook use it
GREEK = "α-ορ-ωΑ-Ω"  # all but π, a constant, not a free symbol: π/4 is a value
SYMBOL = rf"[A-Za-z{GREEK}_)\]]"  # a free symbol, or the end of a bracket that holds one
NOTATION = ("1", "2")


def _exponent_or_index(text: str, start: int, end: int) -> bool:
    """True where the number is an index (``θ_0``, ``p_(m+10)``), or in an exponent that holds a free symbol or
    sits on one (``b^(-2i/d)``, ``x^2``); an exponent of numbers on a number is a value (``10000^(-510/512)``)."""
    before = text[:start]
    group = re.search(r"(\^|_|\*\*)\s*[({](?=[^(){}]*\Z)", before)  # inside ^( ... ), _{ ... }, **( ... )
    bare = re.search(r"(\^|_|\*\*)\s*[-−]?\Z", before)  # x^2, θ_0
    opener = group or bare
    if opener is None:
        return False
    if opener.group(1) == "_":
        return True
    close = min((i for i in (text.find(")", end), text.find("}", end)) if i >= 0), default=-1)
    exponent = text[opener.end() : close if group and close >= 0 else end]
    base = before[: opener.start()].rstrip()[-1:]
    return bool(re.search(rf"[A-Za-df-z{GREEK}]", exponent)) or bool(re.fullmatch(rf"[A-Za-df-z{GREEK}]", base))


_TERM = r"[\w/·*^().\[\]]+"  # a product or quotient written without spaces: d/2, 2i, θ_i, (m+1)
_OPERATOR = r"[/·*×+\-−]"


def _holds_symbol(term: str) -> bool:
    return re.search(rf"[A-Za-z{GREEK}]", term) is not None


def _notation(text: str, start: int, end: int) -> bool:
    """True where a 1 or a 2 is notation around a free symbol: a coefficient (``2i``, ``2π``, ``2(m - n)``),
    or an operand of ``/``, ``·``, ``*``, ``×``, ``+`` or ``-`` whose other operand holds a free symbol (``d/2``,
    ``n + 1``, ``d/2 - 1``, ``1/θ``)."""
    if text[start:end] not in NOTATION:
        return False
    before, after = text[:start], text[end:]
    left = re.search(rf"({_TERM})\s*{_OPERATOR}\s*\Z", before)
    right = re.match(rf"\s*{_OPERATOR}\s*({_TERM})", after)
    return bool(
        re.match(rf"[A-Za-z{GREEK}π(\\]", after)
        or (left and _holds_symbol(left.group(1)))
        or (right and _holds_symbol(right.group(1)))
    )


def _blank(text: str, pattern: re.Pattern) -> str:
    return pattern.sub(lambda m: " " * len(m.group(0)), text)


SENTENCE_END = re.compile(r"(?<!\.)\.\s|\n\n")  # not the ".. " of a range


def _sentence(text: str, start: int, end: int) -> str:
    """The sentence around ``text[start:end]``, the number marked ``⟦…⟧``."""
    stops = [m.start() for m in SENTENCE_END.finditer(text)]
    left = max([i for i in stops if i < start] + [start - 120])
    right = min([i for i in stops if i >= end] + [end + 120])
    marked = text[left + 1 : start] + "⟦" + text[start:end] + "⟧" + text[end : right + 1]
    return " ".join(marked.split())


def find_numbers(source: str, cell: int = 0) -> tuple[list[Number], list[tuple[str, str, str]]]:
    """The numbers a markdown cell states, and the ones it skips as ``(written, rule, sentence)``."""
    text = source
    for pattern in NOT_TEXT:
        text = _blank(text, pattern)
    skipped_spans = []
    for rule, pattern in SKIPS:
        for m in pattern.finditer(text):
            skipped_spans.append((m.start(), m.end(), rule))
    spans = [(m.start(), m.end()) for m in FORMULA_SPAN.finditer(text)]

    def skip_rule(start, end):
        for s, e, rule in skipped_spans:
            if s <= start and end <= e:
                return rule
        return None

    found, skipped = [], []
    for m in NUMBER.finditer(text):
        start, end = m.span()
        rule = skip_rule(start, end)
        code = next(((s, e) for s, e in spans if s < start and end < e), None)  # the code span around it
        if rule is None and code and not m["suffix"]:
            formula, at = text[code[0] : code[1]], start - code[0]
            if _exponent_or_index(formula, at, at + end - start) or _notation(formula, at, at + end - start):
                rule = "formula structure"
        if rule is None and not code and not m["suffix"] and re.match(rf"[A-Za-z{GREEK}π]", text[end:]):
            if _notation(text, start, end):
                rule = "formula structure"  # in prose only the coefficient: 2π, 2D
        if rule:
            skipped.append((m.group(0), rule, _sentence(source, start, end)))
            continue
        value, tol, suffix = parse(m)
        values, tols = [value], [tol]
        if suffix == "%":
            values, tols = [value, value / 100], [tol, tol / 100]
        elif suffix in SUFFIX_SCALES:
            values = [value * s for s in SUFFIX_SCALES[suffix]]
            tols = [tol * s for s in SUFFIX_SCALES[suffix]]
        exact = value == int(value) and value < 10 and "." not in m["mant"] and not suffix.strip("x×")
        found.append(Number(m.group(0), tuple(values), tuple(tols), exact, cell, _sentence(source, start, end)))
    for m in COUNT_WORD.finditer(text):
        rule = skip_rule(*m.span())
        if rule:
            skipped.append((m.group(0), rule, _sentence(source, *m.span())))
            continue
        value = count_value(m)
        found.append(Number(m.group(0), (float(value),), (0.0,), True, cell, _sentence(source, *m.span())))
    return found, skipped


# ----- what backs a number --------------------------------------------------------------------------------

OUTPUT_NUMBER = re.compile(r"(?<![\w.\d])[-+]?(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?(?![\d])")


def numbers_in_code(source: str) -> set[float]:
    """The number literals of a code cell, and the value of every constant subexpression (``10**6``)."""
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return _literal_tokens(source)
    values = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Constant, ast.BinOp, ast.UnaryOp)):
            value = _fold(node)
            if value is not None:
                values.add(abs(value))
    return values


def _fold(node) -> float | None:
    if isinstance(node, ast.Constant):
        ok = isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
        return float(node.value) if ok else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _fold(node.operand)
        return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
    if isinstance(node, ast.BinOp):
        left, right = _fold(node.left), _fold(node.right)
        if left is None or right is None:
            return None
        try:
            if isinstance(node.op, ast.Add):
                return left + right
            if isinstance(node.op, ast.Sub):
                return left - right
            if isinstance(node.op, ast.Mult):
                return left * right
            if isinstance(node.op, ast.Div):
                return left / right
            if isinstance(node.op, ast.Pow) and abs(right) <= 64:
                return float(left**right)
        except (ZeroDivisionError, OverflowError, TypeError):  # TypeError: a complex power
            return None
    return None


def _literal_tokens(source: str) -> set[float]:
    values = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.NUMBER and not tok.string.endswith(("j", "J")):
                values.add(abs(float(tok.string.replace("_", ""))))
    except (tokenize.TokenError, IndentationError, ValueError):
        pass
    return values


def numbers_in_text(text: str) -> set[float]:
    values = set()
    for m in OUTPUT_NUMBER.finditer(text):
        values.add(abs(float(m.group(1).replace(",", "") + (m.group(2) or ""))))
    return values


def _ignored(cell) -> bool:
    return cell.source.lstrip().startswith("# NBVAL_IGNORE_OUTPUT")


def _json_numbers(node, key: str = "") -> set[float]:
    if isinstance(node, bool):
        return set()
    if isinstance(node, (int, float)):
        return {abs(float(node))}
    if isinstance(node, str):
        return numbers_in_text(node) if key == "known_slips" else set()
    if isinstance(node, dict):
        return set().union(*(_json_numbers(v, k) for k, v in node.items())) if node else set()
    if isinstance(node, list):
        return set().union(*(_json_numbers(v, key) for v in node)) if node else set()
    return set()


def article_numbers() -> set[float]:
    return _json_numbers(json.loads(ARTICLE.read_text()))


def exercise_numbers(notebook: str) -> set[float]:
    """The parameters and the numbers in the options of the notebook's exercises, read from the source of
    ``helpers/exercises/_nbNN.py`` (importing ``helpers`` would import torch: seconds this test need not spend)."""
    path = ROOT / "helpers" / "exercises" / f"_nb{notebook}.py"
    if not path.exists():
        return set()
    values: set[float] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Exercise"):
            continue
        for keyword in node.keywords:
            if keyword.arg not in ("params", "options", "rtol", "atol", "sig"):
                continue
            for inner in ast.walk(keyword.value):
                value = _fold(inner)
                if value is not None:
                    values.add(abs(value))
                elif isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                    values |= numbers_in_text(inner.value)
    return values


@dataclass
class Notebook:
    name: str  # "04"
    numbers: list[Number] = field(default_factory=list)
    skipped: list[tuple[str, str, str]] = field(default_factory=list)
    backing: set[float] = field(default_factory=set)


def read_notebook(nb, name: str, extra: set[float] = frozenset()) -> Notebook:
    """The numbers of an nbformat notebook's markdown, and the numbers its code backs them with."""
    book = Notebook(name, backing=set(extra))
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            found, skipped = find_numbers(cell.source, index)
            book.numbers += found
            book.skipped += skipped
        elif cell.cell_type == "code":
            book.backing |= numbers_in_code(cell.source)
            if not _ignored(cell):
                for out in cell.get("outputs", []):
                    text = out.get("text", "") + out.get("data", {}).get("text/plain", "")
                    book.backing |= numbers_in_text(text)
    return book


def is_backed(number: Number, backing: set[float]) -> bool:
    for value, tol in zip(number.values, number.tolerances, strict=True):
        target = abs(value)
        if number.exact:
            if target in backing:
                return True
            continue
        slack = tol * (1 + 1e-9) + 1e-12 * target
        if any(abs(v - target) <= slack for v in backing):
            return True
    return False


def unbacked(book: Notebook) -> list[Number]:
    return [n for n in book.numbers if not is_backed(n, book.backing)]


# ----- the collection -------------------------------------------------------------------------------------


def _load_book(path: pathlib.Path) -> Notebook:
    name = path.name[:2]
    extra = article_numbers() | exercise_numbers(name)
    return read_notebook(nbformat.read(path, as_version=4), name, extra)


_BOOKS: dict[str, Notebook] = {}


def book_of(path: pathlib.Path) -> Notebook:
    if path.name not in _BOOKS:
        _BOOKS[path.name] = _load_book(path)
    return _BOOKS[path.name]


def reviewed() -> dict[str, dict[str, str]]:
    return json.loads(REVIEWED.read_text())["notebooks"]


def review(book: Notebook, listed: dict[str, str]) -> tuple[list[Number], dict[str, str]]:
    """The unbacked numbers the reviewed entries do not list, and the entries that are stale (with why)."""
    now = unbacked(book)
    missing = [n for n in now if n.written not in listed]
    still, written = {n.written for n in now}, {n.written for n in book.numbers}
    stale = {}
    for number in listed:
        if number not in written:
            stale[number] = "no longer in the notebook's prose"
        elif number not in still:
            stale[number] = "now backed by the notebook's code or the article numbers"
    return missing, stale


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_every_number_in_the_prose_is_backed_or_reviewed(path):
    missing, _ = review(book_of(path), reviewed().get(path.name, {}))
    report = "\n".join(f"  cell {n.cell}: {n.written!r} in: {n.context}" for n in missing)
    assert not missing, (
        f"{path.name}: numbers in the prose that no code cell prints or sets, that data/article_numbers.json "
        f"does not hold, and that {REVIEWED.name} does not list (fix the sentence, print the number, or list "
        f"it with the reason you checked):\n{report}"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_every_reviewed_entry_is_still_needed(path):
    listed = reviewed().get(path.name, {})
    assert all(reason.strip() for reason in listed.values()), f"{path.name}: an entry without a reason"
    _, stale = review(book_of(path), listed)
    assert not stale, f"{path.name}: remove these stale entries from {REVIEWED.name}: {stale}"


def test_the_reviewed_file_names_only_notebooks_that_exist():
    names = {p.name for p in NOTEBOOKS}
    assert set(reviewed()) <= names, set(reviewed()) - names


# ----- the checker, on planted instances ------------------------------------------------------------------


def _tiny(markdown: str, code: str, printed: str):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(code)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=printed)]
    nb.cells = [nbformat.v4.new_markdown_cell(markdown), cell]
    return read_notebook(nb, "99")


def test_a_stale_count_and_a_remembered_figure_are_flagged_and_a_backed_number_is_not():
    book = _tiny(
        "Nine notebooks, one idea each. The loss stays near 1e-3. The period is 1.66 tokens.",
        "print(11)\nprint(0.04)\nprint(1.6593)",
        "11\n0.04\n1.6593\n",
    )
    flagged = {n.written for n in unbacked(book)}
    assert flagged == {"Nine", "1e-3"}
    assert {n.written for n in book.numbers} == {"Nine", "1e-3", "1.66"}
    # Listing a flagged number with a reason clears it; an entry for a backed or absent number is stale.
    missing, stale = review(book, {"Nine": "a reason", "1.66": "a reason", "eleven": "a reason"})
    assert [n.written for n in missing] == ["1e-3"]
    assert stale == {
        "1.66": "now backed by the notebook's code or the article numbers",
        "eleven": "no longer in the notebook's prose",
    }


@pytest.mark.parametrize(
    ("prose", "backing", "backed"),
    [
        ("period 1.66", {1.6593}, True),
        ("period 1.66", {1.66}, True),
        ("period 1.66", {1.67}, False),
        ("a window of 2,048 tokens", {2048.0}, True),
        ("a tolerance of 1e-3", {0.001}, True),
        ("a tolerance of 1e-3", {0.04}, False),
        ("a window of 10^6", {1e6}, True),
        ("a window of 10⁶", {1e6}, True),
        ("the slowest is 10⁻⁴", {1e-4}, True),
        ("a residual of 3.2 × 10⁻⁵", {3.2e-5}, True),
        ("45% of the heads", {0.45}, True),
        ("45% of the heads", {45.0}, True),
        ("a 128k context", {131072.0}, True),
        ("twelve heads", {12.0}, True),
        ("twelve heads", {12.4}, False),
        ("3 heads", {3.2}, False),
        ("about 6283 tokens", {6283.19}, True),
    ],
)
def test_numbers_are_compared_to_their_written_precision(prose, backing, backed):
    (number,), _ = find_numbers(prose)
    assert is_backed(number, backing) is backed


@pytest.mark.parametrize(
    ("prose", "rule"),
    [
        ("as §6.5 says", "section reference"),
        ("see section 3", "section, figure, table, part or exercise number"),
        ("as notebook 10 shows", "notebook number"),
        ("read 00_start_here first", "notebook number"),
        ("notebooks 05-07", "notebook number"),
        ("article 003 lists", "article id"),
        ("(Su et al. 2021)", "a year in a citation"),
        ("the speeds `θ_i = b^(-2i/d)`", "formula structure"),
        ("the last pair, `d/2 - 1`", "formula structure"),
        ("a float32 table", None),
        ("the answer:\n```python\nanswer = 12345\n```\n", None),  # a folded answer's code
        ("[the table below](#table-7)", None),  # a link target
        ("Qwen2.5 and DeepSeek-V3", None),
        ("Llama 3 8B", "a model's name"),
        ("twelve o'clock", "an hour on a clock face"),
    ],
)
def test_what_is_not_a_claim_is_skipped(prose, rule):
    found, skipped = find_numbers(prose)
    assert not found, found
    if rule is None:  # not prose, or glued to the letters before it: not read as a number at all
        assert not skipped, skipped
    else:
        assert skipped and all(r == rule for _, r, _ in skipped), skipped


@pytest.mark.parametrize(
    ("prose", "written"),
    [
        ("with `θ = 10000`", ["10000"]),
        ("`θ = π/4`", ["4"]),
        ("the slowest turns `1/10000`", ["1", "10000"]),
        ("a 5-token window", ["5"]),
        ("three terms", ["three"]),
        ("`k = 1` to `100`", ["1", "100"]),
        ("with $\\theta = 10000$ and $b^{-2i/d}$", ["10000"]),
    ],
)
def test_values_in_formulas_and_counts_are_still_numbers(prose, written):
    found, _ = find_numbers(prose)
    assert [n.written for n in found] == written


def test_the_article_numbers_added_for_the_prose_hold():
    """The entries of data/article_numbers.json that back prose numbers, reproduced from their definitions."""
    article = json.loads(ARTICLE.read_text())
    turn = article["rotation_30_degrees"]
    angle = article["rotation_30_degrees_angle"]["angle_degrees"]
    assert angle == turn["m"] * turn["theta_degrees"]
    assert [round(math.cos(math.radians(angle)), 3), round(math.sin(math.radians(angle)), 3)] == turn["end"]
    table = article["learned_table_extrapolation"]
    assert table["untrained_positions"] == table["test_length"] - table["train_length"]
    # 6万: the slowest clock of d = 512 turns once in 2π · 10000^(510/512) ≈ 60,611 positions, 6万 to one digit.
    period = 2 * math.pi * 10000 ** (510 / 512)
    assert round(period) == 60_611 and float(f"{period:.1g}") == article["slowest_clock_positions"]["positions_approx"]
