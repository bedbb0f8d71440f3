#!/usr/bin/env bash
# Prints the tests that skipped for lack of a model or reference during the
# last run (recorded only when MINFER_REQUIRE_MODELS=0 allowed skipping), and
# clears the record. Usage: rm -f target/minfer-skipped.txt; cargo test ...;
# scripts/test-summary.sh
cd "$(dirname "$0")/.." || exit 1
ledger=target/minfer-skipped.txt
if [ -s "$ledger" ]; then
    n=$(wc -l < "$ledger")
    echo "SKIPPED: $n test(s) did not run for lack of a model or reference:"
    sed 's/^/  /' "$ledger"
    rm -f "$ledger"
else
    echo "skipped: none (every real-model and reference test ran)"
fi
