"""How the make-*-golden scripts write their golden file."""

import json
import sys


def write_golden(path, doc, indent: int, summary: str) -> int:
    """Writes `doc` to `path` as UTF-8 JSON indented by `indent`, non-ASCII
    text as itself, with a final newline; says `wrote PATH: SUMMARY` on
    stderr. Returns 0, the exit status of a script that got this far."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=indent, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {path}: {summary}", file=sys.stderr)
    return 0
