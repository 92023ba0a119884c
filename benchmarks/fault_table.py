"""The fault campaign's table as Markdown (for the README), from what
``tests/test_fault_campaign.py`` wrote::

    JUDGECAL_WRITE_FAULT_TABLE=1 python -m pytest -q tests/test_fault_campaign.py
    python benchmarks/fault_table.py [results/fault_campaign.json]

One row per fault: how it was injected, the trials, what was lost (must be 0), answers read
as another request's or as other values (must be 0), and what was redone or retried.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

DEFAULT = Path(__file__).parent / "results" / "fault_campaign.json"
COLUMNS = ("Fault", "How injected", "Trials", "Lost", "Misread", "Redone / retried")


def cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def render(table: dict) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join(["---", "---", "--:", "--:", "--:", "---"]) + "|"]
    for row in table["rows"]:
        values = (row["fault"], row["how"], row["trials"], row["lost"], row.get("misread", 0), row["redone"])
        lines.append("| " + " | ".join(cell(v) for v in values) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else DEFAULT
    if not path.exists():
        print(f"{path}: not found; write it with JUDGECAL_WRITE_FAULT_TABLE=1 python -m pytest -q "
              "tests/test_fault_campaign.py", file=sys.stderr)
        return 2
    print(render(json.loads(path.read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
