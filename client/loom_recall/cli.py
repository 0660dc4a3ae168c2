"""`loom`: any op from a shell, over the same client.

    loom memory-set deploy.window "Production deploys run Tuesdays at 10:00 UTC" --tags '["deploy"]'
    loom memory-search "when do deploys run?" --top-k 3

The op is its name with dashes (`memory.search` is `memory-search`); its first fields may come by position, as
`Agent`'s methods take them, the rest as `--field value` (a value that reads as JSON is that: 3, true, a list;
else text). LOOM_URL and LOOM_TOKEN, or --url and --token, say where and as whom; --namespace (default `default`).
Prints the answer as JSON; a refusal prints `CODE: message (field)` on stderr and exits 1.
"""

import argparse
import json
import sys

from loom_recall._ops import OPS as EVERY_OP
from loom_recall.agent import POSITIONAL, body_of
from loom_recall.client import Client, LoomError

OPS = {op.replace(".", "-").replace("_", "-"): op for op in EVERY_OP}


def _value(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse(argv: list[str]) -> tuple[argparse.Namespace, str, tuple, dict]:
    parser = argparse.ArgumentParser(prog="loom", description=__doc__.splitlines()[0])
    parser.add_argument("op", choices=sorted(OPS), metavar="OP", help="an op, dashed: memory-search, memory-set, ...")
    parser.add_argument("--url", help="default LOOM_URL, else http://127.0.0.1:8000")
    parser.add_argument("--token", help="default LOOM_TOKEN")
    parser.add_argument("--namespace", default="default")
    known, rest = parser.parse_known_args(argv)
    op, args, fields = OPS[known.op], [], {}
    while rest:
        word = rest.pop(0)
        if word.startswith("--"):
            name, _, given = word[2:].partition("=")
            if not given and not rest:
                parser.error(f"{word} needs a value")
            fields[name.replace("-", "_")] = _value(given or rest.pop(0))
        else:
            args.append(word)
    if len(args) > len(POSITIONAL.get(op, ())):
        parser.error(f"{known.op} takes {' '.join(POSITIONAL.get(op, ())) or 'no'} positional arguments")
    return known, op, tuple(args), fields


def main(argv: list[str] | None = None) -> int:
    known, op, args, fields = parse(sys.argv[1:] if argv is None else argv)
    try:
        with Client(known.url, known.token, namespace=known.namespace) as loom:
            answer = loom._op(op, body_of(op, args, fields))
    except (LoomError, ValueError) as refused:
        print(refused, file=sys.stderr)
        return 1
    print(json.dumps(answer, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
