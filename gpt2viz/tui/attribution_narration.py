"""What "which parts wrote the answer" says, from this run's numbers only.

Every sentence is a whole template (`attribution.*` in gpt2viz/i18n/<lang>/attribution.py); the
functions below decide which sentences apply and format the numbers, the same in every language.
Keys named in a sentence come in as parameters (the screen passes its keys as they are bound now).
No torch here: the screen's workers hand over plain results (`Attribution`, `PatchingResult`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from rich.cells import cell_len

from ..attribution import Attribution
from ..i18n import N_, _, count, ngettext, say
from ..patching import PatchingResult
from ..text_safety import safe_line
from ..trace import Trace
from .facts import hook_event
from .formatting import fit, num, percent, quote

TOLERANCE = 1e-3  # how close the terms must add up to the logit (issue 15)
TOP_CANDIDATES = 5  # the next tokens the attribution takes turns over


@dataclass(frozen=True)
class Candidate:
    """One of the model's most likely next tokens, as the trace recorded it."""

    token_id: int
    text: str  # display text ('␣not')
    prob: float


def candidates(trace: Trace, k: int = TOP_CANDIDATES) -> list[Candidate]:
    """The `k` most likely next tokens after the last position, most likely first."""
    positions = hook_event(trace, "unembed.hook_out").get("positions") or [{}]
    top = positions[-1]
    rows = zip(top.get("ids", []), top.get("tokens", []), top.get("probs", []))
    return [Candidate(int(i), text, float(p)) for i, text, p in list(rows)[:k]]


def signed(x: float) -> str:
    """A term with its sign: '+1.23', '-0.0456'."""
    return ("+" if x > 0 else "") + num(x)


def share(x: float) -> str:
    """A restored share as the patching heatmap prints it: '0.87', '-0.16', '1.34'."""
    return f"{x:.2f}"


def precise(x: float) -> str:
    """A logit to seven significant digits, so that a sum and the logit can be told apart."""
    return num(x, 7)


def difference(x: float) -> str:
    """How far the sum of the terms is from the logit: '4.7e-07'."""
    return num(x, 2)


# -- direct logit attribution ----------------------------------------------------------------------


def _biased(a: Attribution) -> bool:
    """Whether `a`'s model has a position table and biases (GPT-2), whose terms are shown; a
    LLaMA-family model has neither, and no β."""
    return a.architecture != "llama"


def grid_columns(n_head: int, biased: bool = True) -> list[str]:
    """The grid's column labels: the heads, then the MLP and (GPT-2) the attention bias."""
    return [str(h) for h in range(n_head)] + ["MLP"] + ([_("bias")] if biased else [])


def grid_values(a: Attribution) -> list[list[float]]:
    """[block][column]: each head's term, then the MLP's and (GPT-2) the attention bias's."""
    if not _biased(a):
        return [heads + [mlp] for heads, mlp in zip(a.heads, a.mlp)]
    return [heads + [mlp, bias] for heads, mlp, bias in zip(a.heads, a.mlp, a.attn_bias)]


def named_terms(a: Attribution) -> list[tuple[str, float]]:
    """Every term of `a` with the name a sentence gives its part."""
    biased = _biased(a)
    terms = [(_("the token embedding"), a.embed)] + ([(_("the position embedding"), a.pos_embed)] if biased else [])
    for layer, heads in enumerate(a.heads):
        terms += [(_("head {head} of block {layer}").format(head=h, layer=layer), x) for h, x in enumerate(heads)]
        terms.append((_("the MLP of block {layer}").format(layer=layer), a.mlp[layer]))
        if biased:
            terms.append((_("the attention bias of block {layer}").format(layer=layer), a.attn_bias[layer]))
    if biased:
        terms.append((_("the final LayerNorm's β"), a.ln_bias))
    return terms


def term_lines(a: Attribution) -> str:
    """The terms that are not in the grid, the grid's totals, and the sum against the logit, as an
    aligned table (by terminal cells: Chinese labels take two per character)."""
    biased = _biased(a)
    rows = [
        (_("token embedding (wte)") if biased else _("token embedding (embed_tokens)"), signed(a.embed)),
        *([(_("position embedding (wpe)"), signed(a.pos_embed)), (_("final LayerNorm β"), signed(a.ln_bias))] if biased else []),
        (_("all heads"), signed(sum(map(sum, a.heads)))),
        (_("all MLPs"), signed(sum(a.mlp))),
        *([(_("all attention biases"), signed(sum(a.attn_bias)))] if biased else []),
        (_("sum of the terms"), precise(a.total)),
        (_("the model's logit"), precise(a.logit)),
    ]
    label_width = max(cell_len(label) for label, _value in rows) + 2
    value_width = max(len(value) for _label, value in rows)
    return "\n".join(fit(label, label_width) + fit(value, value_width, "right") for label, value in rows)


def dla_title(a: Attribution, candidate: Candidate, rank: int, n: int) -> str:
    """The line above the grid."""
    return _("The logit of {token}: {logit} (candidate {rank} of {n})").format(
        token=quote(candidate.text), logit=num(a.logit), rank=rank, n=count(n)
    )


def dla_text(
    a: Attribution, candidate: Candidate, rank: int, n: int, last_token: str, position: int, dtype: str, key: str = "t"
) -> str:
    """The narration beside the grid: what a term is, how to read the grid, the check of the sum,
    the largest terms, the totals by kind, and what direct means."""
    token = quote(candidate.text)
    biased = _biased(a)
    paragraphs = [
        say(
            "attribution.dla.what" if biased else "attribution.dla.what_llama", token=token, position=position,
            last=quote(last_token), logit=num(a.logit), rank=rank, prob=percent(candidate.prob),
        ),
        say(
            "attribution.dla.grid", last_head=len(a.heads[0]) - 1, mlp="MLP", bias=_("bias"),
            scale=num(grid_scale(a), 2),
        ) if biased else say("attribution.dla.grid_llama", last_head=len(a.heads[0]) - 1, mlp="MLP",
                             scale=num(grid_scale(a), 2)),
    ]
    diff = abs(a.total - a.logit)
    facts = dict(total=precise(a.total), logit=precise(a.logit), diff=difference(diff), tolerance=num(TOLERANCE, 1))
    if diff <= TOLERANCE:
        paragraphs.append(say("attribution.dla.sum", **facts))
    else:
        paragraphs.append(say("attribution.dla.sum_off", dtype=dtype, **facts))
    ranked = sorted(named_terms(a), key=lambda term: term[1], reverse=True)
    (first, v1), (second, v2), (third, v3), (lowest, v4) = ranked[0], ranked[1], ranked[2], ranked[-1]
    paragraphs.append(
        say(
            "attribution.dla.largest", first=first, first_value=signed(v1), second=second, second_value=signed(v2),
            third=third, third_value=signed(v3), lowest=lowest, lowest_value=signed(v4),
        )
    )
    if biased:
        groups = say(
            "attribution.dla.groups", heads=signed(sum(map(sum, a.heads))), mlps=signed(sum(a.mlp)),
            embeddings=signed(a.embed + a.pos_embed), biases=signed(sum(a.attn_bias)), ln_bias=signed(a.ln_bias),
        )
    else:
        groups = say("attribution.dla.groups_llama", heads=signed(sum(map(sum, a.heads))), mlps=signed(sum(a.mlp)),
                     embedding=signed(a.embed))
    paragraphs.append(groups)
    paragraphs.append(say("attribution.dla.direct"))
    if n > 1:
        paragraphs.append(say("attribution.dla.choose", key=key, n=count(n)))
    return "\n\n".join(paragraphs)


def grid_scale(a: Attribution) -> float:
    """Where the grid's colours end: its largest |term|."""
    return max((abs(x) for row in grid_values(a) for x in row), default=1.0) or 1.0


# -- activation patching -----------------------------------------------------------------------------


def tokens_text(n: int) -> str:
    return ngettext("{n} token", "{n} tokens", n).format(n=count(n))


def patch_idle_text(clean_prompt: str, n_tokens: int, enter: str) -> str:
    return say("attribution.patch.idle", clean=f'"{safe_line(clean_prompt)}"', tokens=tokens_text(n_tokens), enter=enter)


def strongest(restored: list[list[float]]) -> tuple[int, int]:
    """(block, position) of the cell that brings back the most."""
    cells = [(value, block, pos) for block, row in enumerate(restored) for pos, value in enumerate(row)]
    _value, block, pos = max(cells, key=lambda cell: cell[0])
    return block, pos


def patch_text(
    result: PatchingResult, clean_ids: list[int], corrupted_ids: list[int], tokens: list[str], answers: tuple[str, str]
) -> str:
    """What the patching run found: the two answers and their leads, how to read a cell, the
    strongest cell, and (when the prompts differ at one position) the first and last block."""
    clean, corrupted = quote(answers[0]), quote(answers[1])
    restored = result.restored
    paragraphs = [
        say(
            "attribution.patch.answers", clean=clean, corrupted=corrupted, clean_diff=num(result.clean_diff),
            corrupted_diff=num(result.corrupted_diff),
        ),
        say("attribution.patch.cells"),
    ]
    block, pos = strongest(restored)
    paragraphs.append(
        say("attribution.patch.strongest", block=block, position=pos, token=quote(tokens[pos]), restored=share(restored[block][pos]))
    )
    differ = [p for p, (a, b) in enumerate(zip(clean_ids, corrupted_ids)) if a != b]
    last = len(restored) - 1
    if len(differ) == 1 and last > 0:
        p = differ[0]
        paragraphs.append(
            say(
                "attribution.patch.moves", position=p, token=quote(tokens[p]), first=share(restored[0][p]),
                last_block=last, last_token=quote(tokens[-1]), last=share(restored[last][-1]),
            )
        )
    return "\n\n".join(paragraphs)


# -- a corrupted prompt to start from ------------------------------------------------------------------

# Words and a counterpart of the same kind: a one-word change the next token is likely to depend on.
_PAIRS = (
    ("life", "love"), ("death", "birth"), ("man", "woman"), ("he", "she"), ("his", "her"), ("boy", "girl"),
    ("king", "queen"), ("cat", "dog"), ("day", "night"), ("good", "bad"), ("big", "small"), ("hot", "cold"),
    ("black", "white"), ("first", "last"), ("up", "down"), ("yes", "no"), ("sun", "moon"), ("true", "false"),
    ("left", "right"), ("old", "young"), ("summer", "winter"), ("before", "after"), ("always", "never"),
    ("France", "Germany"), ("Paris", "Berlin"), ("English", "French"), ("John", "Mary"), ("Monday", "Friday"),
)
SWAPS = {a.lower(): b for a, b in _PAIRS} | {b.lower(): a for a, b in _PAIRS}


def default_corruption(prompt: str, encode: Callable[[str], list[int]]) -> str:
    """`prompt` with its last word that has a counterpart swapped for it ('life' -> 'love'), if the
    result has as many tokens; else '' (the user types one)."""
    n = len(encode(prompt))
    for match in reversed(list(re.finditer(r"[A-Za-z]+", prompt))):
        word = match.group()
        other = SWAPS.get(word.lower())
        if other is None:
            continue
        if word[0].isupper():
            other = other[0].upper() + other[1:]
        changed = prompt[: match.start()] + other + prompt[match.end() :]
        if len(encode(changed)) == n:
            return changed
    return ""


# -- heads at work (gpt2viz.head_detector) ---------------------------------------------------------

# The jobs the detector scores, then the attention sink read off this pass: the tab's order.
HEAD_JOBS = ("induction", "previous_token", "duplicate_token", "sink")
JOB_NAMES = {
    "induction": N_("induction"),
    "previous_token": N_("previous token"),
    "duplicate_token": N_("duplicate token"),
    "sink": N_("attention sink"),
}


def head_name(layer: int, head: int) -> str:
    """'L18H6': TransformerLens's name of a head, the same in every language."""
    return f"L{layer}H{head}"


def sink_shares(trace) -> list[list[float]]:
    """[block][head]: the share of the last position's attention that goes to position 0 in this
    pass (what an attention sink gathers)."""
    from .facts import RunFacts, last_row

    f = RunFacts.of(trace)
    return [[(last_row(trace, layer, h) or [0.0])[0] or 0.0 for h in range(f.n_head)] for layer in range(f.n_layer)]


def heads_text(scores, trace, tokens: list[str], key: str) -> str:
    """The tab's words: how heads are scored, what each job found (or that none does it), and the
    attention sink of this pass; `key` shows the next job's grid."""
    n = (scores.tokens.numel() - 1) // 2
    layer, head, _score = scores.top("induction", 1)[0]  # the name explained on a head of this model
    paragraphs = [say(
        "attribution.heads.intro", n=count(n), T=count(scores.tokens.numel()), best=num(scores.best["induction"], 2),
        chance=num(scores.chance["induction"], 2), key=key, name=head_name(layer, head), layer=layer, head=head,
    )]
    for job in HEAD_JOBS[:3]:
        found = scores.found(job)[:3]
        facts = {"job": _(JOB_NAMES[job]), "best": num(scores.best[job], 2), "chance": num(scores.chance[job], 2)}
        if found:
            heads = _(", ").join(f"{head_name(layer, head)} {num(score, 2)}" for layer, head, score in found)
            paragraphs.append(say("attribution.heads.found", heads=heads, **facts))
        else:
            layer, head, score = scores.top(job, 1)[0]
            paragraphs.append(say("attribution.heads.none", head=head_name(layer, head), score=num(score, 2), **facts))
    shares = sink_shares(trace)
    flat = [(share, layer, h) for layer, row in enumerate(shares) for h, share in enumerate(row)]
    share, layer, h = max(flat)
    over_half = sum(1 for s, _l, _h in flat if s > 0.5)
    facts = {"token": quote(tokens[-1]), "first": quote(tokens[0]), "head": head_name(layer, h), "share": percent(share),
             "total": count(len(flat))}
    if len(tokens) < 2:
        paragraphs.append(say("attribution.heads.sink_single"))
    elif over_half:
        paragraphs.append(say("attribution.heads.sink", n=count(over_half), **facts))
    else:
        paragraphs.append(say("attribution.heads.sink_none", **facts))
    return "\n\n".join(paragraphs)


def heads_grid_title(job: str, scores) -> str:
    """The line over a job's grid."""
    if job == "sink":
        return _("Attention sink: the share of the last position's attention on position 0, block × head")
    return _("{job} scores, block × head (a perfect head: {best})").format(job=_(JOB_NAMES[job]), best=num(scores.best[job], 2))
