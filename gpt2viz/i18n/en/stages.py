"""The step-through's narration: what each stage of one forward pass does, with this run's numbers
(gpt2viz/tui/narration.py decides which paragraphs apply and formats every fact)."""

TEXT = {
    "stage.note": "Note: {notice}.",
    "stage.reduced": (
        "With {positions} positions the trace keeps each map averaged over a {rows} × {cols} grid of "
        "blocks (the last query's row is kept whole, below the map)."
    ),
    "stage.flow.update": "c_proj → update {update}",
    # -- tokenize -------------------------------------------------------------------------------
    "stage.edited": (
        "Edited pass: {parts} switched off in this block (what-if). Every number of this stage comes "
        "from the edited pass, not from the model's own."
    ),
    "stage.edited_later": (
        "Edited pass: {parts} switched off in an earlier block (what-if). This stage comes after it, so its "
        "numbers are the edited pass's, not the model's own."
    ),
    "stage.edited_block_attention": (
        "What is switched off is the whole block's output: its heads' scores and patterns here are still "
        "computed as always, and neither what attention writes nor the MLP's reaches the stream."
    ),
    "stage.edited_mlp": (
        "What is switched off is the MLP's output: its neurons below still compute what they would, and "
        "what they write never reaches x (the next stage's update)."
    ),
    "stage.edited_heads": (
        "What is switched off is a head's output z: its scores and pattern here are still computed as "
        "always, and what it reads never reaches the block's update (zero, or its mean with :mean)."
    ),
    "stage.tokenize.lead": "GPT-2 never sees letters.",
    "stage.tokenize.empty": "The prompt is empty, so there is nothing to cut: the model starts from one special token.",
    "stage.tokenize.cut": "Its byte-level BPE tokenizer cuts the {bytes} of the prompt into {tokens}.",
    "stage.tokenize.cut_kept": (
        "Its byte-level BPE tokenizer cuts the {bytes} of the prompt into more tokens than fit in the "
        "context; the last {kept} ({kept_bytes}) are kept."
    ),
    "stage.tokenize.vocab": (
        "Each token is an entry of a {vocab}-entry vocabulary; from here on the model works with the ids "
        "alone. Common words are one token, rare ones are split into pieces, and a piece can even be part "
        "of a character."
    ),
    # One of these two, by the number of tokens that start with a space.
    "stage.tokenize.spaces.one": (
        "A space belongs to the token after it: {n} of these tokens starts with one, shown as ␣ (the "
        "vocabulary file writes Ġ), so {spaced} and {bare} are different tokens with different ids."
    ),
    "stage.tokenize.spaces.other": (
        "A space belongs to the token after it: {n} of these tokens start with one, shown as ␣ (the "
        "vocabulary file writes Ġ), so {spaced} and {bare} are different tokens with different ids."
    ),
    "stage.tokenize.formula": "prompt → UTF-8 bytes → BPE merges → token ids",
    "stage.tokenize.flow": '"{prompt}" ({characters}, {bytes}) → token ids, shape {shape}',
    # One of these two, by the number ({n}) of tokens before the new one.
    "stage.tokenize.decode.one": (
        "This is the forward pass of a decode step. Only one id goes in: {token} (id {id}), the token "
        "chosen at the step before, at position {position}. The {n} token before it is not run again: "
        "each layer kept its key and value in the KV cache, and this pass reads them from there. Every "
        "stage below computes one position, not the whole text."
    ),
    "stage.tokenize.decode.other": (
        "This is the forward pass of a decode step. Only one id goes in: {token} (id {id}), the token "
        "chosen at the step before, at position {position}. The {n} tokens before it are not run again: "
        "each layer kept their keys and values in the KV cache, and this pass reads them from there. "
        "Every stage below computes one position, not the whole text."
    ),
    "stage.tokenize.decode_formula": (
        "ids in = [the newest token]   (the earlier ones: keys and values in the KV cache)"
    ),
    "stage.tokenize.decode_flow": "{past} cached + 1 new → ids, shape {shape}, position {position}",
    # -- embed ----------------------------------------------------------------------------------
    "stage.embed.lookup": (
        "Each id picks one row of the token embedding table wte [{vocab} × {n_embd}]: a lookup, no "
        "multiplication. Each position p picks row p of the position table wpe [{n_ctx} × {n_embd}], "
        "which is how the model knows word order. Their sum is x, the residual stream: {T} × {n_embd} = "
        "{size} numbers, {size_bytes} bytes in {dtype}. Every block reads x and adds its result to it."
    ),
    "stage.embed.params": (
        "wte holds {wte} ({wte_millions}) of this model's {n_params} parameters ({share}); wpe holds {wpe}."
    ),
    # One of these two, by the number ({n}) of cached positions before the new token.
    "stage.embed.decode.one": (
        "The new token sits at position {past}, after the {n} cached one, so it takes row {past} of wpe: a "
        "decode step continues the sequence, it does not start it again at 0."
    ),
    "stage.embed.decode.other": (
        "The new token sits at position {past}, after the {n} cached ones, so it takes row {past} of wpe: a "
        "decode step continues the sequence, it does not start it again at 0."
    ),
    "stage.embed.lengths": (
        "At position {position} ({token}) the token vector has length {token_length}, the position vector "
        "{position_length}, their sum {sum_length}."
    ),
    "stage.embed.flow_tokens": "ids, shape {ids} → rows of wte → {shape}",
    "stage.embed.flow_positions": "positions {first}…{last} → rows of wpe → {shape}",
    "stage.embed.flow_sum": "sum → x {shape}",
    # -- LayerNorm (ln_1, ln_2, ln_f) -----------------------------------------------------------
    "stage.ln1.text": (
        "Before attention, each token's vector is normalized on its own: subtract the mean of its "
        "{n_embd} numbers, divide by their standard deviation, then scale and shift every dimension with a "
        "learned gain γ and bias β ({params} parameters). The variance divides by {n_embd}, not "
        "{n_embd_less}, and ε = {eps} keeps the division safe. This is GPT-2's pre-norm design: x itself "
        "is not changed; attention reads the normalized copy."
    ),
    "stage.ln2.text": (
        "Before the MLP, each token's vector is normalized on its own: subtract the mean of its {n_embd} "
        "numbers, divide by their standard deviation, then scale and shift every dimension with a learned "
        "gain γ and bias β ({params} parameters). The variance divides by {n_embd}, not {n_embd_less}, and "
        "ε = {eps} keeps the division safe. This is GPT-2's pre-norm design: x itself is not changed; the "
        "MLP reads the normalized copy."
    ),
    "stage.ln_final.text": (
        "After the last of the {n_layer} blocks, each token's vector is normalized on its own: subtract "
        "the mean of its {n_embd} numbers, divide by their standard deviation, then scale and shift every "
        "dimension with a learned gain γ and bias β ({params} parameters). The variance divides by "
        "{n_embd}, not {n_embd_less}, and ε = {eps} keeps the division safe. The LM head reads this "
        "normalized copy."
    ),
    "stage.layer_norm.stats": (
        "At position {position} ({token}): mean {mean} and std {std} going in; {normalized_mean} and "
        "{normalized_std} after normalizing; mean {out_mean} and std {out_std} after γ and β."
    ),
    "stage.layer_norm.eps": (
        "The normalized std is {normalized_std}, not 1: ε = {eps} is added to the variance ({var} here) "
        "before the square root, which matters where the variance is small."
    ),
    # -- Q, K, V --------------------------------------------------------------------------------
    "stage.qkv.project": (
        "One matrix multiply, c_attn [{C} × {C3}] plus a bias ({params} parameters), turns each normalized "
        "token vector into three vectors of {C} numbers: a query (what this position looks for), a key "
        "(what it can be found by) and a value (what it hands over when found). GPT-2 stores the weight as "
        "[input × output], so it is x @ W + b with no transpose."
    ),
    "stage.qkv.heads": (
        "Each of q, k and v is cut into {H} heads of {D} numbers ({H} × {D} = {C}). The heads work side by "
        "side, each with its own slice, and never see each other's numbers."
    ),
    "stage.qkv.cache": (
        "The keys and values are what the KV cache keeps for later tokens: for this layer 2 × {heads} × "
        "{positions} × {D} = {numbers} numbers, {bytes}. Queries are used once and never cached."
    ),
    # What the cache allocated (its side-panel line "reserved"): {room} positions of every layer.
    "stage.qkv.reserve": (
        "The cache is allocated ahead, so that a step rarely asks for memory: here room for {room} "
        "positions in every layer, {reserved} in all. A generation reserves room for its prompt and the "
        "tokens it will add all at once; a pass on its own reserves {chunk} positions first and more as it "
        "needs them."
    ),
    # One of these two, by the number ({n}) of cached positions.
    "stage.qkv.decode.one": (
        "In this decode step the new position's k and v, {new}, are appended to the {n} cached one: "
        "attention reads K and V {all}."
    ),
    "stage.qkv.decode.other": (
        "In this decode step the new position's k and v, {new}, are appended to the {n} cached ones: "
        "attention reads K and V {all}."
    ),
    "stage.qkv.formula_heads": "q [T, C] → view [T, H, D] → transpose → [H, T, D]",
    "stage.qkv.formula_sizes": "T = {positions}, H = {heads}, D = {numbers} per head",
    "stage.qkv.flow_split": "split → q, k, v {shape} each",
    "stage.qkv.flow_heads": "heads → q, k, v {shape} each",
    # -- attention scores -----------------------------------------------------------------------
    "stage.scores.dot": (
        "Head {head} compares every query with every key: a dot product of two {D}-number vectors, divided "
        "by √{D} = {root} so the scores do not grow with the head size and the softmax that follows does "
        "not saturate."
    ),
    # One of these two, by the number of masked cells; a single cell has the third.
    "stage.scores.mask.one": (
        "The causal mask sets every cell above the diagonal to −∞ (the grey cells): position i may look at "
        "itself and earlier positions, never at later ones. Here {masked} of the {cells} cells is masked."
    ),
    "stage.scores.mask.other": (
        "The causal mask sets every cell above the diagonal to −∞ (the grey cells): position i may look at "
        "itself and earlier positions, never at later ones. Here {masked} of the {cells} cells are masked."
    ),
    "stage.scores.mask_single": (
        "The causal mask sets every cell above the diagonal to −∞: position i may look at itself and "
        "earlier positions, never at later ones. With one position there is one cell, on the diagonal, "
        "so nothing is masked."
    ),
    "stage.scores.decode_mask": (
        "A decode step has {queries} and {keys}: {past} from the cache and {new} new. The causal mask is "
        "shifted by the {cached}, tril(diagonal={diagonal}): query {diagonal} may see keys 0–{diagonal}, "
        "which is every key there is, so here {masked} of the {cells} cells are masked."
    ),
    "stage.scores.top": "The last query ({token}) scores highest on position {position} ({key}): {score}.",
    "stage.scores.formula_mask": "scores[h, i, j] = −∞ where j > i   (the causal mask)",
    "stage.scores.flow_map": "head {head} → {shape} map below",
    # -- attention pattern ----------------------------------------------------------------------
    "stage.pattern.softmax": (
        "A softmax along each row turns the scores into weights: all positive, every row summing to 1, the "
        "masked future exactly 0. Row i is a recipe: the output of position i is the weighted sum of the "
        "value vectors of positions 0 … i."
    ),
    "stage.pattern.last": (
        "The last row belongs to {token}, the position that predicts the next token. In head {head} it "
        "puts {share} of its weight on position {position} ({key})."
    ),
    "stage.pattern.last_even": (
        "The last row belongs to {token}, the position that predicts the next token. In head {head} it "
        "spreads its weight about evenly over the {positions} positions it sees (the most, {share}, on "
        "position {position}, {key})."
    ),
    # -- all heads ------------------------------------------------------------------------------
    "stage.heads.intro": (
        "The {H} heads of block {layer} side by side, each its own attention pattern (brighter: more "
        "weight). With their own query, key and value slices, heads learn to look for different things. "
        "Under each map: the position the last token looks at most."
    ),
    # A head "gives more than half of its weight" to a position only where its last row does; the
    # rest spread it ({uniform}: the share each of the {L} positions would get, spread evenly).
    "stage.heads.focus_single": (
        "The last position ({token}) is the only one it can attend to: every head gives it all of its weight."
    ),
    "stage.heads.focus_none": (
        "No head gives more than half of the last position's weight ({token}) to one position: all {H} "
        "spread it (spread evenly, each of the {L} positions would get {uniform})."
    ),
    # Counts in a tally, so that no verb agrees with them ("1 give" read wrong).
    "stage.heads.focus": (
        "Where the {H} heads put more than half of the last position's weight ({token}): on that position "
        "itself, {on_self}; on position 0 ({first}), {on_first}; on another position, {elsewhere}."
    ),
    "stage.heads.focus_spread": (
        "Where the {H} heads put more than half of the last position's weight ({token}): on that position "
        "itself, {on_self}; on position 0 ({first}), {on_first}; on another position, {elsewhere}; on no one "
        "position, {spread} (spread evenly, each of the {L} positions would get {uniform})."
    ),
    "stage.heads.sink": (
        "Position 0 ({first}) is no answer here: it is where a head with nothing useful to read puts its "
        "weight (an attention sink), changing little. The third tab of the screen of which parts wrote the "
        "answer shows it for every head."
    ),
    "stage.heads.formula": "head_h = softmax(q_h k_{kv}ᵀ / √{D} + mask) v_{kv}    h = 0 … {last}",
    "stage.heads.flow": "pattern {pattern} → {maps} of {shape}",
    # -- attention output -----------------------------------------------------------------------
    "stage.attn_out.mix": (
        "The heads' outputs z are put back side by side ({H} × {D} = {C}) and mixed by c_proj [{C} × {C}] "
        "({proj} parameters). The result is an update that is added to the residual stream. Attention is "
        "the only step of the model where information moves between positions."
    ),
    "stage.attn_out.params": (
        "All of block {layer}'s attention holds {attention} parameters: c_attn {c_attn} + c_proj {proj}."
    ),
    "stage.attn_out.lengths": (
        "At position {position} ({token}) the update has length {update} against {before} for x; "
        "x + update has length {after}."
    ),
    "stage.attn_out.flow_concat": "z {z} → concat heads → {shape}",
    "stage.attn_out.flow_add": "x + update → x {shape}",
    # -- MLP ------------------------------------------------------------------------------------
    "stage.mlp.widen": (
        "The MLP works on each position separately, with the same weights for all: nothing moves between "
        "positions here. c_fc widens {C} numbers to {F} ({c_fc} parameters), GELU bends each of them, and "
        "c_proj brings them back to {C} ({proj} parameters)."
    ),
    "stage.mlp.params": (
        "The MLP holds {mlp} parameters, {ratio}× the {attention} of this block's attention. GPT-2 uses the "
        "tanh form of GELU ({activation}); the exact erf form gives slightly different numbers."
    ),
    "stage.mlp.active": (
        "At position {position} ({token}), {share} of the {F} neurons are positive after GELU."
    ),
    "stage.mlp.active_top": (
        "At position {position} ({token}), {share} of the {F} neurons are positive after GELU; the "
        "strongest is neuron {neuron} at {value}."
    ),
    # Neurons of the block switched off at the position the share counts (what if, L3.n12,40).
    "stage.mlp.switched_off.one": (
        "{n} of them is switched off in this pass (what if): its output after the activation is replaced and "
        "counted as replaced, while the histogram shows what went into the activation."
    ),
    "stage.mlp.switched_off.other": (
        "{n} of them are switched off in this pass (what if): their outputs after the activation are replaced "
        "and counted as replaced, while the histogram shows what went into the activation."
    ),
    "stage.mlp.untrained": (
        "Of these, {tokens} never occur in the text this model was trained on: their rows of wte were "
        "never trained on their own tokens, only moved, all such rows together, in one shared direction, "
        "so a value vector that points that way raises them all at once. That is a quirk of a small "
        "training text, not something the model knows."
    ),
    # -- MLP output -----------------------------------------------------------------------------
    "stage.mlp.memory": (
        "Read as a key-value memory: each neuron's key is its column of W_fc, matched against this "
        "position's vector by a dot product; GELU filters the match; its value is its row of W_proj, "
        "added to the residual stream as strongly as the neuron fires. Here neuron {neuron}'s key matches "
        "with {pre}, GELU lets {value} through, and its value raises the logits of {tokens} most."
    ),
    "stage.mlp_out.done": (
        "The MLP's update is added to the residual stream, and block {layer} is done: x leaves with the "
        "same shape it came in with, {shape}."
    ),
    "stage.mlp_out.params": (
        "Block {layer} holds {block} parameters: attention {attention}, MLP {mlp}, two LayerNorms "
        "{layer_norms}. All {n_layer} blocks together: {blocks} of the model's {n_params}."
    ),
    "stage.mlp_out.lengths": (
        "At position {position} ({token}): x had length {before} entering the block; attention added an "
        "update of length {attention}, the MLP one of {mlp}; x leaves with length {after}."
    ),
    "stage.mlp_out.remaining": "{blocks} to go.",
    "stage.mlp_out.last": "This was the last block.",
    "stage.mlp_out.flow": "x {x} + update {update} → x {x}",
    # -- LM head --------------------------------------------------------------------------------
    "stage.lm_head.tying": (
        "The LM head multiplies each position's vector by wte transposed: the very table that embedded the "
        "tokens (weight tying), so it adds no parameters. The result is one score, a logit, for every "
        "entry of the vocabulary: {vocab} per position, {total} in all."
    ),
    "stage.lm_head.last": (
        "Only the last position predicts what comes next. Position p's logits are a guess at token p+1, "
        "which for every p before {last} is already in the prompt. Softmax turns the last row into "
        "probabilities (subtracting the largest logit first, so nothing overflows)."
    ),
    "stage.lm_head.only": (
        "Only the last position predicts what comes next. Here there is only one position, so its logits "
        "are the prediction. Softmax turns the last row into probabilities (subtracting the largest logit "
        "first, so nothing overflows)."
    ),
    "stage.lm_head.entropy": (
        "Their entropy is {entropy} nats; a uniform guess over {vocab} tokens would have ln {vocab_size} = "
        "{uniform}."
    ),
    "stage.untrained": (
        "Every position's prediction is this close to uniform: {lowest} nats of entropy at the least, where a "
        "uniform guess has {uniform}. That is how a model with random (untrained) weights predicts, so what "
        "this checkpoint predicts means nothing; what each stage computes is still exactly what it shows."
    ),
    "stage.lm_head.quality": (
        "This run stores its weights in {dtype}: {weight_bytes}. Against float32 on the same checkpoint, "
        "over this prompt's {positions}: the most likely token is the same at {agree} of {n}, the largest "
        "logit differs by {dlogit}, and the mean KL divergence of the distributions is {kl} nats."
    ),
    "stage.lm_head.flow_last": "last position → {shape} → softmax",
    # -- logit lens -----------------------------------------------------------------------------
    "stage.logit_lens.intro": (
        "What would the model answer if it stopped early? The logit lens takes the last position's "
        "residual stream after each block and sends it through ln_f and the LM head, as if that block were "
        "the last. It shows the prediction forming layer by layer."
    ),
    "stage.logit_lens.rank": "The final choice {token} ranks {rank} of {vocab} after block 0 (p = {p}).",
    "stage.logit_lens.rank_top": (
        "The final choice {token} ranks {rank} of {vocab} after block 0 (p = {p}) and is the top token "
        "from block {first} on."
    ),
    "stage.logit_lens.rank_top_last": (
        "The final choice {token} ranks {rank} of {vocab} after block 0 (p = {p}) and becomes the top "
        "token only after the last block, {first}."
    ),
    "stage.logit_lens.rank_top_regained": (
        "The final choice {token} ranks {rank} of {vocab} after block 0 (p = {p}), is the top token "
        "first after block {earliest}, loses that place, and holds it from block {first} on."
    ),
    "stage.logit_lens.rank_top_last_regained": (
        "The final choice {token} ranks {rank} of {vocab} after block 0 (p = {p}), is the top token "
        "first after block {earliest}, loses that place, and has it again only after the last block, {first}."
    ),
    "stage.logit_lens.formula": "lens_l = softmax(ln_f(x after block l)[{last}] @ wteᵀ)    l = 0 … {last_layer}",
    "stage.logit_lens.flow": "x after each block, last position {x} → ln_f, @ wteᵀ → {shape}",
    # -- next token -----------------------------------------------------------------------------
    "stage.next_token.choice": (
        "Greedy decoding takes the most probable token: {token} (id {id}, p = {p}). Appended to the text "
        "it makes {total} tokens."
    ),
    "stage.next_token.choice_no_p": (
        "Greedy decoding takes the most probable token: {token} (id {id}). Appended to the text it makes "
        "{total} tokens."
    ),
    # A generation step that sampled: {sampling} is its settings in short ('T 0.8 · top-k 40 · seed 1').
    "stage.next_token.sampled": (
        "This step sampled its token with {sampling}: {token} (id {id}) had p = {p} after the settings. "
        "The most probable token of this pass was {top} (p = {top_p}). Appended to the text, {token} makes "
        "{total} tokens."
    ),
    "stage.next_token.sampled_top": (
        "This step sampled its token with {sampling}: {token} (id {id}) had p = {p} after the settings, and "
        "it is also the most probable token of this pass (p = {top_p}). Appended to the text it makes "
        "{total} tokens."
    ),
    "stage.next_token.formula_sampled": "next ~ p′ (p after the settings); this draw: {id}",
    "stage.next_token.rerun": (
        "To write one more token the model runs again. Without a cache it would recompute all {total} "
        "positions; with the KV cache only the new token goes through the blocks, and each layer reads the "
        "{cached} instead of recomputing them."
    ),
    "stage.next_token.cache_prefill": (
        "The cache holds {bytes} after this prefill, {per_token} bytes per token (2 × {layers} × {heads} × "
        "{D} × {value_bytes} bytes)."
    ),
    "stage.next_token.cache_step": (
        "The cache holds {bytes} after this step, {per_token} bytes per token (2 × {layers} × {heads} × "
        "{D} × {value_bytes} bytes)."
    ),
    "stage.next_token.run_samples": (
        "That is this pass's most probable token. This run's generation samples ({sampling}): it draws each "
        "token from these probabilities after the settings, so its first token need not be {token}. Press "
        "{key} for the generation view."
    ),
    "stage.next_token.reach": (
        "How wide this distribution is, in the cuts sampling uses (at temperature 1): top-p 0.9, the most "
        "likely tokens until their probability reaches 90%, keeps {p90} tokens (top-p 0.5: {p50}); top-k 50 "
        "keeps {k50} of the probability."
    ),
    "stage.next_token.sample": (
        "Sampling with a temperature instead of the argmax gives other continuations. Press {key} for the "
        "generation view."
    ),
    "stage.next_token.formula": "next = argmax(p) = {id}",
    "stage.next_token.flow": "ids, shape {ids} + next → ids, shape {more}",
}
