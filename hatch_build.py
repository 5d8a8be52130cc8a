"""Compiles the translation catalogs (gpt2viz/locale/*/LC_MESSAGES/*.po -> .mo) when the package
is built, so wheels and editable installs ship them; the .mo files are not kept in git."""

from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class CompileCatalogs(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version, build_data):
        from babel.messages.mofile import write_mo
        from babel.messages.pofile import read_po

        for po in sorted(Path(self.root, "gpt2viz", "locale").glob("*/LC_MESSAGES/*.po")):
            with po.open("rb") as f:
                catalog = read_po(f)
            with po.with_suffix(".mo").open("wb") as f:
                write_mo(f, catalog)
