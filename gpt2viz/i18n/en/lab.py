"""The cost lab's narration: what its three experiments measured on this machine and what bounds a
step (gpt2viz/tui/lab_narration.py decides which sentences apply and formats every number)."""

TEXT = {
    "lab.machine": (
        "This machine, measured by the lab: it streams a large matrix from memory at {stream} GB/s and "
        "multiplies at {compute} GFLOP/s (a large float32 product), on {threads}."
    ),
    "lab.replay_empty": "This trace holds no lab result. Record one with {command}.",
    # -- context length
    "lab.context.idle": (
        "Times one new token at positions from the prompt's end ({start}) to {end}, without the KV cache "
        "(a full pass over every position so far) and with it (one position against the cache). {run} runs it."
    ),
    "lab.context.ends": (
        "At position {first} a new token took {naive_first} ms without the cache and {cached_first} ms with it; "
        "at position {last}, {naive_last} ms against {cached_last} ms."
    ),
    "lab.context.growth": (
        "Without the cache every step computes all its positions again, so its time grows with the position: "
        "{naive_slope} ms more per 100 positions here (a straight line fitted to the measured points)."
    ),
    "lab.context.no_growth": (
        "Without the cache every step computes all its positions again, yet its time did not grow measurably "
        "here ({naive_slope} ms per 100 positions, fitted): in this range a step is dominated by work that "
        "does not depend on the length."
    ),
    "lab.context.cached_growth": (
        "With it a step computes one position and reads the cached keys and values, which grow: "
        "{cached_slope} ms more per 100 positions."
    ),
    "lab.context.cached_no_growth": (
        "With it a step computes one position and reads the cached keys and values, and its time did not "
        "change measurably over this range ({cached_slope} ms per 100 positions, fitted: within the timing's noise)."
    ),
    "lab.context.one_point": "Only position {position} was measured: choose a longer length ({length}) to see a trend.",
    "lab.context.crossover_start": "The cache was faster at every measured position, from {crossover} on.",
    "lab.context.crossover": (
        "At position {before} the cache was not yet faster: a short pass costs little more than one position, "
        "because most of a step is work that does not depend on the length. From {crossover} on the cache "
        "was faster at every measured position."
    ),
    "lab.context.no_crossover": (
        "The cache was not faster at the last measured position ({last}): on this model and machine, "
        "recomputing every position costs no more than a cached step in this range."
    ),
    "lab.context.totals": (
        "Generating every token from position {start} to {end} would take about {naive_total} s without the "
        "cache and {cached_total} s with it: {speedup}× faster (summed over the curve, interpolated between "
        "the {points} measured positions)."
    ),
    "lab.context.totals_slower": (
        "Generating every token from position {start} to {end} would take about {naive_total} s without the "
        "cache and {cached_total} s with it: the cache was slower in this range (summed over the curve, "
        "interpolated between the {points} measured positions)."
    ),
    "lab.context.partial": "Stopped after {done} of the positions: the curve ends at {last}.",
    "lab.context.next": "The next run ({run}) goes from position {start} to {end}; {length} chooses another length.",
    # -- batch size
    "lab.batch.idle": (
        "Times one cached decode step for B sequences at once (B = {sizes}) at {context} cached positions: "
        "the step reads every weight once whatever B is. {run} runs it."
    ),
    "lab.batch.ends": (
        "One decode step at {context} cached positions took {one_ms} ms for one sequence and {big_ms} ms for "
        "{big} ({ratio}×), so tokens/s went from {one_tps} to {big_tps}."
    ),
    "lab.batch.one_row": "One decode step at {context} cached positions took {ms} ms for B = {batch}.",
    "lab.batch.flat": (
        "The step stayed within {flat_within}× of one sequence's time up to B = {flat}: every weight is read "
        "once per step, and the extra rows reuse it."
    ),
    "lab.batch.not_flat": (
        "Already at B = {second} the step took {second_ratio}× one sequence's time: on this run extra rows are "
        "not free, because each adds its own products, attention over its cache and {vocab} logits."
    ),
    "lab.batch.uneven": (
        "The step did not grow steadily with B on this run: B = {second} took {second_ratio}× one sequence's "
        "time, but B = {later} only {later_ratio}×. A step this short is easily disturbed; run it again to see "
        "which shape holds."
    ),
    "lab.batch.intensity": (
        "Arithmetic intensity (FLOPs per byte read; a multiply-add is 2 FLOPs) grows with B: {one_i} at B = 1, {big_i} at B = {big}. At "
        "this machine's measured rates a step turns from memory- to compute-bound near {ridge} FLOPs per byte."
    ),
    "lab.batch.intensity_only": (
        "Arithmetic intensity (FLOPs per byte read; a multiply-add is 2 FLOPs) grows with B: {one_i} at B = 1, {big_i} at B = {big}."
    ),
    "lab.batch.skipped": "B = {sizes} skipped: their KV caches would take more than a quarter of the free memory.",
    # -- number formats
    "lab.precision.idle": (
        "Loads this checkpoint in {formats}, times a cached decode step at {context} positions in each, and "
        "compares each format's logits over the prompt with float32's. {run} runs it."
    ),
    # A format's row: against float32's when float32 was measured too, else on its own.
    "lab.precision.one_format": (
        "This model's weights become float32 at load, whatever its file stores (the Model files stage says "
        "how: SmolLM2's file holds 4-bit blocks). LLaMA-family models load in float32 only so far, so there "
        "is no other number format to compare here: the experiment runs on GPT-2 models (the bundled one, "
        "or any from the hub)."
    ),
    "lab.precision.lead": (
        "Each row is one cached decode step with {context} positions already in the KV cache: what it "
        "reads is its weights and those positions' keys and values."
    ),
    "lab.precision.row": "{format}: {ms} ms a token, reading {read} a step, {gb_s} GB/s effective.",
    "lab.precision.row_ratio": (
        "{format}: {ms} ms a token ({ratio}× float32), reading {read} a step, {gb_s} GB/s effective."
    ),
    "lab.precision.head_copy": (
        "float32 reads only {read} a step: its LM head multiplies by a float16 copy of the token table (this "
        "checkpoint stores float16 numbers, so the copy holds the same values; it was faster on this CPU), and "
        "a step looks up one row of the float32 table. The copy is kept beside the table, so the weights take "
        "{weights} in memory. The Model files stage says which kernel multiplies each weight."
    ),
    "lab.precision.fastest": (
        "Fewer bytes a weight means fewer bytes read a step: {fastest} took {fastest_ratio}× float32's time "
        "for {bytes_ratio}× its bytes."
    ),
    "lab.precision.no_faster": "No format was faster than float32 here.",
    "lab.precision.quality": (
        "{format} against float32 over the prompt's {positions}: largest logit difference "
        "{max_dlogit}, same top token at {top1}, mean KL {kl} nats."
    ),
    # -- what bounds a step: "{what}" is one of these names of the step
    "lab.what.cached": "A cached step at position {position}",
    "lab.what.batch": "The step of B = {batch}",
    "lab.what.format": "The {format} step",
    "lab.bound.unmeasured": "This machine's rates were not measured, so no bound is claimed.",
    "lab.machine_busy": (
        "While the lab measured this machine's rates, other processes used {share} of its CPU time: the "
        "rates below are lower than this machine's own, so the lab claims nothing about what bounds a step. "
        "Run it again when the machine is quiet: the lab then measures the rates again too."
    ),
    "lab.busy": (
        "While this ran, other processes used {share} of this machine's CPU time: these times are slower than "
        "the model runs here on its own, so the lab draws nothing from them (no slope, speed-up, ranking or "
        "cause) and claims nothing about what bounds its steps. Run it again when the machine is quiet."
    ),
    "lab.busy_table": "Measured while other processes used {share} of the CPUs:",
    "lab.busy_row.context": "  position {position}: {naive} ms without the cache, {cached} ms with it",
    "lab.busy_row.batch": "  B = {batch}: {ms} ms a step, {tps} tokens/s",
    "lab.busy_row.precision": "  {format}: {ms} ms a token, reading {read} a step",
    "lab.machine_while_busy": (
        "This machine, measured by the lab while other processes used {share} of its CPU time (so below "
        "its own rates): it streams a large matrix from memory at {stream} GB/s and multiplies at {compute} "
        "GFLOP/s (a large float32 product), on {threads}."
    ),
    "lab.bound.memory": (
        "{what}: reading its {read} at {stream} GB/s takes {memory_ms} ms, {share} of its {ms} ms: bound by "
        "memory bandwidth."
    ),
    "lab.bound.compute": (
        "{what}: its {gflop} GFLOP at {compute} GFLOP/s take {compute_ms} ms, {share} of its {ms} ms: bound by "
        "compute."
    ),
    "lab.bound.partly_memory": (
        "{what}: reading its {read} at {stream} GB/s takes {memory_ms} ms, {share} of its {ms} ms: memory is "
        "a large part, and the other {rest} ms is fixed work every step does (Python, dispatching each "
        "operation, hand-offs between threads) or kernels slower than the stream rate."
    ),
    "lab.bound.partly_compute": (
        "{what}: its {gflop} GFLOP at {compute} GFLOP/s take {compute_ms} ms, {share} of its {ms} ms: compute "
        "is a large part, and the other {rest} ms is fixed work every step does or kernels slower than the "
        "measured rate."
    ),
    "lab.bound.fixed": (
        "{what}: reading its {read} at {stream} GB/s would take only {memory_ms} ms of its {ms} ms ({share}): "
        "not bound by memory or compute but by fixed work every step does whatever the model's size (Python, "
        "dispatching each operation, hand-offs between threads) or kernels far slower than the stream rate."
    ),
    "lab.bound.faster_compute": (
        "{what}: its {gflop} GFLOP at the {compute} GFLOP/s measured for float32 would take {compute_ms} ms, "
        "more than the {ms} ms it took: this format's kernels compute faster than float32's."
    ),
    "lab.bound.faster_than_measured": (
        "{what}: its {gflop} GFLOP at the {compute} GFLOP/s measured for float32 would take {compute_ms} ms, "
        "more than the {ms} ms it took: its products ran faster than that measurement (one large square "
        "product, timed once), so compute bounds this step."
    ),
    "lab.bound.caches": (
        "{what}: reading its {read} at {stream} GB/s would take {memory_ms} ms, more than the {ms} ms it took: "
        "part of it came from the processor's caches, faster than main memory."
    ),
}
