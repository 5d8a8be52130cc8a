"""The picture of the Model files stage: config.json's settings and what each controls, the
safetensors tensors in groups (one block's tensors standing for all blocks), how they were read,
the tokenizer, and the map of the model these files make."""

from __future__ import annotations

from rich.cells import cell_len
from textual.content import Content

from ...text_safety import safe_line
from ...i18n import _, ngettext
from ...model.files import BUFFER, LM_HEAD
from ...trace import Trace
from ..facts import RunFacts
from ..file_facts import LENGTH_BYTES, FileFacts, StoredFile, TensorRow, TokenizerFacts, WeightFacts
from ..formatting import count, fit, nbytes, shape
from ..language import key_name
from ..model_files_narration import files_bytes, meaning, special_token, value_text
from ..stages import Stage
from ..table_layout import Column, header_lines, wrapped
from .model_map import map_lines
from .pictures import Picture, lines

MEANING_MIN = 24  # cells a setting's meaning needs beside it; narrower, it goes on the line below
INDENT = 2


class ModelFilesPicture(Picture):
    """config.json, the safetensors file(s) and the tokenizer as the loader saw them, then the map."""

    def build(self, trace: Trace, stage: Stage, head: int) -> Content:
        facts = FileFacts.of(trace)
        rows = self._config(trace, facts)
        if facts.weights is not None:
            rows += [Content(""), *self._weights(trace, facts.weights)]
        if facts.tokenizer is not None:
            rows += [Content(""), *self._tokenizer(facts.tokenizer)]
        try:
            key = key_name(self, "show_map")
        except KeyError:  # drawn outside the step-through (a test's bare widget)
            key = "o"
        heading = _("The model these files make ({key}: this map at any stage)").format(key=key)
        rows += [Content(""), *wrapped(Content.styled(heading, ".picture--header"), self.room)]
        rows += map_lines(trace, stage, self.room)
        return lines(rows)

    # -- config.json ---------------------------------------------------------------------------
    def _config(self, trace: Trace, facts: FileFacts) -> list[Content]:
        room = self.room
        if facts.config_file is not None:
            title = _("{file} · {bytes}").format(file=facts.config_file.name, bytes=nbytes(facts.config_file.bytes))
        elif (trace.model.get("source") or {}).get("kind") in ("gguf", "package"):  # no config.json: the file's header
            title = _("the model's settings, as gpt2viz read them from the GGUF file's header")
        elif RunFacts.of(trace).llama:
            title = _("the model's config, as gpt2viz read it (gpt2viz does not record a LLaMA-family model's config.json, "
                      "tensors and tokenizer file yet)")
        else:
            title = _("the trace's config (config.json itself was not recorded)")
        rows = wrapped(Content.styled(title, ".picture--header"), room)
        d_mlp, llama = RunFacts.of(trace).d_mlp, RunFacts.of(trace).llama
        settings = facts.settings
        key_width = min(22, max(cell_len(s.key) for s in settings))
        value_width = min(14, max(cell_len(value_text(s)) for s in settings))
        x = INDENT + key_width + 2 + value_width + 2
        beside = room - x >= MEANING_MIN
        columns = [(Column(INDENT, key_width), _("key")), (Column(INDENT + key_width + 2, value_width, "right"), _("value"))]
        if beside:
            columns.append((Column(x, room - x), _("what it controls")))
        rows += header_lines(columns, room, ".picture--dim")
        for setting in settings:
            line = Content.assemble(
                " " * INDENT, (fit(setting.key, key_width), ".picture--token"), "  ", fit(value_text(setting), value_width, "right"),
            )
            said = meaning(setting, d_mlp, llama)
            if beside:
                first, *more = wrapped(said, room - x) if said else [Content("")]
                rows.append(Content.assemble(line, "  ", first.stylize_before(".picture--dim")))
                rows += [Content.assemble(" " * x, m.stylize_before(".picture--dim")) for m in more]
            else:
                rows.append(line)
                rows += [Content.assemble(" " * (2 * INDENT), m.stylize_before(".picture--dim"))
                         for m in (wrapped(said, room - 2 * INDENT) if said else [])]
        if facts.other_keys:
            others = ngettext(
                "+ {n} other key: a training or library setting, not used by a forward pass",
                "+ {n} other keys: training and library settings, not used by a forward pass",
                facts.other_keys,
            ).format(n=count(facts.other_keys))
            rows += wrapped(Content.styled(" " * INDENT + others, ".picture--dim"), room, indent=2 * INDENT)
        return rows

    # -- model.safetensors ---------------------------------------------------------------------
    def _weights(self, trace: Trace, w: WeightFacts) -> list[Content]:
        room = self.room
        rows: list[Content] = []
        for f in w.files:
            rows += wrapped(Content.styled(self._file_title(f), ".picture--header"), room)
        # The header as the narration counts it: the JSON, after each file's 8 bytes of its length.
        summary = _("{tensors} · header {length} + {json} · data {data}").format(
            tensors=ngettext("{n} tensor", "{n} tensors", w.count).format(n=count(w.count)),
            length=nbytes(LENGTH_BYTES * len(w.files)), json=nbytes(sum(f.json_bytes for f in w.files)),
            data=nbytes(w.data_bytes or 0),
        )
        rows += wrapped(Content(summary), room, indent=INDENT)
        if w.prefix:
            rows += wrapped(Content.styled(_("every name starts with {prefix}").format(prefix=w.prefix), ".picture--dim"), room)
        table = [*w.before, *(w.blocks.rows if w.blocks else ()), *w.after]
        mixed = len({r.dtype for r in table}) > 1
        if not mixed and table:
            rows += wrapped(Content.styled(_("every tensor is stored as {dtype}").format(dtype=table[0].dtype), ".picture--dim"), room)
        shape_width = max([cell_len(_("shape")), *(cell_len(shape(r.shape)) for r in table)])
        bytes_width = max([cell_len(_("bytes")), *(cell_len(count(r.bytes or 0)) for r in table),
                           cell_len(count(w.data_bytes or 0))])
        dtype_width = max([cell_len(r.dtype) for r in table] + [cell_len(_("dtype"))]) if mixed else 0
        fixed = 2 + shape_width + 2 + bytes_width + (2 + dtype_width if mixed else 0)
        block_names = [cell_len(r.name) + INDENT for r in (w.blocks.rows if w.blocks else ())]
        widest = max([cell_len(_("name")), *(cell_len(r.name) for r in (*w.before, *w.after)), *block_names])
        name_width = max(6, min(widest, room - INDENT - fixed))
        x = INDENT + name_width + 2
        columns = [(Column(INDENT, name_width), _("name")), (Column(x, shape_width), _("shape"))]
        if mixed:
            columns.append((Column(x + shape_width + 2, dtype_width), _("dtype")))
            x += dtype_width + 2
        columns.append((Column(x + shape_width + 2, bytes_width, "right"), _("bytes")))
        rows += header_lines(columns, room, ".picture--dim")

        def row(r: TensorRow, indent: int) -> Content:
            style = ".picture--dim" if r.role in (BUFFER, LM_HEAD) else ".picture--token"
            parts = [" " * indent, (fit(r.name, name_width - indent + INDENT), style), "  ", fit(shape(r.shape), shape_width)]
            if mixed:
                parts += ["  ", fit(r.dtype, dtype_width)]
            parts += ["  ", fit(count(r.bytes) if r.bytes is not None else "–", bytes_width, "right")]
            return Content.assemble(*parts).truncate(room)

        rows += [row(r, INDENT) for r in w.before]
        if w.blocks is not None:
            g = w.blocks
            group = _("h.{first} … h.{last}: {blocks} of {tensors} each, {bytes} together").format(
                first=g.first, last=g.last, blocks=ngettext("{n} block", "{n} blocks", g.blocks).format(n=count(g.blocks)),
                tensors=ngettext("{n} tensor", "{n} tensors", len(g.rows)).format(n=count(len(g.rows))), bytes=nbytes(g.bytes or 0),
            )
            rows += wrapped(Content.styled(" " * INDENT + group, ".picture--header"), room, indent=2 * INDENT)
            rows += [row(r, 2 * INDENT) for r in g.rows]
        rows += [row(r, INDENT) for r in w.after]
        total = _("{tensors} in all").format(tensors=ngettext("{n} tensor", "{n} tensors", w.count).format(n=count(w.count)))
        gap = " " * (2 + shape_width + (2 + dtype_width if mixed else 0) + 2)
        rows.append(Content.assemble(
            " " * INDENT, (fit(total, name_width), ".picture--header"), gap,
            (fit(count(w.data_bytes or 0), bytes_width, "right"), ".picture--header"),
        ).truncate(room))
        head = (_("LM head: lm_head.weight is stored, equal to wte, and not kept (tied)") if w.stores_lm_head
                else _("LM head: not stored; the logits use wte (tied)"))
        rows += wrapped(Content(" " * INDENT + head), room, indent=2 * INDENT)
        if w.in_place is not None:
            rows += wrapped(Content(" " * INDENT + self._reading(trace, w)), room, indent=2 * INDENT)
        return rows

    @staticmethod
    def _file_title(f: StoredFile) -> str:
        return _("{file} · {bytes}").format(file=f.name, bytes=nbytes(f.bytes))

    @staticmethod
    def _reading(trace: Trace, w: WeightFacts) -> str:
        """How the model came to hold the tensors."""
        facts = {"in_place": count(w.in_place or 0), "n": count(w.parameters), "copied": count(w.parameters - (w.in_place or 0)),
                 "dtype": RunFacts.of(trace).dtype, "device": safe_line(str(trace.model.get("device") or "cpu"))}
        if w.mapped is True:
            return _("memory-mapped: {in_place} of {n} used in place, {copied} copied into {dtype} on {device}").format(**facts)
        if w.mapped is False:
            return _("read into memory: {in_place} of {n} used as read, {copied} copied into {dtype} on {device}").format(**facts)
        return _("read: {in_place} of {n} used as read, {copied} copied into {dtype} on {device}").format(**facts)

    # -- the tokenizer --------------------------------------------------------------------------
    def _tokenizer(self, t: TokenizerFacts) -> list[Content]:
        room = self.room
        title = _("{files} · {bytes} · {model}").format(
            files=_(", ").join(f.name for f in t.files), bytes=nbytes(files_bytes(t.files)), model=t.model)
        rows = wrapped(Content.styled(title, ".picture--header"), room)
        facts = [
            (_("vocabulary"), ngettext("{n} token", "{n} tokens", t.vocab_size).format(n=count(t.vocab_size))),
            (_("merges"), count(t.merges) if t.merges is not None else "–"),
            (_("added tokens"), count(t.added)),
        ]
        facts += [(_("special"), special_token(i, text)) for i, text in t.special]
        width = max(cell_len(label) for label, _value in facts)
        for label, value in facts:
            line = Content.assemble((fit(label, width), ".picture--dim"), "  ", (value, ".picture--token"))
            rows += [Content.assemble(" " * INDENT, piece) for piece in wrapped(line, room - INDENT, indent=width + 2)]
        return rows
