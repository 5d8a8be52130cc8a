"""Fast paths for the matrix products, kept apart from the teaching core.

`gpt2viz.model` writes every product as a textbook does (`x @ W + b`, `x @ wte^T`). Which kernel
is fastest for one of them depends on the CPU: on one machine a one-row product that the BLAS runs
on one core is beaten by splitting the weight over two cores; on another the BLAS already uses both
and the split only adds work. So nothing here is tuned to one machine: `choice` measures, once per
CPU kind and torch version (a fraction of a second, cached in the user's cache directory), which
kernel each weight of a loaded model should use, and gives a product a fast path only where it is
faster on this machine and, for the block products, gives the plain product's digits exactly.

- `cpu`: what this CPU is and has (model, instruction sets, torch's code path), the cache's key.
- `split`: the two-core products (a weight's halves multiplied on one core each).
- `choice`: the calibration, its cache, and the choice made for each product of a model (and,
  for an LM head whose token table holds float16 numbers only, fbgemm's product by a float16 copy
  of it: `fbgemm_float16.held_head`).
- `batch`: packed weights for batched decode steps (one position of several sequences).
- `formats`: the other number formats' kernels, measured the same way among those that hold a
  weight exactly and row by row: `fbgemm_float16` (fbgemm's float16-weight product, float16 and
  bfloat16), `packed` (oneDNN's prepacked weights), `half` (the plain 16-bit product), `int8`.
- `cache`: the file the choices are remembered in.
"""
