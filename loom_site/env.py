"""Strict parsing of environment settings.

A typo in a setting must stop the boot with the setting's name, not run on a
silent default: `LOOM_X=ture` is an error, not `False`.
"""

import json
import os
import re
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

# The settings table (docs/operating.md, "Settings") is the reads themselves: each states what it means (`doc`),
# `python -m loom_site.env` prints the table and a test keeps the page equal to it. A read without `doc` is a
# ranking knob, documented in its own table (retrieval/knobs.py).
ABOVE = "〃"  # this setting shares the row of the one read just before it


@dataclass(frozen=True)
class Read:
    name: str
    shown: str  # the default, as the table shows it
    doc: str | None


READS: dict[str, Read] = {}


def _noted(name: str, default, doc: str | None, shown: str | None) -> None:
    READS.setdefault(name, Read(name, shown if shown is not None else _shown(default), doc))


def _shown(default) -> str:
    if isinstance(default, bool):
        return f"`{str(default).lower()}`"
    if isinstance(default, (list, tuple)):
        return f"`{','.join(default)}`" if default else "unset"
    if default == "":
        return "unset"
    if isinstance(default, str):
        return f"`{default}`"
    if isinstance(default, float) and default.is_integer():
        return str(int(default))
    return str(default)


def markdown() -> str:
    """The settings table, a row per setting (or per settings read together), in the order loom_site/settings/ reads them."""
    rows: list[tuple[list[str], list[str], str]] = []
    for read in READS.values():
        if read.doc == ABOVE:
            rows[-1][0].append(f"`{read.name}`")
            rows[-1][1].append(read.shown)
        elif read.doc is not None:
            rows.append(([f"`{read.name}`"], [read.shown], read.doc))
    lines = [f"| {', '.join(names)} | {', '.join(shown)} | {doc} |" for names, shown, doc in rows]
    return "\n".join(["| Setting | Default | |", "|---|---|---|", *lines])


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _raw(name: str) -> str | None:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return None
    return value.strip()


def string(name: str, default: str = "", *, doc: str | None = None, shown: str | None = None) -> str:
    _noted(name, default, doc, shown)
    value = _raw(name)
    return default if value is None else value


def boolean(name: str, default: bool, *, doc: str | None = None, shown: str | None = None) -> bool:
    _noted(name, default, doc, shown)
    value = _raw(name)
    if value is None:
        return default
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean (use true or false)")


def integer(
    name: str,
    default: int,
    minimum: int | None = None,
    maximum: int | None = None,
    *,
    doc: str | None = None,
    shown: str | None = None,
) -> int:
    _noted(name, default, doc, shown)
    value = _raw(name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer") from None
    _check_range(name, number, minimum, maximum)
    return number


def number(
    name: str,
    default: float,
    minimum: float | None = None,
    maximum: float | None = None,
    *,
    doc: str | None = None,
    shown: str | None = None,
) -> float:
    _noted(name, default, doc, shown)
    value = _raw(name)
    if value is None:
        return default
    try:
        parsed = float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a number") from None
    if parsed != parsed or parsed in (float("inf"), float("-inf")):
        raise ImproperlyConfigured(f"{name}={value!r} is not a finite number")
    _check_range(name, parsed, minimum, maximum)
    return parsed


def choice(
    name: str, default: str, choices: tuple[str, ...], *, doc: str | None = None, shown: str | None = None
) -> str:
    _noted(name, default, doc, shown)
    value = string(name, default)
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r} must be one of: {', '.join(choices)}")
    return value


def strings(name: str, default: tuple[str, ...] = (), *, doc: str | None = None, shown: str | None = None) -> list[str]:
    _noted(name, default, doc, shown)
    value = _raw(name)
    if value is None:
        return list(default)
    return [part.strip() for part in value.split(",") if part.strip()]


def _check_range(name, value, minimum, maximum):
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} is below the minimum {minimum}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name}={value} is above the maximum {maximum}")


def _json(name: str, raw: str):
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} is not JSON: {exc}") from None


def check_identity_headers(raw: str, gateway_hosts: list[str]) -> None:
    """LOOM_INFERENCE_IDENTITY_HEADERS_JSON: an object of header name -> template; it needs gateway hosts."""
    if not raw:
        return
    templates = _json("LOOM_INFERENCE_IDENTITY_HEADERS_JSON", raw)
    if not isinstance(templates, dict) or not all(isinstance(v, str) for v in templates.values()):
        raise ImproperlyConfigured("LOOM_INFERENCE_IDENTITY_HEADERS_JSON must map header names to template strings")
    if not gateway_hosts:
        raise ImproperlyConfigured("LOOM_INFERENCE_IDENTITY_HEADERS_JSON needs LOOM_INFERENCE_GATEWAY_HOSTS")


def check_feature_map(raw: str) -> None:
    """LOOM_INFERENCE_FEATURE_MAP_JSON: an object of Loom's feature name -> the gateway's."""
    if not raw:
        return
    names = _json("LOOM_INFERENCE_FEATURE_MAP_JSON", raw)
    if not isinstance(names, dict) or not all(isinstance(v, str) and v for v in names.values()):
        raise ImproperlyConfigured("LOOM_INFERENCE_FEATURE_MAP_JSON must map feature names to non-empty strings")


def check_customer_required(required: bool, header: str) -> None:
    """LOOM_INFERENCE_CUSTOMER_REQUIRED: a cell serving several customers does not start without the header."""
    if required and not header:
        raise ImproperlyConfigured(
            "LOOM_INFERENCE_CUSTOMER_REQUIRED is set: LOOM_INFERENCE_CUSTOMER_HEADER must be too"
        )


def check_refusals(raw: str) -> None:
    """LOOM_INFERENCE_IDENTITY_REFUSALS_JSON: {"refused": [...], "wait": [...]}, each entry a status and a match."""
    table = _json("LOOM_INFERENCE_IDENTITY_REFUSALS_JSON", raw)
    if not isinstance(table, dict) or set(table) - {"refused", "wait"}:
        raise ImproperlyConfigured('LOOM_INFERENCE_IDENTITY_REFUSALS_JSON must be {"refused": [...], "wait": [...]}')
    for entry in (entry for entries in table.values() for entry in entries):
        if not isinstance(entry.get("status"), int) or not {"code", "type", "message"} & set(entry):
            raise ImproperlyConfigured(
                f"LOOM_INFERENCE_IDENTITY_REFUSALS_JSON entry {entry}: needs a status and a code, type or message"
            )


def check_cluster(cluster: str, url: str, nodes: list[str]) -> None:
    """LOOM_CLICKHOUSE_CLUSTER: a cluster name as the server's remote_servers spells it, served through a server."""
    if cluster and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", cluster):
        raise ImproperlyConfigured(f"LOOM_CLICKHOUSE_CLUSTER={cluster!r} is not a plain identifier")
    if cluster and not url:
        raise ImproperlyConfigured("LOOM_CLICKHOUSE_CLUSTER needs LOOM_CLICKHOUSE_URL (a node of the cluster)")
    if nodes and not cluster:
        raise ImproperlyConfigured("LOOM_CLICKHOUSE_CLUSTER_NODES needs LOOM_CLICKHOUSE_CLUSTER")


def check_rerank_endpoints(raw: str) -> None:
    """LOOM_RERANK_ENDPOINTS_JSON: {"name": {"url": "http(s)://...", "model": "...", "api_key_env": "..."}}."""
    if not raw:
        return
    table = _json("LOOM_RERANK_ENDPOINTS_JSON", raw)
    if not isinstance(table, dict):
        raise ImproperlyConfigured('LOOM_RERANK_ENDPOINTS_JSON must be {"name": {"url": ..., "model": ...}, ...}')
    for name, endpoint in table.items():
        if name.startswith("builtin:") or "://" in name or name == "none":
            raise ImproperlyConfigured(f"LOOM_RERANK_ENDPOINTS_JSON: {name!r} is not a name an endpoint may take")
        if not isinstance(endpoint, dict) or not str(endpoint.get("url", "")).startswith(("http://", "https://")):
            raise ImproperlyConfigured(f"LOOM_RERANK_ENDPOINTS_JSON[{name!r}] needs an http(s) url")
        if set(endpoint) - {"url", "model", "api_key_env"}:
            raise ImproperlyConfigured(
                f"LOOM_RERANK_ENDPOINTS_JSON[{name!r}]: unknown fields {sorted(set(endpoint) - {'url', 'model', 'api_key_env'})}"
            )


if __name__ == "__main__":  # the table docs/operating.md shows
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "loom_site.settings")
    django.setup()
    from loom_site import env  # the module the settings read through (this file runs as __main__)

    print(env.markdown())
