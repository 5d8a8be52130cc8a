"""The stages of a LLaMA-family model (SmolLM2) where they differ from GPT-2's: RMSNorm, rotary
positions, grouped key/value heads, SwiGLU, a GGUF file's blocks (gpt2viz/tui/llama_narration.py)."""

TEXT = {
    "llama.tokenize.lead": "The model never sees letters.",
    # -- model files (a GGUF file) -----------------------------------------------------------------
    "llama.model_files.gguf": (
        "This model came in one GGUF file of {file_bytes}, the format llama.cpp reads: its config, its "
        "tokenizer ({vocab} tokens) and its tensors, stored as {formats}. gpt2viz turned every tensor into "
        "float32 once, at load: {weight_bytes} in memory."
    ),
    "llama.model_files.q4_1": (
        "Q4_1 stores a weight matrix in blocks of 32 numbers: a scale d and a minimum m (16 bits each), "
        "then 32 steps q of 4 bits, from 0 to 15: 20 bytes a block, 5 bits a number against float32's 32. A "
        "number is read back as m + d · q: within half a step, d / 2, of the number that was stored, and "
        "that is all the error 4 bits cost here; the model was measured in this form (its answers are "
        "the ones this file gives, not the full-precision model's)."
    ),
    "llama.model_files.q8_0": (
        "Q8_0 (the token table here) keeps blocks of 32 signed bytes with one 16-bit scale: 8.5 bits a number."
    ),
    "llama.model_files.safetensors": (
        "This model came as a Hugging Face checkpoint ({file_bytes} of safetensors) stored as {formats}, "
        "and was loaded as float32: {weight_bytes} in memory."
    ),
    "llama.model_files.config": (
        "Its sizes: {n_layer} blocks; {n_head} query heads and {n_kv_head} key/value heads of {D} numbers; "
        "vectors of {n_embd} numbers; an MLP of {d_mlp}; a context of {n_ctx} positions; a vocabulary "
        "of {vocab} tokens; rotary base {theta}; RMSNorm ε {eps}."
    ),
    "llama.model_files.formula": (
        "parameters = embed_tokens {wte} + {n_layer} blocks × {block} + norm {ln_f}{head} = {total}"
    ),
    "llama.model_files.own_head": " + lm_head {lm_head}",
    "llama.model_files.flow": "{file} → {tensors} → float32, {weight_bytes}",
    # -- embeddings -------------------------------------------------------------------------------
    "llama.embed.lookup": (
        "Each id picks one row of the token embedding table embed_tokens [{vocab} × {n_embd}]: a lookup, no "
        "multiplication. There is no position table: unlike GPT-2's, this x says nothing yet about word "
        "order. Order enters in every block, where queries and keys are rotated by angles that grow with "
        "their position (the Q, K, V stage). x, the residual stream, holds {T} × {n_embd} = {size} numbers, "
        "{size_bytes} bytes in {dtype}. Every block reads x and adds its result to it."
    ),
    "llama.embed.params": (
        "embed_tokens holds {wte} ({wte_millions}) of this model's {n_params} parameters ({share})."
    ),
    "llama.embed.length": "At position {position} ({token}) the token vector has length {length}.",
    # One of these two, by the number ({n}) of cached positions before the new token.
    "llama.embed.decode.one": (
        "The new token sits at position {past}, after the {n} cached one; its row is the same wherever "
        "it stands: its position is applied in the blocks, by rotation."
    ),
    "llama.embed.decode.other": (
        "The new token sits at position {past}, after the {n} cached ones; its row is the same wherever "
        "it stands: its position is applied in the blocks, by rotation."
    ),
    "llama.embed.flow_tokens": "ids, shape {ids} → rows of embed_tokens → x {shape}",
    # -- RMSNorm ------------------------------------------------------------------------------------
    "llama.ln1.text": (
        "Before attention, each token's vector is rescaled on its own: divided by the root mean square of "
        "its {n_embd} numbers, then every dimension multiplied by a learned weight ({params} parameters). "
        "This is an RMSNorm, not GPT-2's LayerNorm: no mean is subtracted and there is no bias, which "
        "saves work and, in practice, loses nothing. ε = {eps} keeps the division safe. x itself is not "
        "changed; attention reads the rescaled copy."
    ),
    "llama.ln2.text": (
        "Before the MLP, each token's vector is rescaled on its own the same way: divided by the root mean "
        "square of its {n_embd} numbers (ε = {eps}), then multiplied by a learned weight ({params} "
        "parameters). x itself is not changed; the MLP reads the rescaled copy."
    ),
    "llama.ln_final.text": (
        "After the last of the {n_layer} blocks, the final RMSNorm (norm) rescales each position's vector "
        "the same way ({params} parameters, ε = {eps}), so that the LM head gets vectors of a steady size."
    ),
    "llama.norm.stats": (
        "At position {position} ({token}): mean {mean} and root mean square {rms} going in; {normalized_mean} "
        "and {normalized_rms} after dividing (the mean is scaled, not removed); {out_mean} and {out_rms} "
        "after the weight."
    ),
    # -- Q, K, V, rotary positions, grouped heads -----------------------------------------------------
    "llama.qkv.project": (
        "Three matrix multiplies without bias turn each normalized vector into a query, q_proj [{C} × {C}] "
        "(what this position looks for), a key and a value, k_proj and v_proj [{C} × {KV}] each (what it "
        "can be found by, what it hands over when found): {params} parameters."
    ),
    "llama.qkv.groups": (
        "The query is cut into {H} heads of {D} numbers, the key and the value into only {KVH}: each "
        "key/value head serves {group} query heads (grouped-query attention; GPT-2 gives every query head "
        "a key/value head of its own), and query head h reads key/value head h ÷ {group}, rounded down. "
        "The KV cache keeps only the {KVH}: {group} times less than one a query head."
    ),
    "llama.qkv.groups_none": (
        "Query, key and value are each cut into {H} heads of {D} numbers: every query head has keys and "
        "values of its own."
    ),
    "llama.qkv.rotary": (
        "Positions enter here. Each query and key head is read as {pairs} pairs of numbers (number j with "
        "number j + {half}), and pair j is turned by position × {theta}^(−2j/{D}) radians: the first pairs "
        "turn fast, the last ones slowly. A query and a key then score by how far apart their positions "
        "are, not by where they stand."
    ),
    "llama.qkv.rotary_numbers": (
        "At position {position}, head 0's query pair 0 turns by {angle} rad, ({b0}, {b1}) → ({a0}, {a1}), "
        "the same length; its last pair, {last}, by only {slow} rad."
    ),
    "llama.qkv.cache": (
        "The rotated keys and the values are what the KV cache keeps for later tokens: for this layer 2 × "
        "{heads} × {positions} × {D} = {numbers} numbers, {bytes}: 1/{group} of what a key/value head for "
        "every query head would take. Queries are used once and never cached."
    ),
    "llama.qkv.formula_project": "q = x W_qᵀ,  k = x W_kᵀ,  v = x W_vᵀ",
    "llama.qkv.formula_rotate": "(q_j, q_j+{half}) ← rotate by θ_j = position · {theta}^(−2j/{D}),  j = 0 … {last}",
    "llama.qkv.formula_sizes": "H = {heads} query heads, {kv_heads} key/value heads, D = {numbers} per head",
    "llama.qkv.flow_project": "norm_1(x) {x} → q_proj → {q}; k_proj, v_proj → {kv} each",
    "llama.qkv.flow_heads": "heads → q {q}; k, v {kv} each",
    "llama.qkv.flow_rotate": "rotate q and k by position → same shapes",
    "llama.scores.group": (
        "Its keys are those of key/value head {kv}, which query heads {first}–{last} share."
    ),
    # -- all heads ----------------------------------------------------------------------------------
    "llama.heads.groups": (
        "Query heads share keys and values {group} at a time: heads 0–{last_in_group} read key/value head "
        "0, and so on, {KVH} groups in all, so heads of one group differ only in their queries."
    ),
    # -- attention output ---------------------------------------------------------------------------
    "llama.attn_out.mix": (
        "The heads' outputs z are put back side by side ({H} × {D} = {C}) and mixed by o_proj [{C} × {C}] "
        "({proj} parameters, no bias). The result is an update that is added to the residual stream. "
        "Attention is the only step of the model where information moves between positions."
    ),
    "llama.attn_out.params": (
        "All of block {layer}'s attention holds {attention} parameters: q, k and v {c_attn} + o_proj {proj}."
    ),
    "llama.flow.update_o": "o_proj → update {update}",
    "llama.flow.update_down": "down_proj → update {update}",
    # -- MLP: SwiGLU ----------------------------------------------------------------------------------
    "llama.mlp.swiglu": (
        "The MLP works on each position separately, with the same weights for all: nothing moves between "
        "positions here. It is a SwiGLU: two products widen {C} numbers to {F}, a gate (gate_proj) and an "
        "up projection (up_proj); SiLU bends the gate, and the bent gate multiplies the up projection "
        "number by number, deciding how much of each passes; down_proj brings the {F} numbers back to {C}."
    ),
    "llama.mlp.params": (
        "The MLP holds {mlp} parameters ({c_fc} in gate and up, {proj} in down), {ratio}× the {attention} "
        "of this block's attention: three matrices where GPT-2 has two, each narrower ({F} = {width}× {C} "
        "against GPT-2's 4×)."
    ),
    "llama.mlp.gate": (
        "The gate is ≤ 0 for {cut} of the {F} neurons at position {position}: SiLU gives back between "
        "−0.28 and 0 there, so those neurons pass little of their up value. up is not bent, and its sign "
        "passes on: that is why a neuron can end below 0, and far below 0 when its up value is large."
    ),
    "llama.mlp.active": (
        "At position {position} ({token}), {share} of the {F} neurons are positive after silu(gate) × up."
    ),
    "llama.mlp.active_top": (
        "At position {position} ({token}), {share} of the {F} neurons are positive after silu(gate) × up; "
        "the strongest, by size whatever its sign, is neuron {neuron} at {value}."
    ),
    "llama.mlp.memory": (
        "Read as a key-value memory: each neuron's key is its row of gate_proj (and of up_proj), matched "
        "against this position's vector; its value is its column of down_proj, added to the residual "
        "stream as strongly as silu(gate) × up fires. Here neuron {neuron}'s gate is {pre}, silu(gate) × up "
        "is {value}, and its value raises the logits of {tokens} most."
    ),
    "llama.mlp.formula": (
        "mlp(x) = (silu(x W_gateᵀ) ⊙ x W_upᵀ) W_downᵀ\nsilu(u) = u · σ(u) = u / (1 + e^−u)"
    ),
    "llama.mlp.flow_widen": "norm_2(x) {x} → gate_proj, up_proj → {hidden} each",
    "llama.mlp.flow_gate": "silu(gate) × up → {hidden}",
    # -- MLP output -------------------------------------------------------------------------------------
    "llama.mlp_out.params": (
        "Block {layer} holds {block} parameters: attention {attention}, MLP {mlp}, two RMSNorms "
        "{layer_norms}. All {n_layer} blocks together: {blocks} of the model's {n_params}."
    ),
    # -- LM head ------------------------------------------------------------------------------------------
    "llama.lm_head.tied": (
        "The LM head multiplies each position's vector by embed_tokens transposed: the very table that "
        "embedded the tokens (weight tying, as in GPT-2), so it adds no parameters. The result is one "
        "score, a logit, for every entry of the vocabulary: {vocab} per position, {total} in all."
    ),
    "llama.lm_head.own": (
        "The LM head multiplies each position's vector by a matrix of its own, lm_head [{vocab} × {n_embd}] "
        "({params} parameters: this model does not tie it to embed_tokens). The result is one score, a "
        "logit, for every entry of the vocabulary: {vocab} per position, {total} in all."
    ),
    # -- logit lens -----------------------------------------------------------------------------------
    "llama.logit_lens.intro": (
        "What would the model answer if it stopped early? The logit lens takes the last position's "
        "residual stream after each block and sends it through the final RMSNorm and the LM head, as if "
        "that block were the last. It shows the prediction forming layer by layer."
    ),
    "llama.logit_lens.formula": "lens_l = softmax(norm(x after block l)[{last}] @ {table}ᵀ)    l = 0 … {last_layer}",
    "llama.logit_lens.flow": "x after each block, last position {x} → norm, @ {table}ᵀ → {shape}",
}
