"""The generation view's narration: each step's shapes, how its token was chosen, the KV cache, what a
step costs and the comparison without and with the cache (gpt2viz/tui/generation_narration.py
decides which paragraphs apply and formats every fact)."""

TEXT = {
    # -- the step on show: what went in and why the shapes are what they are ----------------------
    # One of each pair by the number of ids that go in ({length}), or of positions in the cache ({n}).
    "generation.step.full_pass.one": (
        "Without a cache every step runs the whole sequence again: here its {length} id, {ids_shape}, goes "
        "through all {n_layer} blocks, its key and value are computed anew and thrown away, and the scores "
        "are a single cell, {scores_shape}. Only the last position's logits, {logits_shape}, pick the "
        "token. The work grows with every token."
    ),
    "generation.step.full_pass.other": (
        "Without a cache every step runs the whole sequence again: all {length} ids, {ids_shape}, go "
        "through all {n_layer} blocks, keys and values of every position are computed anew and thrown "
        "away, and the scores are a full {length} × {length} triangle, {scores_shape}. Only the last "
        "position's logits, {logits_shape}, pick the token. The work grows with every token."
    ),
    "generation.step.prefill.one": (
        "The prefill reads the whole context at once: {length} id, {ids_shape}, at position 0. "
        "Each of the {n_layer} layers writes its keys and values, {kv_shape}, into the cache; the "
        "scores are {scores_shape} under the causal mask. Only the last position's logits, "
        "{logits_shape}, are computed: they give the first new token."
    ),
    "generation.step.prefill.other": (
        "The prefill reads the whole context at once: {length} ids, {ids_shape}, positions 0–{last}. "
        "Each of the {n_layer} layers writes its keys and values, {kv_shape}, into the cache; the "
        "scores are {scores_shape} under the causal mask. Only the last position's logits, "
        "{logits_shape}, are computed: they give the first new token."
    ),
    "generation.step.prefill_resumed": (
        "The prefill reads the whole context at once: {length} ids, {ids_shape}, positions 0–{last}. "
        "Each of the {n_layer} layers writes its keys and values, {kv_shape}, into the cache; the "
        "scores are {scores_shape} under the causal mask. Only the last position's logits, "
        "{logits_shape}, are computed: they give the first new token. A resumed run starts with a new "
        "cache, so it reads the {written} written before again too."
    ),
    "generation.step.decode.one": (
        "A decode step feeds one id, {ids_shape}: {previous} (id {previous_id}), the token chosen at "
        "step {previous_step}. Its position id is {past}, the past length: {n} position is already in the "
        "cache, so it gets wpe[{past}] and continues the sequence instead of restarting at 0. Its k and v, "
        "{kv_shape}, are appended, and its one query row scores all {length} keys: {scores_shape}."
        "\n\nThe causal mask is the lower triangle shifted by the past length, tril(diagonal={past}): "
        "query {past} may see keys 0–{past}, which is every key there is. So a decode step masks nothing."
    ),
    "generation.step.decode.other": (
        "A decode step feeds one id, {ids_shape}: {previous} (id {previous_id}), the token chosen at "
        "step {previous_step}. Its position id is {past}, the past length: {n} positions are already in "
        "the cache, so it gets wpe[{past}] and continues the sequence instead of restarting at 0. Its k and "
        "v, {kv_shape}, are appended, and its one query row scores all {length} keys: {scores_shape}."
        "\n\nThe causal mask is the lower triangle shifted by the past length, tril(diagonal={past}): "
        "query {past} may see keys 0–{past}, which is every key there is. So a decode step masks nothing."
    ),
    # -- how the token was chosen ------------------------------------------------------------
    "generation.choice.greedy": (
        "Greedy decoding takes the most probable token: {token} (id {id}), p = {p}. No temperature, top-k or "
        "top-p: the same prompt always gives the same text."
    ),
    "generation.choice.sharper": (
        "Sampling: the logits are divided by the temperature {temperature} (sharper: the likely get likelier)."
    ),
    "generation.choice.flatter": "Sampling: the logits are divided by the temperature {temperature} (flatter).",
    "generation.choice.unchanged": "Sampling: the logits are divided by the temperature {temperature} (unchanged).",
    "generation.choice.top_k": "Then top-k keeps the {k} most likely.",
    "generation.choice.top_p": "Then top-p keeps the most likely until their mass reaches {mass}.",
    "generation.choice.top_k_top_p": (
        "Then top-k keeps the {k} most likely and top-p keeps the most likely until their mass reaches {mass}."
    ),
    "generation.choice.drawn": (
        "The token is drawn from what is left: {token} (id {id}) had p = {p} after the settings, {plain_p} "
        "in the plain softmax."
    ),
    "generation.choice.drawn_outside": (
        "The token is drawn from what is left: {token} (id {id}) had p = {p} after the settings, outside "
        "the plain softmax's top {topk}."
    ),
    "generation.choice.only_left": "Only {tokens} could be drawn at this step.",
    "generation.choice.seed": "The seed {seed} makes the draws repeatable.",
    "generation.choice.no_seed": "No seed: another run draws differently.",
    # -- the KV cache ------------------------------------------------------------------------
    "generation.kv.why": (
        "Why K and V, and not Q: a position's key and value depend only on the tokens up to it, so once "
        "computed they never change, and every later token reads them again. A query is used once, by its "
        "own position, to ask which earlier positions matter; no later step needs it. So each layer keeps K "
        "and V and drops q. One more token adds {per_token} bytes (2 × {layers} × {heads} × {head_dim} × "
        "{value_bytes} B, {dtype}); the buffers are allocated once, for the prompt and the new tokens this "
        "run asks for (at most the whole context of {n_ctx} positions, {full}), and filled in place, so a "
        "decode step allocates nothing."
        "\n\nThe cache changes the path, not the result: the keys and values it holds are the very numbers "
        "a full pass would compute again, so the same tokens come out. {compare_key} runs both and compares."
    ),
    "generation.kv.off": (
        "The cache is off: nothing is kept between steps, and every step recomputes K and V for all "
        "positions. With it on, this run would keep {per_token} bytes per token."
    ),
    # -- what a step costs --------------------------------------------------------------------
    "generation.cost.prefill_decode": (
        "Prefill and decode cost differently. The prefill (time to first token) pushes all prompt positions "
        "through each weight matrix at once: many multiply-adds for every weight read from memory. A decode "
        "step pushes one position: each weight is read once and used for one multiply-add, so a decode step "
        "can go no faster than memory delivers the weights, unless something else takes longer still."
    ),
    "generation.cost.reads": (
        "Every decode step reads the {n_params} parameters once, stored in {dtype}: {weights} (of a table it "
        "only looks up, such as the position embeddings, just the row in use), plus the KV cache."
    ),
    "generation.cost.reads_all": (
        "Every decode step reads the {n_params} parameters once, stored in {dtype}: {weights}, plus the KV cache."
    ),
    # The same, where the LM head multiplies by a float16 copy of a token table of float16 numbers.
    "generation.cost.reads_float16_head": (
        "Every decode step reads the {n_params} parameters once: {weights}, the token table through the LM "
        "head's float16 copy (two bytes a number) and the rest stored in {dtype} (of a table it only looks up, "
        "such as the position embeddings, just the row in use), plus the KV cache."
    ),
    "generation.cost.reads_all_float16_head": (
        "Every decode step reads the {n_params} parameters once: {weights}, the token table through the LM "
        "head's float16 copy (two bytes a number) and the rest stored in {dtype}, plus the KV cache."
    ),
    "generation.cost.no_cache": (
        "Without the cache a step is not one position but the whole sequence, so its time grows with every "
        "token: compare with {compare_key}."
    ),
    "generation.cost.step_rate": (
        "Step {index}: {weights} + {kv} of K and V in {ms} ms = {rate} GB/s effective."
    ),
    "generation.cost.mean_rate": "Mean decode step: {ms} ms for {bytes} = {rate} GB/s effective.",
    # What bounds a step, against the stream rate measured on this machine (costs.step_bound).
    "generation.cost.step_rate_busy": (
        "Step {index}: {weights} + {kv} of K and V in {ms} ms = {rate} GB/s effective, measured while "
        "other processes used {share} of the CPUs (below what this machine reads on its own)."
    ),
    "generation.cost.mean_rate_busy": (
        "Mean decode step: {ms} ms for {bytes} = {rate} GB/s effective, measured while other processes "
        "used {share} of the CPUs."
    ),
    "generation.busy": (
        "While this ran, other processes used {share} of this machine's CPU time: these times are slower than "
        "the model runs here on its own, so nothing is claimed about what bounds a step or where its time "
        "goes. Run it again when the machine is quiet."
    ),
    "generation.bound.unmeasured": (
        "This machine's memory bandwidth was not measured for this run, so no bound is claimed."
    ),
    "generation.bound.caches": (
        "Reading that at the {stream} GB/s this machine streams a large matrix takes {floor} ms, more than "
        "the {ms} ms a step took: part of the weights comes from the processor's caches, faster than main "
        "memory, so the step is bound by neither memory nor fixed work alone."
    ),
    "generation.bound.memory": (
        "Reading that at the {stream} GB/s this machine streams a large matrix takes {floor} ms, {share} of "
        "the {ms} ms a step takes: the step is bound by memory bandwidth."
    ),
    "generation.bound.partly": (
        "Reading that at the {stream} GB/s this machine streams a large matrix takes {floor} ms, {share} of "
        "the {ms} ms a step takes: memory is a large part of the cost, and the rest is fixed work every "
        "step does (Python, dispatching each operation, hand-offs between the two cores)."
    ),
    "generation.bound.fixed": (
        "Reading that at the {stream} GB/s this machine streams a large matrix takes {floor} ms, only "
        "{share} of the {ms} ms a step takes: this step is not bound by memory but by fixed work every step "
        "does whatever the model's size (Python, dispatching each of its operations, hand-offs between the "
        "two cores). A bigger model reads more per step and comes closer to the memory bound."
    ),
    # -- the comparison without and with the cache --------------------------------------------
    "generation.compare.same": "Both runs chose the same {ids}.",
    "generation.compare.same_seeded": "Both runs chose the same {ids} (sampling with the same seed, {seed}).",
    "generation.compare.path": (
        "The cache changes the path, not the result: a decode step computes the newest position's q, k and "
        "v exactly as the full pass does, and reads the other positions' keys and values from the cache "
        "instead of recomputing them; they are the same numbers, because a position's k and v never depend "
        "on later tokens. The last row of the scores, the softmax and the logits come out the same (up to "
        "float rounding), so the argmax does too. What changes is the work: at the last step the full pass "
        "pushed {positions} positions through every block, the decode step one."
    ),
    # The same, for a sampled run: the same probabilities and the same seed give the same draws.
    "generation.compare.path_sampled": (
        "The cache changes the path, not the result: a decode step computes the newest position's q, k and "
        "v exactly as the full pass does, and reads the other positions' keys and values from the cache "
        "instead of recomputing them; they are the same numbers, because a position's k and v never depend "
        "on later tokens. The last row of the scores, the softmax and the probabilities come out the same "
        "(up to float rounding), and the same seed draws from them the same way, so the same token comes "
        "out. What changes is the work: at the last step the full pass pushed {positions} positions through "
        "every block, the decode step one."
    ),
    "generation.compare.cost_split": (
        "Where the time goes, fitted to this run's full passes: each step costs about {fixed} ms whatever "
        "its length (reading the LM head's weights, Python, dispatching operations), plus about "
        "{per_position} ms for each position it recomputes. At the last step ({last} positions) that is "
        "{at_last} ms, against {cached} ms for a cached decode step. The cache removes the per-position "
        "part, not the fixed part: the shorter the sequence, or the larger the fixed part, the smaller the "
        "speed-up."
    ),
    "generation.compare.cost_split_no_gain": (
        "Where the time goes, fitted to this run's full passes: each step costs about {fixed} ms whatever "
        "its length (reading the LM head's weights, Python, dispatching operations), plus about "
        "{per_position} ms for each position it recomputes. At the last step ({last} positions) that is "
        "{at_last} ms, and a cached decode step took {cached} ms: here the cache did not pay. It removes the "
        "per-position part, which is small in this run, not the fixed part, which is nearly all of a step; "
        "it pays on longer sequences and larger models, where recomputing the positions costs more."
    ),
    "generation.compare.differ": (
        "The runs differ from step {step}: without the cache {naive}, with it {cached}. The cache should "
        "never change the result, so this is a bug (or two near-equal top tokens that rounding put in "
        "another order)."
    ),
}
