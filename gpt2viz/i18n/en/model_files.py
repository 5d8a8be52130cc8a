"""The Model files stage: what the checkpoint's files hold, as the loader saw them
(gpt2viz/tui/model_files_narration.py decides which paragraphs apply and formats every fact)."""

TEXT = {
    "stage.model_files.lead": (
        "Before the model reads a single token, gpt2viz loads three kinds of files from {directory}: "
        "config.json gives the sizes, {weights} holds the weights as named tensors, and {tokenizer} turns "
        "text into token ids and back."
    ),
    "stage.model_files.lead_replay": (
        "When this trace was recorded, before the model read a single token, gpt2viz loaded three kinds of "
        "files from {directory}: config.json gives the sizes, {weights} holds the weights as named tensors, "
        "and {tokenizer} turns text into token ids and back. What follows is what that run found in them."
    ),
    "stage.model_files.lead_unrecorded": (
        "Before the model reads a single token, gpt2viz loads three kinds of files from {directory}: "
        "config.json gives the sizes, model.safetensors holds the weights as named tensors, and the "
        "tokenizer turns text into token ids and back."
    ),
    "stage.model_files.config": (
        "config.json holds sizes, not weights: {n_layer} blocks of {n_head} attention heads, vectors "
        "{n_embd} wide, a context of {n_ctx} positions and a vocabulary of {vocab} tokens. Every tensor's "
        "shape follows from these numbers, and gpt2viz checks each one against them before it reads a byte "
        "of the weights."
    ),
    # One of these two, by the number ({n}) of safetensors files.
    "stage.model_files.weights.one": (
        "{files} starts with 8 bytes giving the length of a JSON header, then the header, {header}, that "
        "names each tensor with its dtype and shape; "
        "then come their numbers, one tensor after another: {tensors}, {data} in all, this model's "
        "{n_params} parameters."
    ),
    "stage.model_files.weights.other": (
        "The {n} files {files} each start with 8 bytes giving the length of a JSON header, then the header "
        "({header} together), that names each tensor "
        "with its dtype and shape; then come their numbers, one tensor after another: {tensors}, {data} "
        "in all, this model's {n_params} parameters."
    ),
    # How the model came to hold its weights: one of these.
    "stage.model_files.in_place": (
        "safetensors memory-mapped {file}, and the model uses all {n} tensors where they lie: stored "
        "in {stored}, computed in {dtype}, nothing copied. The weights in memory are the file's own pages."
    ),
    "stage.model_files.copied": (
        "safetensors memory-mapped {file}, and the loader copied every tensor into {dtype} on {device} "
        "(the file stores {stored}): the model holds {weight_bytes} of its own."
    ),
    "stage.model_files.read_as_is": (
        "gpt2viz read {file} into memory of its own, tensor by tensor, and the model uses all {n} "
        "tensors as read: stored in {stored}, computed in {dtype}. It reads the file rather than mapping "
        "it, so a checkpoint rewritten while gpt2viz runs (a training loop saving over it) cannot pull "
        "the weights from under it."
    ),
    "stage.model_files.read_converted": (
        "gpt2viz read {file} into memory and converted every tensor into {dtype} on {device} (the file "
        "stores {stored}): the model holds {weight_bytes} of its own."
    ),
    "stage.model_files.partly": (
        "safetensors memory-mapped {file}; the model uses {in_place} of the {n} tensors where they "
        "lie and copied the others into {dtype} on {device}."
    ),
    "stage.model_files.read": (
        "gpt2viz read {file} into memory; the model uses {in_place} of the {n} tensors as read and copied the "
        "others into {dtype} on {device}."
    ),
    # Where the model holds more than its parameters take in its format (bfloat16, float16, int8).
    "stage.model_files.extra_head_copy": (
        "That is {extra} more than its {n_params} parameters take in {dtype} ({plain}): to read them faster, "
        "the kernels that multiply by them on this machine keep a packed copy of the token table for the LM "
        "head, and may pack other matrices with padding and keep their biases in float32. A decode step "
        "reads {step} of it."
    ),
    "stage.model_files.extra_float16_head": (
        "That is {extra} more than its {n_params} parameters take in {dtype} ({plain}): every number of "
        "the token table is a float16 number, so the LM head multiplies by a float16 copy of the table. "
        "The copy is in fbgemm's packed layout, whose blocks are padded past a row's {n_embd} numbers, so it "
        "takes more room than the float32 table itself: the copy is the {extra} above, the table {table}. "
        "A step reads only the numbers in it, two bytes each ({half}), half the float32 table's bytes. A "
        "decode step reads {step} of it in all."
    ),
    "stage.model_files.extra_packed": (
        "That is {extra} more than its {n_params} parameters take in {dtype} ({plain}): to read them faster, "
        "the kernels that multiply by them on this machine keep some matrices packed with padding, and "
        "their biases in float32. A decode step reads {step} of it."
    ),
    "stage.model_files.extra_int8": (
        "That is {extra} more than its {n_params} parameters take at one byte each ({plain}): each row of "
        "int8 numbers has a float32 scale, the kernels keep packed copies to read them faster, and some "
        "weights stay float32. A decode step reads {step} of it."
    ),
    "stage.model_files.tied": (
        "The file stores no LM head: GPT-2 scores the next token with wte itself (weight tying), so its "
        "{wte} numbers serve twice, to look tokens up and to score them."
    ),
    "stage.model_files.stored_head": (
        "The file also stores lm_head.weight, a copy of wte: gpt2viz checked that the two are equal and "
        "keeps wte alone, which serves twice (weight tying)."
    ),
    # One of these two, by the number ({n}) of mask buffers the file stores.
    "stage.model_files.buffers.one": (
        "{n} tensor is a causal mask that older versions of transformers saved with the weights: not a "
        "weight, never read."
    ),
    "stage.model_files.buffers.other": (
        "{n} tensors are causal masks that older versions of transformers saved with the weights: not "
        "weights, never read."
    ),
    # How the machine that recorded the run multiplies by the weights (gpt2viz.kernels; float32).
    "stage.model_files.kernels": (
        "How to multiply by each weight was measured on the machine that ran this ({cpu}) the first time gpt2viz loaded weights of these shapes there, and kept (in its cache: measured again only if the machine was busy then): one product as the BLAS computes it, or the weight's two halves on one core each."
    ),
    # The same, where the LM head's table holds float16 numbers only and a float16 copy was timed too.
    "stage.model_files.kernels_float16": (
        "How to multiply by each weight was measured on the machine that ran this ({cpu}) the first time gpt2viz loaded weights of these shapes there, and kept (in its cache: measured again only if the machine was busy then): one product as the BLAS computes it, the weight's two halves on one core each, or, for the LM head, whose token table holds float16 numbers only, fbgemm's product by a float16 copy of the table."
    ),
    "stage.model_files.kernel.faster": "• {layers} ({shape}): two halves, {split} µs against {plain} µs as one product (one row).",
    "stage.model_files.kernel.slower": "• {layers} ({shape}): one product, {plain} µs against {split} µs in two halves (one row).",
    "stage.model_files.kernel.other_digits": (
        "• {layers} ({shape}): one product; in two halves this CPU's BLAS adds in another order, so the "
        "last digits would change."
    ),
    "stage.model_files.kernel.partial_sums": (
        "• {layers} ({shape}): the weight's rows in two halves, a partial sum on each core, then added: "
        "{partial} µs against {plain} µs as one product (one row)."
    ),
    "stage.model_files.kernel.float16_held": (
        "• {layers} ({shape}): every number of the token table is a float16 number (as in a checkpoint "
        "stored in float16), so a float16 copy holds it exactly and fbgemm multiplies by that, adding in float32: "
        "{held} µs against {plain} µs as one product (one row). Half the bytes to read; each output's "
        "terms are the same, added in another order, so its last digits may change."
    ),
    "stage.model_files.kernels_partial_sums": (
        "Partial sums add each output's terms in another order than one product, so its last digits "
        "change; they run only where this CPU's BLAS gives a row other last digits alone than among a "
        "prefill's rows anyway."
    ),
    "stage.model_files.kernel.odd_width": "• {layers} ({shape}): one product; its halves would not be whole SIMD vectors.",
    "stage.model_files.kernel.one_thread": "• {layers} ({shape}): one product; with one thread there is nothing to split over.",
    "stage.model_files.kernel.set_split": "• {layers} ({shape}): two halves, as GPT2VIZ_KERNELS sets.",
    "stage.model_files.kernel.set_plain": "• {layers} ({shape}): one product, as GPT2VIZ_KERNELS sets.",
    "stage.model_files.kernels_batch": (
        "A decode step of several sequences at once multiplies by packed copies of the weights "
        "instead (oneDNN's layout, made by the first such step): the BLAS would pack each weight again "
        "for every product of several rows."
    ),
    # The other number formats' kernels (gpt2viz/kernels/formats.py): bfloat16, float16, int8.
    "stage.model_files.format_kernels": (
        "In {dtype}, the kernel for each weight was chosen on the machine that ran this ({cpu}) the first time gpt2viz loaded weights of these shapes in {dtype} there, and kept: of those that hold the weight exactly and give each row the same digits however many rows share a product, the fastest at one row, a decode step's product."
    ),
    "stage.model_files.format_kernels_int8": (
        "In int8 every product multiplies 8-bit weights through fbgemm; how finely it quantizes each "
        "position's input depends on the machine that ran this ({cpu}):"
    ),
    "stage.model_files.format_kernel.fastest": "• {layers} ({shape}): {kernel}, the fastest here at one row ({timings}).",
    "stage.model_files.format_kernel.timing": "{kernel} {us} µs",
    "stage.model_files.format_kernel.only_kernel": (
        "• {layers} ({shape}): {kernel}, the only kernel here that holds this weight exactly, row by row."
    ),
    "stage.model_files.format_kernel.only_plain": (
        "• {layers} ({shape}): {kernel}, the only one here that holds this weight (a row's last digits may "
        "then depend on how many rows share the product)."
    ),
    "stage.model_files.format_kernel.set": (
        "• {layers} ({shape}): {kernel}, the first kernel that holds it, as GPT2VIZ_KERNELS sets (nothing timed)."
    ),
    "stage.model_files.format_kernel.8_bit_inputs": (
        "• {layers} ({shape}): inputs quantized to 8 bits; this CPU adds 8-bit products straight into "
        "32-bit sums (VNNI)."
    ),
    "stage.model_files.format_kernel.7_bit_inputs": (
        "• {layers} ({shape}): inputs quantized to 7 bits; without VNNI, fbgemm adds two products in a "
        "saturating 16-bit sum, which 8-bit inputs would overflow."
    ),
    "stage.model_files.kernel_name.fbgemm_float16": "fbgemm's float16-weight product",
    "stage.model_files.kernel_name.onednn_packed": "oneDNN's packed weights",
    "stage.model_files.kernel_name.plain_16_bit": "the plain 16-bit product",
    "stage.model_files.kernel_name.fbgemm_int8": "fbgemm's int8 product",
    "stage.model_files.kernels_busy": (
        "Other programs kept the CPUs busy while these were timed: the times are not the kernels' own, "
        "and gpt2viz times them again once the machine is quiet."
    ),
    "stage.model_files.tokenizer": (
        "The tokenizer ({model}) has {vocab} tokens: {base} to start from (for GPT-2, the 256 byte "
        "values), {merges} merges learned from text, each gluing a frequent pair into one longer token, "
        "and {added}."
    ),
    # A byte-level vocabulary with tokens beyond the 256 byte values that no merge makes and that
    # are not marked as added ({others}: how many; GPT-2's files list <|endoftext|> this way).
    "stage.model_files.tokenizer_more": (
        "The tokenizer ({model}) has {vocab} tokens: {base} to start from (the 256 byte values and {others} "
        "more that no merge makes), {merges} merges learned from text, each gluing a frequent pair into one "
        "longer token, and {added}."
    ),
    "stage.model_files.tokenizer_plain": "The tokenizer ({model}) has {vocab} tokens, {added} among them.",
    "stage.model_files.special": "A special token is never cut or merged: {tokens}.",
    "stage.model_files.unrecorded": (
        "This trace was recorded before gpt2viz kept what the files hold, so below are only the sizes "
        "from its config. Record the run again to see the tensors and the tokenizer."
    ),
    "stage.model_files.formula": (
        "parameters = wte + wpe + n_layer × block + ln_f\n"
        "= {wte} + {wpe} + {n_layer} × {block} + {ln_f} = {total}"
    ),
    "stage.model_files.flow_config": "config.json, {bytes} → the sizes",
    "stage.model_files.flow_config_unrecorded": "the trace's config → the sizes",
    "stage.model_files.flow_weights": "{files}, {bytes} → {tensors} → weights in {dtype} on {device}",
    "stage.model_files.flow_tokenizer": "{files}, {bytes} → {vocab} tokens",
}
