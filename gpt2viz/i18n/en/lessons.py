"""The guided lessons' pages (gpt2viz/lessons/*.toml name them); placeholders from
gpt2viz/tui/lesson_facts.py, filled with this run's numbers."""

TEXT = {
    # The panel around a page.
    "lesson.header": "Lesson {lesson} · {title} · page {page} of {pages}",
    "lesson.keys": "n next page · p previous page",
    "lesson.keys_guess": "type a guess, press Enter · from an empty field: n next · p back",
    "lesson.done": "✓ Done. n: next page.",
    "lesson.skipped": "Skipped (n moved on before it was done).",
    "lesson.finished": "This was the last page of the lesson. p goes back; i opens the lesson menu.",
    "lesson.replay_note": "(From the saved trace: every number here is the trace's.)",
    "lesson.guess.exact": "You guessed {guess}; this run gives exactly that.",
    "lesson.guess.close": "You guessed {guess}; this run gives {answer}. Close: within {tolerance} of it.",
    "lesson.guess.above": "You guessed {guess}; this run gives {answer}, {ratio} times your guess.",
    "lesson.guess.below": "You guessed {guess}; this run gives {answer}: your guess is {ratio} times that.",
    "lesson.guess.negative": "A guess here is 0 or more: every answer is a count, a size, a time or a share.",
    "lesson.guess.off": "You guessed {guess}; this run gives {answer}.",
    "lesson.guess.unreadable": "Type a number, such as 85000, 85k, 1.2M or 4.5%.",
    "lesson.resumed": "Lesson {lesson}: back at page {page} of {pages}.",
    "lesson.started": "Lesson {lesson}: {title}. n and p turn the pages.",
    # The lesson menu (i, and on a first start).
    "lesson.menu.title": "Lessons",
    "lesson.gpt2_only": (
        "The lessons tell GPT-2's story with its own parts (the position table, LayerNorm, GELU): open one "
        "with a GPT-2 model, such as the bundled tiny. This model's stages show how it differs."
    ),
    "lesson.menu.intro": (
        "Each lesson tells one of the tutorials' stories on this run: its pages move the screens to "
        "what they talk about, quote this run's numbers and ask you to guess some before the app "
        "shows them. n and p turn the pages; a lesson goes on where you left it, and r here starts the "
        "highlighted one over."
    ),
    "lesson.menu.intro_start": (
        "New here? A lesson walks you through the app on this run: its pages move the screens to what "
        "they talk about, quote this run's numbers and ask you to guess some before the app shows "
        "them. n and p turn the pages; i opens this menu again from any screen."
    ),
    "lesson.menu.item": "Lesson {lesson}: {title} ({progress})",
    "lesson.menu.new": "{pages} pages",
    "lesson.menu.at": "at page {page} of {pages}, {done} of {asks} tasks done",
    "lesson.menu.finished": "finished, {done} of {asks} tasks done",
    "lesson.menu.not_now": "Not now",
    "lesson.menu.never": "Not now, and do not open this menu at start again",
    "lesson.menu.never_note": "The lesson menu will not open at start again; i opens it from any screen.",
    # What a page asks the learner to do.
    "lesson.do.next_stage": "Do: press → (or l) to go on to the next stage.",
    "lesson.do.into_blocks": "Do: press ] to jump into block 0.",
    "lesson.do.next_head": "Do: press . to show the next attention head.",
    "lesson.do.next_block": "Do: press ] to see the same stage one block further on.",
    "lesson.unavailable.generation": (
        "This saved trace holds no generation, so the generation view cannot open here: start "
        "gpt2viz with --model (tiny works offline) to generate, or replay a trace recorded with "
        "--generate. n goes on."
    ),
    "lesson.do.open_generation": "Do: press g to open the generation view (escape comes back here).",
    "lesson.do.open_cost_lab": "Do: press m to open the cost lab (escape comes back here).",
    "lesson.do.switch_off": "Do: press x and switch a part off: Enter takes the first, this MLP (u switches it on again).",
    "lesson.edited": "{parts} is switched off: the numbers on this page are the edited pass's ({undo} switches it on again).",
    "lesson.unavailable.what_if": (
        "A replay cannot run the model again, so nothing can be switched off: start gpt2viz with "
        "--model (tiny works offline). n goes on."
    ),
    # Lesson 000: one forward pass (tutorial 000).
    "lesson.000.title": "One forward pass, from files to the next token",
    "lesson.000.intro": (
        "This lesson follows one forward pass of {model} over your prompt, the way the step-through "
        "shows it: what the files hold, how text becomes numbers, what one block does, how the last "
        "vector becomes a next token, and what the KV cache keeps. Each page moves the screen to the "
        "stage it talks about."
    ),
    "lesson.000.files": (
        "A checkpoint is three things: config.json (the sizes: {n_layer} blocks, {n_head} heads, width "
        "{n_embd}, {vocab} tokens), the weights ({n_params} numbers, {param_bytes} in {dtype} here) and "
        "the tokenizer. The code is the same for every GPT-2; only these files differ."
    ),
    "lesson.000.block_guess": (
        "Each block has an attention layer (c_attn: width to 3 × width, c_proj: width to width) and an "
        "MLP (c_fc: width to {d_mlp}, c_proj: back), each with a bias, and two LayerNorms (a gain and "
        "a bias each). The width is {n_embd}."
    ),
    "lesson.000.block_guess.question": "Guess: how many parameters does one block hold?",
    "lesson.000.block_guess.why": (
        "Attention {attention_params} + MLP {mlp_params} + two LayerNorms of {layer_norm_params} = "
        "{block_params}; the {n_layer} blocks hold {blocks_params} of the model's {n_params}, the "
        "token table wte {wte_params} more."
    ),
    "lesson.000.tokenize": (
        "The tokenizer cut your prompt into {T_tokens}: {tokens}. Each is an id in a vocabulary of "
        "{vocab}; common words are one token, rare ones several pieces. The model never sees letters, "
        "only these ids."
    ),
    "lesson.000.tokenize.byte_pieces": (
        "The tokenizer cut your prompt into {T_tokens}: {tokens}. Each is an id in a vocabulary of "
        "{vocab}. It works on bytes: a character it never learned whole, as most Chinese characters, "
        "comes as pieces of its UTF-8 bytes (shown \\xe6 …), {byte_pieces} of them here. The model never "
        "sees letters or characters, only these ids."
    ),
    "lesson.000.embed": (
        "Each id picks its row of the token table wte ({vocab} rows of {n_embd} numbers), and each "
        "position adds its row of wpe ({n_ctx} rows): the input is {T_vectors} of {n_embd} numbers. "
        "From here on the model only adds to these vectors: the residual stream."
    ),
    "lesson.000.layer_norm": (
        "A block first normalizes each position's vector (ln_1: mean 0, variance 1, then a learned "
        "gain and bias), works on the normalized copy, and adds its result back to the stream. "
        "GPT-2 normalizes before each part (pre-norm), so the stream itself is never rescaled."
    ),
    "lesson.000.attention": (
        "Attention lets each position read earlier ones: each of the {n_head} heads scores every pair "
        "({n_scores} for {T_positions}), masks the future out, and turns the scores into weights "
        "that sum to 1. Each head has weights of its own, so each can look at other positions."
    ),
    "lesson.000.mlp": (
        "The MLP then works on each position alone: {n_embd} numbers out to {d_mlp}, GELU, and back to "
        "{n_embd}. It holds {mlp_share} of a block's parameters ({mlp_params} of {block_params}). Every "
        "block has the same parts with weights of its own."
    ),
    "lesson.000.stack": (
        "Here is the last block, {last_block}: the same steps, {n_layer} times over, each adding to "
        "the residual stream. Nothing else happens between the blocks."
    ),
    "lesson.000.prob_guess": (
        "After the last block, ln_f normalizes the final vectors, and the LM head multiplies each by "
        "the token table (the same wte, tied): one score, a logit, per token of the vocabulary. The "
        "model's top choice for the next token is {next_token}."
    ),
    "lesson.000.prob_guess.question": "Guess: what probability does the model give {next_token}, in percent?",
    "lesson.000.prob_guess.why": (
        "Softmax turns the {vocab} logits of the last position into probabilities that sum to 1: "
        "{next_token} gets {next_prob}. The rest is spread over every other token."
    ),
    "lesson.000.logits_guess": (
        "After ln_f, the LM head scores every token of the vocabulary at every position of the pass, "
        "not only at the last one: one logit per token per position."
    ),
    "lesson.000.logits_guess.question": "Guess: how many logits did the LM head compute in this pass?",
    "lesson.000.logits_guess.why": (
        "{T_positions} × {vocab} tokens = {logits}. Only the last position's logits pick the next token; a "
        "decode step computes one position, so {vocab}."
    ),
    "lesson.000.next_token": (
        "Greedy decoding takes the most probable token, {next_token} at {next_prob}; sampling would draw "
        "one by the probabilities instead. Generating is running this pass again with that token "
        "appended, once per new token."
    ),
    "lesson.000.kv_guess": (
        "Without a cache every new token would recompute every earlier position. The KV cache keeps "
        "each block's keys and values: {n_layer} blocks × 2 (K, V) × {n_embd} numbers of {value_bytes} bytes a "
        "position, {kv_now} for the prompt now."
    ),
    "lesson.000.kv_guess.question": "Guess: how many bytes will the KV cache hold after {more} more tokens?",
    "lesson.000.kv_guess.why": (
        "{kv_per_position} × {positions_after_more} positions (all but the last new token, not yet "
        "run) = {kv_after_more}, growing the same each token until the context ({n_ctx}) is full."
    ),
    "lesson.000.end": (
        "That is the whole pass. Press g to generate: the generation view times each step and shows "
        "the KV cache growing by {kv_per_position} a token."
    ),
    # Lesson 003: the causal mask, pre-norm, the KV cache (tutorial 003).
    # Lesson 001: inference from scratch (tutorial 001).
    "lesson.001.title": "From scratch: tensors, a token, the memory wall",
    "lesson.001.intro": (
        "Tutorial 001 writes GPT-2's inference by hand: read the weights from a file, run a few "
        "operations on tensors, pick a token, and find out why each token costs what it does. This "
        "lesson takes the same road on {model}, with this run's numbers."
    ),
    "lesson.001.safetensors": (
        "model.safetensors begins with a JSON header naming each tensor's number type, shape and byte "
        "offsets; the bytes follow, back to back. Loading is reading that header and taking the bytes as "
        "numbers: {n_params} here, stored as {stored} ({file_bytes}) and held as {dtype} ({param_bytes}). "
        "The largest tensor is wte, {vocab} rows of {n_embd}."
    ),
    "lesson.001.safetensors.unrecorded": (
        "model.safetensors begins with a JSON header naming each tensor's number type, shape and byte "
        "offsets; the bytes follow, back to back. Loading is reading that header and taking the bytes as "
        "numbers: {n_params} here, held as {dtype} ({param_bytes}; the file's format is not in this older "
        "trace). The largest tensor is wte, {vocab} rows of {n_embd}."
    ),
    "lesson.001.wte_guess.question": "Guess: how many bytes does wte take in float32, 4 bytes a number?",
    "lesson.001.wte_guess.why": "{vocab} × {n_embd} = {wte_params} numbers, × 4 bytes = {wte_float32_bytes}.",
    "lesson.001.tensors": (
        "A tensor is a block of numbers with a shape. Your prompt is now {T_token_ids}, a tensor of "
        "shape [1, {T_dim}]: one sequence (the batch dimension) of {T_positions}. Every stage from here "
        "takes tensors and gives tensors; the line of shapes under each stage's explanation follows them."
    ),
    "lesson.001.lookup": (
        "The first operation multiplies nothing: each id selects its row of wte and each position its "
        "row of wpe, and the two are added, [1, {T_dim}, {n_embd_dim}]. Selecting rows is a lookup, not a "
        "matrix product, however large the table."
    ),
    "lesson.001.layer_norm": (
        "LayerNorm is the first operator that computes: for each position it subtracts the mean of "
        "its {n_embd} numbers, divides by the square root of their variance plus a small ε, then "
        "multiplies by a learned gain and adds a learned bias. Each position is normalized on its own."
    ),
    "lesson.001.matmul": (
        "Matrix products do the heavy work. c_attn multiplies the [{T_dim}, {n_embd_dim}] input by a "
        "[{n_embd_dim}, {three_n_embd_dim}] weight, {n_embd} multiply-adds per output number, and cuts the result "
        "into queries, keys and values: {n_head} heads of {head_dim}."
    ),
    "lesson.001.matmul.question": "Guess: how many multiply-adds does block 0's c_attn take on this pass?",
    "lesson.001.matmul.why": (
        "{T_positions} × {n_embd} inputs × {three_n_embd} outputs = {qkv_macs} multiply-adds, for one "
        "of the four matrices of one block."
    ),
    "lesson.001.softmax": (
        "Softmax turns a row of scores into weights that add up to 1: subtract the row's largest, "
        "take exp, divide by the sum. Each query's row here is one softmax over the positions the mask "
        "lets it see, after the scores were divided by √{head_dim}."
    ),
    "lesson.001.gelu": (
        "The MLP widens each position to {d_mlp} numbers (c_fc), bends them with GELU (close to x "
        "where x is large, close to 0 where x is very negative, smooth between) and narrows them back "
        "to {n_embd} (c_proj). It holds {mlp_share} of a block's parameters."
    ),
    "lesson.001.head": (
        "The LM head multiplies by wte itself (the weights are tied): each position's vector times wte "
        "transposed scores all {vocab} tokens, [1, {T_dim}, {vocab_dim}]. Only the last row decides the next token."
    ),
    "lesson.001.head.question": "Guess: how many multiply-adds give the last position's {vocab} logits?",
    "lesson.001.head.why": "{n_embd} × {vocab} = {head_macs}: a dot product of {n_embd} numbers for each token of the vocabulary.",
    "lesson.001.sampling": (
        "Greedy decoding takes the top logit, {next_token}. Sampling divides the logits by a temperature "
        "and draws from the softmax. The top two, {first} and {second}, are {logit_gap} apart: at "
        "temperature 1 the first is {ratio_now} times as likely."
    ),
    "lesson.001.temperature.question": "Guess: at temperature {temperature}, how many times as likely is the first as the second?",
    "lesson.001.temperature.why": "p₁ / p₂ = exp({logit_gap} / {temperature}) = {temperature_ratio}: below 1, a temperature stretches the gaps.",
    "lesson.001.nucleus": (
        "Two more cuts keep sampling off the long tail. Top-k draws from the k most likely tokens: here "
        "the top 10 hold {top_k_10_mass}, the top 50 {top_k_50_mass}. Top-p (the nucleus) takes the most "
        "likely until their probability reaches p, however many that is."
    ),
    "lesson.001.nucleus.unrecorded": (
        "Two more cuts keep sampling off the long tail. Top-k draws from the k most likely tokens; top-p "
        "(the nucleus) takes the most likely until their probability reaches p, however many that is. "
        "This trace was written before gpt2viz kept what they keep: a run with --model shows it."
    ),
    "lesson.001.nucleus.question": "Guess: how many tokens does top-p 0.9 keep for this prompt's next token?",
    "lesson.001.nucleus.why": (
        "{nucleus_90} (0.5: {nucleus_50}; 0.95: {nucleus_95}): a sure model's nucleus is a few tokens, "
        "an unsure one's thousands; top-p follows the distribution, top-k does not."
    ),
    "lesson.001.generate": (
        "Generating is the pass again and again: the chosen token joins the input and the model "
        "predicts the one after it. With the KV cache each step computes only the new position. The "
        "generation view streams the tokens and times every step."
    ),
    "lesson.001.memory_wall": (
        "One new token runs every weight product once: {step_macs} multiply-adds over {step_weight_bytes} "
        "of weights, each weight read from memory for a single multiply-add."
    ),
    "lesson.001.memory_wall.question": "Guess: how many multiply-adds per byte of weights does a decode step do?",
    "lesson.001.memory_wall.why": (
        "{step_macs} ÷ {step_weight_bytes} = {macs_per_byte} a byte ({bytes_per_mac} B a weight: "
        "float32's 4, less in Model files' smaller copies). A core multiplies far faster than memory "
        "delivers: decoding waits for memory (the memory wall)."
    ),
    "lesson.001.measure": (
        "The cost lab measures what this lesson reasoned out, on this machine: how the time of a "
        "decode step grows with the context, with the KV cache and without, and how the number formats "
        "(bfloat16, float16, int8, which store most weights in fewer bytes) compare with float32. It also "
        "says whether a step here waits for memory or for the fixed work every step does (Python, starting "
        "each operation), which a small model may wait on more than on its bytes."
    ),
    "lesson.001.end": (
        "That is tutorial 001's road: a file of numbers, a few operators on tensors, a choice of "
        "token, and a cost set by the bytes each token reads once a model is large enough (below that, by "
        "the fixed work of every step). Lesson 003 looks closer at the causal "
        "mask, pre-norm and the KV cache."
    ),
    "lesson.003.title": "The causal mask, pre-norm and the KV cache",
    "lesson.003.intro": (
        "Three things make GPT-2 a model that writes one token after another: the causal mask (no "
        "position sees the future), LayerNorm before each part (pre-norm), and the KV cache, which "
        "keeps what earlier positions computed. This lesson finds each in this run of {model} over "
        "{T_tokens}."
    ),
    "lesson.003.scores": (
        "This stage makes each position's query, key and value. Next, on the following stage, come the "
        "scores: each position's query against every position's key, divided by the "
        "square root of the head size ({head_dim}). One head gives a {T} × {T} table, {n_scores}: "
        "every position's query against every position's key."
    ),
    "lesson.003.mask_guess": (
        "Before the softmax the causal mask sets every score of a later position to minus infinity: "
        "row i keeps positions 0 to i. The model then cannot use a token it has not yet produced."
    ),
    "lesson.003.mask_guess.question": "Guess: of one head's scores here ({T} × {T} = {scores}), how many does the mask remove?",
    "lesson.003.mask_guess.why": (
        "Row i loses the {T} − (i + 1) positions after it: {masked_sum} = {masked_scores} of "
        "{scores} masked, {kept_scores} kept. Past a few dozen tokens, that is about half."
    ),
    "lesson.003.masked": "The Scores stage shows that table, the masked cells marked, and counts them.",
    "lesson.003.pattern": (
        "After the softmax the masked cells are exactly 0 and every row still sums to 1: the pattern's "
        "upper right triangle is empty. Every head of every block has the same empty triangle."
    ),
    "lesson.003.pre_norm": (
        "GPT-2 normalizes the input of each part, not its output: x + attn(ln_1(x)), then x + "
        "mlp(ln_2(x)). The original Transformer (and BERT) normalized after the add instead "
        "(post-norm). Pre-norm keeps a path from the input to the output that nothing rescales, "
        "which lets deep stacks train."
    ),
    "lesson.003.residual": (
        "Here the attention's output is added to the stream it read from. The sum is not normalized: "
        "the stream goes on as it is, and only the copy the MLP reads is normalized, by ln_2."
    ),
    "lesson.003.final_norm": (
        "Because no block normalizes the stream itself, the pass ends with one more LayerNorm, ln_f, "
        "before the LM head: the only place the stream is normalized as a whole."
    ),
    "lesson.003.recompute_guess": (
        "To write a token, the model runs a pass and takes the last position's prediction. Without a "
        "cache, the next token needs a pass over the prompt and the new token, the one after that a "
        "pass one position longer, and so on."
    ),
    "lesson.003.recompute_guess.question": (
        "Guess: without a cache, how many positions in all do the passes compute to write {more} tokens "
        "after this {T}-token prompt?"
    ),
    "lesson.003.recompute_guess.why": (
        "{T} + ({T} + 1) + … + ({T} + {more_minus_1}) = {naive_positions} positions. With the KV cache the "
        "prompt is computed once and then one position a step: {cached_positions}, {cache_saving} times fewer."
    ),
    "lesson.003.kv_keeps": (
        "What makes the cache possible is the mask: a position's key and value depend only on it and "
        "the positions before it, so a later token never changes them. Each block keeps its own K and V "
        "for every position."
    ),
    "lesson.003.position_guess": (
        "Each block keeps, for every position, its key and its value: {n_head} heads of {head_dim} "
        "numbers, {value_bytes} bytes each ({compute_dtype})."
    ),
    "lesson.003.position_guess.question": "Guess: after how many positions does the cache hold more than 1 MiB (1,048,576 B)?",
    "lesson.003.position_guess.why": (
        "{n_layer} × 2 × {n_head} × {head_dim} × {value_bytes} B = {kv_per_position} a position: "
        "more than 1 MiB from {positions_for_mib} positions on (the context holds {n_ctx})."
    ),
    "lesson.003.memory_guess": (
        "Each position adds {kv_per_position} to the cache: {n_layer} blocks × K and V × {n_embd} numbers "
        "× {value_bytes} bytes."
    ),
    "lesson.003.memory_guess.question": "Guess: how many bytes does the cache hold when the context ({n_ctx} positions) is full?",
    "lesson.003.memory_guess.why": (
        "{kv_per_position} × {n_ctx} = {kv_full}, for one sequence; a batch holds that for each of its "
        "sequences. From {batch_outweighs} sequences of full context on, the cache outweighs the weights "
        "({param_bytes})."
    ),
    "lesson.003.end": (
        "Press g to generate: each step runs one position through the blocks against the cache, "
        "shows its token as soon as it is chosen, and the cache grows by {kv_per_position}."
    ),
    # Lesson 004: one prompt through the whole pipeline (tutorial 004).
    "lesson.004.title": "One prompt through the whole pipeline, and what a new token costs",
    "lesson.004.intro": (
        "Tutorial 004 follows \"The capital of France is\" through GPT-2 small to '␣Paris'. This "
        "lesson follows your prompt through {model} the same way: text to ids, ids to vectors, "
        "{n_layer} blocks of attention and MLP writing into one residual stream, the LM head, and the "
        "cost of every new token. A model that learned geography (GPT-2 small, from the hub) puts "
        "'␣Paris' first after \"The capital of France is\", far ahead of the rest; the bundled tiny model learned "
        "only Shakespeare, so on it these pages show the mechanism with its own numbers, not the "
        "knowledge."
    ),
    "lesson.004.tokens": (
        "Tokenizing runs on the CPU before the model: byte-pair encoding (its merges learned once, "
        "when the tokenizer was made) cuts the text into {T_pieces} of a {vocab}-token vocabulary and "
        "gives each its id: {tokens}."
    ),
    "lesson.004.embed": (
        "Next, each id picks its row of wte and each position its row of wpe, and the two are added: "
        "a gather from memory, not a product. The prompt becomes [1, {T_dim}, "
        "{n_embd_dim}], {value_bytes} bytes a number."
    ),
    "lesson.004.embed.question": "Guess: how many bytes does that tensor take?",
    "lesson.004.embed.why": (
        "{T} × {n_embd} numbers × {value_bytes} bytes = {embedded_bytes}, beside the {param_bytes} of "
        "weights that will work on them."
    ),
    "lesson.004.gather": (
        "The Embed stage shows that tensor, row by row: the residual stream every block will read "
        "and add to."
    ),
    "lesson.004.routing": (
        "Attention is routing: each position's query is compared with the keys of itself and every "
        "earlier position, the scores are divided by √{head_dim}, the future is masked, and softmax "
        "turns each row into weights. The last row is what the last token reads, and from where; "
        "in the tutorial's \"The capital of France is\", that is how 'is' can gather 'capital' and "
        "'France'. Each head routes in its own way."
    ),
    "lesson.004.heads": (
        "A block has {n_head} heads of {head_dim} numbers each: every head has its own query, key and "
        "value projections of {n_embd} × {head_dim}, and their {n_head} outputs are laid side by side "
        "into {n_embd} numbers again before c_proj mixes them."
    ),
    "lesson.004.memory": (
        "Next comes the MLP. It works on each position alone, like a key-value memory: the vector is "
        "matched against {d_mlp} keys, GELU passes the matches, and the values of the matches are added to the stream."
    ),
    "lesson.004.memory.question": "Guess: what share of a block's parameters sits in its MLP, in percent?",
    "lesson.004.memory.why": (
        "The MLP holds {mlp_params} of the block's {block_params} parameters, {mlp_share}; attention "
        "holds {attention_params}. Most of what a model stores sits in its MLPs."
    ),
    "lesson.004.keys": (
        "Here it is: c_fc holds the {d_mlp} keys (its columns), GELU keeps the positive matches and all "
        "but silences the rest, and c_proj holds the values, one row of {n_embd} per key."
    ),
    "lesson.004.switch_off": (
        "A memory shows what it held when it is taken away: switch this MLP off and the pass runs "
        "again without it; Next token and Logit lens then show the prediction before and after."
    ),
    "lesson.004.residual": (
        "Neither attention nor the MLP replaces the vector: each computes a change and adds it to the "
        "residual stream, which runs from the embedding to the LM head. Every block reads the stream "
        "and adds to it; nothing is overwritten, though a later update may point against what is there "
        "and shorten it."
    ),
    "lesson.004.layers": (
        "The logit lens reads the stream after each block as if it were the last: the prediction "
        "forms block by block. In a trained model the early blocks tend to do syntax and local "
        "binding, the middle ones meaning, and the last ones sharpen the answer."
    ),
    "lesson.004.head": (
        "Only the last position has seen the whole prompt, so only its vector chooses the next token: "
        "[{n_embd_dim}] times the LM head [{n_embd_dim}, {vocab_dim}] is {head_macs} multiply-adds, one logit per "
        "token of the vocabulary."
    ),
    "lesson.004.answer": (
        "Softmax makes the logits probabilities: {model} puts {next_token} first, at {next_prob}. "
        "After \"The capital of France is\" GPT-2 small puts '␣Paris' there; a model puts first what "
        "its weights make likely, and no rule decides anything else."
    ),
    "lesson.004.autoregressive": (
        "One pass gives one token. To write more, the token is appended and the model runs again: N "
        "new tokens are N passes, one after another, and none can start before the last has ended."
    ),
    "lesson.004.cache": (
        "The KV cache keeps every block's keys and values, so a new token computes its own and reads "
        "the rest: {kv_per_position} per token here, {kv_now} for the prompt, memory spent to save "
        "the work of every earlier position."
    ),
    "lesson.004.intensity": (
        "A decode step does {step_macs} multiply-adds over {step_weight_bytes} of weights, "
        "{macs_per_byte} per byte. The prompt's pass read them once for its {T_positions}."
    ),
    "lesson.004.intensity.question": "Guess: how many multiply-adds per byte of weights did the prompt's pass do?",
    "lesson.004.intensity.why": (
        "{T} × {step_macs} = {prefill_macs} over the same bytes: {prefill_macs_per_byte} per byte, "
        "{T} times a step's. An output token reads every weight for one position only: that is why a token "
        "of output costs more time than a token of the prompt."
    ),
    "lesson.004.batching": (
        "Batching shares the read: sequences decoded together read each weight once a step for all "
        "of them. The cost lab times it on this machine."
    ),
    "lesson.004.end": (
        "That is the pipeline: ids, vectors, {n_layer} blocks writing into one stream, one logit per "
        "token, and a pass per new token, each paid for by reading {step_weight_bytes} of weights."
    ),
    # On a screen a page sent the learner to (LessonNote).
    "lesson.note": "Lesson {lesson}, page {page} of {pages}: {look} Escape goes back to the lesson.",
    "lesson.001.generate.look": (
        "each token appears as soon as it is chosen, the cost panel times every step, and the KV "
        "panel grows by {kv_per_position} a token."
    ),
    "lesson.001.measure.look": (
        "r runs the experiment on show: the Context length tab times one new token at each position, "
        "with the KV cache and without; 3 shows the number formats."
    ),
    "lesson.004.autoregressive.look": (
        "the text grows by one token a pass, each pass with its own step time, and the KV panel by "
        "{kv_per_position} a token."
    ),
    "lesson.004.batching.look": "press 2 for the Batch size tab, then r: one step of a growing batch, against one sequence's.",
    # A guess at what the cost lab measures on this machine.
    "lesson.004.batching.question": "Guess: on this machine, one decode step of {batch} sequences takes how many times as long as a step of one?",
    "lesson.004.batching.why": (
        "The cost lab timed one step at {batch_context} cached positions: {batch1_ms} for one sequence, "
        "{batch_ms} for {batch}, {batch_step_ratio} times as long for {batch} times the tokens, so "
        "{batch_tokens_gain} times the tokens a second. The weights are read once a step either way."
    ),
    "lesson.guess.pending": (
        "Your guess, {guess}, is kept: the cost lab measures the answer on this machine, and it "
        "appears here when you come back."
    ),
    "lesson.guess.pending_replay": (
        "Your guess, {guess}, is kept, but a replay cannot measure: start gpt2viz with --model "
        "(tiny works offline) to compare it."
    ),
    "lesson.guess.busy": (
        "The cost lab measured this while other processes used {share} of the CPUs, so the answer "
        "below is partly their doing, not this machine's own: run it again when the machine is quiet "
        "to be sure."
    ),
}
