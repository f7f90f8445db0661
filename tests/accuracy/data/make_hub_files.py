"""Write the small parquet files in the Hugging Face hub's layout that tests/accuracy reads.

Data, not tests: ``python tests/accuracy/data/make_hub_files.py`` rewrites them (needs pyarrow, the
``eval`` extra). Layout and column types as on the hub: ``openai/gsm8k`` ``main/test-00000-of-00001.parquet``
(``question``, ``answer``: strings) and ``cais/mmlu`` ``all/{test,dev}-00000-of-00001.parquet``
(``question``, ``subject``: strings, ``choices``: list of 4 strings, ``answer``: int64 0-3).
The arithmetic-style rows are ones the simulator answers; the first gsm8k row is the real first row.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).parent / "hub"

GSM8K = [
    ("Janet\u2019s ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins for her "
     "friends every day with four. She sells the remainder at the farmers' market daily for $2 per fresh duck egg. "
     "How much in dollars does she make every day at the farmers' market?",
     "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\nShe makes 9 * 2 = $<<9*2=18>>18 every day at the "
     "farmer\u2019s market.\n#### 18"),
    ("What is 12 + 30?", "12 + 30 = <<12+30=42>>42\n#### 42"),
    ("What is 7 * 8?", "7 * 8 = <<7*8=56>>56\n#### 56"),
    ("What is 1,000 + 234?", "1,000 + 234 = 1,234\n#### 1,234"),
    ("What is 90 - 45?", "90 - 45 = 45\n#### 45"),
]
MMLU_TEST = [
    ("Find all c in Z_3 such that Z_3[x]/(x^2 + c) is a field.", "abstract_algebra", ["0", "1", "2", "3"], 1),
    ("What is the embryological origin of the hyoid bone?", "anatomy",
     ["The first pharyngeal arch", "The first and second pharyngeal arches", "The second pharyngeal arch",
      "The second and third pharyngeal arches"], 3),
    ("What is 2 + 2?", "elementary_mathematics", ["3", "4", "5", "6"], 1),
]
MMLU_DEV = [
    ("Find the degree for the given field extension Q(sqrt(2), sqrt(3)) over Q.", "abstract_algebra",
     ["0", "4", "2", "6"], 1),
    ("What is 1 + 1?", "elementary_mathematics", ["1", "2", "3", "4"], 1),
]


def _mmlu(rows: list[tuple[str, str, list[str], int]]) -> pa.Table:
    q, s, c, a = zip(*rows, strict=True)
    return pa.table({"question": pa.array(q, pa.string()), "subject": pa.array(s, pa.string()),
                     "choices": pa.array(c, pa.list_(pa.string())), "answer": pa.array(a, pa.int64())})


def main() -> None:
    (HERE / "openai-gsm8k" / "main").mkdir(parents=True, exist_ok=True)
    (HERE / "cais-mmlu" / "all").mkdir(parents=True, exist_ok=True)
    q, a = zip(*GSM8K, strict=True)
    pq.write_table(pa.table({"question": pa.array(q, pa.string()), "answer": pa.array(a, pa.string())}),
                   HERE / "openai-gsm8k" / "main" / "test-00000-of-00001.parquet")
    pq.write_table(_mmlu(MMLU_TEST), HERE / "cais-mmlu" / "all" / "test-00000-of-00001.parquet")
    pq.write_table(_mmlu(MMLU_DEV), HERE / "cais-mmlu" / "all" / "dev-00000-of-00001.parquet")


if __name__ == "__main__":
    main()
