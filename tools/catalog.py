"""Keeps the translation catalogs in step with the code (Babel's API; see docs/translating.md).

    python tools/catalog.py update [--add zh=PATH.json ...]   extract _()/N_()/ngettext() msgids,
                                  merge them into every .po (new ones empty, gone ones dropped),
                                  optionally fill translations from a JSON {msgid: translation},
                                  then compile the .mo files
    python tools/catalog.py missing                           list msgids without a translation

The JSON form lets several people (or sessions) translate in parallel without editing the .po at
the same time: the file lock below serialises the merges.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import sys
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import DEFAULT_KEYWORDS, extract_from_dir
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parent.parent
LOCALE = ROOT / "gpt2viz" / "locale"
KEYWORDS = {**DEFAULT_KEYWORDS, "N_": None}


def extract() -> Catalog:
    """Every marked msgid of the package, with where it is used."""
    template = Catalog(project="gpt2viz", fuzzy=False)
    found = extract_from_dir(ROOT / "gpt2viz", method_map=[("**.py", "python")], keywords=KEYWORDS)
    for filename, lineno, message, comments, context in found:
        template.add(message, None, [(f"gpt2viz/{filename}", lineno)], auto_comments=comments, context=context)
    return template


def po_files() -> list[Path]:
    return sorted(LOCALE.glob("*/LC_MESSAGES/gpt2viz.po"))


def read(path: Path) -> Catalog:
    with path.open("rb") as f:
        return read_po(f)


def write(path: Path, catalog: Catalog) -> None:
    tmp = path.with_suffix(".po.tmp")
    with tmp.open("wb") as f:
        write_po(f, catalog, width=100, sort_output=True, include_previous=False)
    tmp.replace(path)
    with path.with_suffix(".mo").open("wb") as f:
        write_mo(f, catalog)


def fill(catalog: Catalog, translations: dict[str, str]) -> list[str]:
    """Sets translations by msgid (a plural's singular msgid names it); returns unknown msgids."""
    unknown = []
    for msgid, text in translations.items():
        message = catalog.get(msgid)
        if message is None:
            plural = [m for m in catalog if isinstance(m.id, tuple) and m.id[0] == msgid]
            if not plural:
                unknown.append(msgid)
                continue
            message = plural[0]
        n = catalog.num_plurals
        message.string = tuple([text] * n) if isinstance(message.id, tuple) else text
        message.flags.discard("fuzzy")
    return unknown


def update(additions: list[str]) -> int:
    template = extract()
    adds: dict[str, dict[str, str]] = {}
    for spec in additions:
        lang, _, path = spec.partition("=")
        adds.setdefault(lang, {}).update(json.loads(Path(path).read_text("utf-8")))
    with (LOCALE / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for po in po_files():
            lang = po.parent.parent.name
            catalog = read(po)
            catalog.update(template, no_fuzzy_matching=True)
            catalog.obsolete.clear()
            unknown = fill(catalog, adds.get(lang, {}))
            write(po, catalog)
            for msgid in unknown:
                print(f"{lang}: not in the code, skipped: {msgid!r}", file=sys.stderr)
    return missing()


def missing() -> int:
    n = 0
    for po in po_files():
        for message in read(po):
            if not message.id:
                continue
            strings = message.string if isinstance(message.string, tuple) else (message.string,)
            if not all(strings) or message.fuzzy:
                print(f"{po.parent.parent.name}: untranslated: {message.id!r}")
                n += 1
    return 1 if n else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    up = sub.add_parser("update")
    up.add_argument("--add", action="append", default=[], metavar="LANG=JSON")
    sub.add_parser("missing")
    args = ap.parse_args()
    return update(args.add) if args.command == "update" else missing()


if __name__ == "__main__":
    sys.exit(main())
