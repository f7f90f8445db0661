"""The arithmetic model's tokenizer and the answers it is taught to write (see train_arithmetic_model.py).

Why a 3-layer model learns exact arithmetic from these in a few CPU minutes:

- The tokenizer drops spaces and reads every number below 100 as one token, so a question is a short
  token sequence in which the token before an operand tells its role (``Whatis`` or ``(``: first
  operand; ``+`` or ``-``: second; ``*``: the multiplier).
- The answer is a scratchpad of column arithmetic on four places, least significant first. Each line is
  ``<op> (<place k> x y r) x 4`` where r follows from x, y and the previous r by a small table (digit
  sums with a carry, a digit times the multiplier, a borrow), and x and y are copied from the question
  or from the line before at a fixed distance; then ``#### `` and the answer in two tokens (hundreds,
  then two digits). Served text reads `` add u 4 9 13 t 6 5 12 h 0 0 1 k 0 0 0`` then ``#### 123``: the
  last number is the answer, as the harness extracts it (gsm8k's rule).
- Every token the model writes has text of its own (only the final end-of-text is special): SGLang
  0.5.23's chat stream drops the logprobs of a token with no text, and matches a stop string within as
  many tokens as the string encodes to, so hidden control tokens would break both for this model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

BOS, EOS, PAD = "<|begin_of_text|>", "<|eot_id|>", "<|pad|>"
CHAT_SPECIAL = ["<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>"]
SP, NL = "\u0120", "\u010a"  # how the byte-level alphabet writes " " and "\n"
OPS = {op: f"{SP}{op}" for op in ("add", "sub", "neg", "mul", "carry")}
PLACES = [f"{SP}{p}" for p in "uthk"]  # units, tens, hundreds, thousands
MARK = f"{NL}####{SP}"
WORDS = ("Question", "Whatis", "Answer")
MAX_VALUE = 121  # scratchpad values: digit * 12 <= 108, column sums <= 21
SHAPES = (  # the generator's five question shapes -> (name, operand order a, b, c)
    (re.compile(r"^What is (\d+) \+ (\d+)\?$"), "a+b", (0, 1, None)),
    (re.compile(r"^What is (\d+) - (\d+)\?$"), "a-b", (0, 1, None)),
    (re.compile(r"^What is (\d+) \* (\d+)\?$"), "a*c", (0, None, 1)),
    (re.compile(r"^What is \((\d+) \+ (\d+)\) \* (\d+)\?$"), "(a+b)*c", (0, 1, 2)),
    (re.compile(r"^What is (\d+) \* (\d+) - (\d+)\?$"), "a*c-b", (0, 2, 1)),
)


def build_tokenizer() -> Tokenizer:
    """Byte-level BPE (any text encodes) with one token per number below 100, spaces dropped."""
    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    merges: list[tuple[str, str]] = []

    def merge(left: str, right: str) -> None:
        merges.append((left, right))
        vocab.setdefault(left + right, len(vocab))

    for tens in "0123456789":  # "00".."09" too: the answer's last two digits
        for unit in "0123456789":
            merge(tens, unit)
    for word in WORDS:
        for i in range(1, len(word)):
            merge(word[:i], word[i])
    for n in range(MAX_VALUE + 1):  # scratchpad values, written by the model only (input has no spaces)
        vocab.setdefault(f"{SP}{n}", len(vocab))
    for token in (MARK, *OPS.values(), *PLACES):
        vocab.setdefault(token, len(vocab))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.normalizer = normalizers.Replace(" ", "")
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    special = [BOS, EOS, PAD, *CHAT_SPECIAL]
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in special])
    bos = tok.token_to_id(BOS)
    tok.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B",
                                                       special_tokens=[(BOS, bos)])
    return tok


def parse(question: str) -> tuple[str, int, int, int]:
    """``(shape, a, b, c)`` of a generated question (0 for an operand the shape does not have)."""
    for pattern, shape, order in SHAPES:
        m = pattern.match(question)
        if m:
            groups = [int(g) for g in m.groups()]
            a, b, c = (groups[i] if i is not None else 0 for i in order)
            return shape, a, b, c
    raise SystemExit(f"train_arithmetic_model.py: unknown question shape {question!r}; teach parse() the "
                     "generator's new shape (pytest_sglang/accuracy/arithmetic.py)")


def _digits(n: int) -> list[int]:
    return [(n // 10**k) % 10 for k in range(4)]


class Trace:
    """The scratchpad lines of one question, then the answer, as token ids."""

    def __init__(self, tok: Tokenizer) -> None:
        self.tok = tok
        self.lines: list[tuple[str, list[int], list[int], list[int]]] = []

    def line(self, op: str, xs: Sequence[int], ys: Sequence[int]) -> list[int]:
        rs: list[int] = []
        for k in range(4):
            if op == "add":
                r = xs[k] + ys[k] + (rs[k - 1] // 10 if k else 0)
            elif op in ("sub", "neg"):  # r - 10 is the column difference; r < 10 means a borrow
                r = xs[k] - ys[k] - (1 if k and rs[k - 1] < 10 else 0) + 10
            elif op == "mul":
                r = xs[k] * ys[k]
            else:  # carry: a product line's columns into digits
                r = xs[k] % 10 + ys[k] // 10 + (rs[k - 1] // 10 if k else 0)
            rs.append(r)
        self.lines.append((op, list(xs), list(ys), rs))
        return rs

    def subtract(self, xs: Sequence[int], ys: Sequence[int]) -> bool:
        """x - y; when it borrows past the last place the result is negative: y - x, then a minus sign."""
        if self.line("sub", xs, ys)[3] >= 10:
            return False
        self.line("neg", ys, xs)
        return True

    def product(self, xs: Sequence[int], c: int) -> list[int]:
        p = self.line("mul", xs, [c] * 4)
        return self.line("carry", p, [0, *p[:3]])

    def ids(self, negative: bool) -> list[int]:
        def tid(token: str) -> int:
            found = self.tok.token_to_id(token)
            if found is None:  # a value out of the vocabulary: the generator's ranges grew
                raise SystemExit(f"train_arithmetic_model.py: no token for {token!r}; widen MAX_VALUE or the answer")
            return found

        out: list[int] = []
        for op, xs, ys, rs in self.lines:
            out.append(tid(OPS[op]))
            for k in range(4):
                out += [tid(PLACES[k]), tid(f"{SP}{xs[k]}"), tid(f"{SP}{ys[k]}"), tid(f"{SP}{rs[k]}")]
        value = sum(r % 10 * 10**k for k, r in enumerate(self.lines[-1][3]))
        if negative:  # |value| < 100 for every negative answer of the generator
            head, tail = "-", str(value)
        elif value >= 100:
            head, tail = str(value // 100), f"{value % 100:02d}"
        else:
            head, tail = SP, str(value)
        return [*out, tid(MARK), tid(head), tid(tail), tid(EOS)]


def answer_ids(tok: Tokenizer, question: str) -> list[int]:
    """The token ids the model is taught to write after ``Answer:`` for ``question``."""
    shape, a, b, c = parse(question)
    trace, negative = Trace(tok), False
    if shape == "a+b":
        trace.line("add", _digits(a), _digits(b))
    elif shape == "a-b":
        negative = trace.subtract(_digits(a), _digits(b))
    elif shape == "a*c":
        trace.product(_digits(a), c)
    elif shape == "(a+b)*c":
        total = trace.line("add", _digits(a), _digits(b))
        trace.product([r % 10 for r in total], c)
    else:
        negative = trace.subtract([r % 10 for r in trace.product(_digits(a), c)], _digits(b))
    return trace.ids(negative)
