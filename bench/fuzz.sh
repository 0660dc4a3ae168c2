#!/bin/sh
# The API fuzz test (tests/test_api_fuzz.py) at length: N generated requests per op on each backend (default 300).
#     bench/fuzz.sh [N]
set -e
cd "$(dirname "$0")/.."
FUZZ_EXAMPLES="${1:-300}" exec .venv/bin/python -m pytest -q -n 0 -p no:cacheprovider tests/test_api_fuzz.py
