#!/usr/bin/env python3
"""Runs llama.cpp's own server test suite against `minfer serve` (or, for
the reference, llama-server built from the same sdist) and counts the
results per test file.

    python3 scripts/server-suite/run.py --engine minfer|llama --bin BINARY
        --suite DIR/tools/server/tests --model FILE [--out DIR] [--files F...]
        [--timeout SECONDS] [--port PORT] [--expect FILE] [--write-expected FILE]

DIR is llama.cpp's tree from the llama-cpp-python==0.3.36 sdist
(`vendor/llama.cpp`); `scripts/server-suite/suite.sh` fetches it and
builds both engines. Each file runs in its own pytest process (the suite's
requirements plus pytest-timeout, in the interpreter running this script)
with a per-test timeout; the servers are started through `shim.py`, which
maps llama-server's flags to minfer's and every model to MODEL. Prints a
table of passed / failed / skipped per file, with the files that are out of
scope for minfer (and why) marked, and writes it as JSON to
OUT/summary.json.

--expect FILE makes it a check: every test id listed there (one per line,
`file::test[params]`, `#` comments) must pass, else it exits 1 naming the
ones that did not. --write-expected FILE writes the ids that passed.
"""

import argparse
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Files whose features minfer does not have and does not plan: counted,
# but apart.
OUT_OF_SCOPE = {
    "test_vision_api.py": "multimodal input (mmproj)",
    "test_lora.py": "LoRA adapters",
    "test_mcp_servers.py": "the web UI's MCP proxy",
    "test_tools_builtin.py": "llama-server's built-in tools runtime",
    "test_proxy.py": "the web UI's CORS proxy",
    "test_compat_gcp.py": "Google Vertex AI's prediction routes",
    "test_ctx_shift.py": "context shift (minfer refuses a prompt past n_ctx instead)",
    "test_kv_keep_only_active.py": "llama.cpp's KV-cache internals",
    "test_sleep.py": "llama-server's idle sleep",
}


def counts(xml_path: Path, file: str) -> dict:
    out = {"passed": 0, "failed": 0, "skipped": 0, "passed_ids": []}
    if not xml_path.exists():
        return out
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        tags = {child.tag for child in case}
        if "skipped" in tags:
            out["skipped"] += 1
        elif tags & {"failure", "error"}:
            out["failed"] += 1
        else:
            out["passed"] += 1
            out["passed_ids"].append(f"{file}::{case.get('name')}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", choices=["minfer", "llama"], required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--suite", required=True, type=Path)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", type=Path, default=Path("target/server-suite"))
    ap.add_argument("--files", nargs="*")
    ap.add_argument("--timeout", type=int, default=60)
    ap.add_argument("--port", type=int, default=8080, help="where the servers listen")
    ap.add_argument("--expect", type=Path)
    ap.add_argument("--write-expected", type=Path)
    a = ap.parse_args()
    out = (a.out / a.engine).resolve()
    out.mkdir(parents=True, exist_ok=True)
    # Where the suite's tests write their files (llama.cpp's CI makes it).
    (a.suite / "tmp").mkdir(exist_ok=True)
    files = a.files or sorted(p.name for p in (a.suite / "unit").glob("test_*.py"))
    env = {
        **os.environ,
        "LLAMA_SERVER_BIN_PATH": str(HERE / "shim.py"),
        "SUITE_ENGINE": a.engine,
        "SUITE_BIN": str(Path(a.bin).resolve()),
        "SUITE_MODEL": str(Path(a.model).resolve()),
        "LLAMA_CACHE": str(out / "cache"),
        "PORT": str(a.port),
    }
    rows = {}
    for f in files:
        xml = out / f"{f}.xml"
        xml.unlink(missing_ok=True)
        with open(out / f"{f}.log", "w") as log:
            subprocess.run(
                [sys.executable, "-m", "pytest", f"unit/{f}", "-q", "-p", "no:cacheprovider",
                 f"--timeout={a.timeout}", f"--junitxml={xml}"],
                cwd=a.suite, env=env, stdout=log, stderr=subprocess.STDOUT, check=False,
            )
        rows[f] = counts(xml, f)
        rows[f]["out_of_scope"] = OUT_OF_SCOPE.get(f)
        print(f"{f:34} {rows[f]['passed']:4} passed {rows[f]['failed']:4} failed "
              f"{rows[f]['skipped']:4} skipped{'  (out of scope)' if rows[f]['out_of_scope'] else ''}",
              flush=True)
    total = {k: sum(r[k] for r in rows.values()) for k in ("passed", "failed", "skipped")}
    scope = {k: sum(r[k] for r in rows.values() if not r["out_of_scope"])
             for k in ("passed", "failed", "skipped")}
    print(f"all: {total}; in scope: {scope}")
    (out / "summary.json").write_text(json.dumps({"files": rows, "all": total, "in_scope": scope}, indent=1))
    passed = {i for r in rows.values() for i in r["passed_ids"]}
    if a.write_expected:
        a.write_expected.write_text("".join(f"{i}\n" for i in sorted(passed)))
    if a.expect:
        want = [l.strip() for l in a.expect.read_text().splitlines()
                if l.strip() and not l.startswith("#")]
        want = [w for w in want if w.split("::")[0] in files]
        lost = [w for w in want if w not in passed]
        if lost:
            print(f"{len(lost)} of the {len(want)} expected tests did not pass:", *lost, sep="\n  ")
            return 1
        print(f"all {len(want)} expected tests passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
