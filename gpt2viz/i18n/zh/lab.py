"""成本实验室的旁白：三个实验在本机测到了什么，以及一步受什么限制
（gpt2viz/tui/lab_narration.py 决定用哪些句子，并格式化好每个数字）。"""

TEXT = {
    "lab.machine": (
        "本机的实测结果：从内存流式读取一个大矩阵的速度是 {stream} GB/s，矩阵乘的速度是 {compute} GFLOP/s"
        "（一个大的 float32 矩阵乘），使用 {threads}。"
    ),
    "lab.replay_empty": "这份 trace 里没有实验结果。可以用 {command} 录制一份。",
    # -- 上下文长度
    "lab.context.idle": (
        "测量在一个个位置上生成一个新 token 的耗时，从提示词的末尾（{start}）一直到 {end}："
        "不用 KV cache（对到目前为止的每个位置做一次完整的前向传播），以及使用 KV cache"
        "（只算一个位置，其余从缓存读取）。按 {run} 运行。"
    ),
    "lab.context.ends": (
        "在位置 {first}，一个新 token 不用缓存耗时 {naive_first} ms，用缓存耗时 {cached_first} ms；"
        "在位置 {last}，分别是 {naive_last} ms 和 {cached_last} ms。"
    ),
    "lab.context.growth": (
        "不用缓存时，每一步都要把所有位置重新算一遍，所以耗时随位置增长：这里每多 100 个位置多 "
        "{naive_slope} ms（对测量点拟合的一条直线）。"
    ),
    "lab.context.no_growth": (
        "不用缓存时，每一步都要把所有位置重新算一遍，但这里的耗时并没有明显增长（拟合得每 100 个位置 "
        "{naive_slope} ms）：在这个范围内，一步的耗时主要来自与长度无关的工作。"
    ),
    "lab.context.cached_growth": (
        "用缓存时，一步只算一个位置，并读取缓存里越来越多的键和值：每多 100 个位置多 {cached_slope} ms。"
    ),
    "lab.context.cached_no_growth": (
        "用缓存时，一步只算一个位置，并读取缓存里的键和值，在这个范围内耗时没有可测的变化"
        "（拟合得每 100 个位置 {cached_slope} ms，在计时误差之内）。"
    ),
    "lab.context.one_point": "只测到了位置 {position}：选一个更长的长度（{length}）才能看出趋势。",
    "lab.context.crossover_start": "从 {crossover} 起，在每个测量的位置上缓存都更快。",
    "lab.context.crossover": (
        "在位置 {before}，缓存还没有更快：一次短的前向传播只比算一个位置多花一点，因为一步的大部分工作"
        "与长度无关。从 {crossover} 起，在每个测量的位置上缓存都更快。"
    ),
    "lab.context.no_crossover": (
        "在最后一个测量的位置（{last}）上缓存并没有更快：在这个模型和这台机器上，这个范围内把每个位置"
        "重新算一遍并不比一个用缓存的步骤更慢。"
    ),
    "lab.context.totals": (
        "从位置 {start} 到 {end} 逐个生成每个 token，不用缓存大约要 {naive_total} s，用缓存要 "
        "{cached_total} s：快 {speedup} 倍（沿曲线求和，在 {points} 个测量位置之间插值）。"
    ),
    "lab.context.totals_slower": (
        "从位置 {start} 到 {end} 逐个生成每个 token，不用缓存大约要 {naive_total} s，用缓存要 "
        "{cached_total} s：在这个范围内缓存反而更慢（沿曲线求和，在 {points} 个测量位置之间插值）。"
    ),
    "lab.context.partial": "测了 {done} 个位置后停止：曲线到 {last} 为止。",
    "lab.context.next": "下一次运行（{run}）从位置 {start} 测到 {end}；按 {length} 换一个长度。",
    # -- 批大小
    "lab.batch.idle": (
        "测量在 {context} 个已缓存位置上，对 B 个序列同时做一个 decode 步的耗时（B = {sizes}）："
        "不管 B 是多少，一步都把每个权重读一遍。按 {run} 运行。"
    ),
    "lab.batch.ends": (
        "在 {context} 个已缓存位置上，一个 decode 步对单个序列耗时 {one_ms} ms，对 {big} 个序列耗时 "
        "{big_ms} ms（{ratio} 倍），所以 tokens/s 从 {one_tps} 变成了 {big_tps}。"
    ),
    "lab.batch.one_row": "在 {context} 个已缓存位置上，B = {batch} 时一个 decode 步耗时 {ms} ms。",
    "lab.batch.flat": (
        "直到 B = {flat}，一步的耗时都保持在单个序列的 {flat_within} 倍以内：每个权重每步只读一次，"
        "多出来的行复用它。"
    ),
    "lab.batch.not_flat": (
        "在 B = {second} 时，一步的耗时就已经是单个序列的 {second_ratio} 倍：在这次运行里，多出来的行"
        "并不是免费的，因为每一行都要做自己的矩阵乘、对自己的缓存做注意力，并算出 {vocab} 个 logits。"
    ),
    "lab.batch.uneven": (
        "这次运行里，一步的耗时并没有随 B 稳定增长：B = {second} 用了单个序列的 {second_ratio} 倍时间，"
        "而 B = {later} 只用了 {later_ratio} 倍。这么短的一步很容易受干扰；再运行一次，看看哪种形状站得住。"
    ),
    "lab.batch.intensity": (
        "算术强度（每读一个字节做的 FLOP 数；一次乘加算 2 个 FLOP）随 B 增长：B = 1 时是 {one_i}，B = {big} 时是 {big_i}。"
        "按本机测得的速度，算术强度在每字节 {ridge} FLOP 附近时，一步从受内存限制变成受算力限制。"
    ),
    "lab.batch.intensity_only": "算术强度（每读一个字节做的 FLOP 数；一次乘加算 2 个 FLOP）随 B 增长：B = 1 时是 {one_i}，B = {big} 时是 {big_i}。",
    "lab.batch.skipped": "跳过了 B = {sizes}：它们的 KV cache 会占用超过四分之一的空闲内存。",
    # -- 数值格式
    "lab.precision.idle": (
        "用 {formats} 分别加载这个检查点，在每种格式下测量 {context} 个位置上一个用缓存的 decode 步，"
        "并把每种格式在提示词上的 logits 与 float32 的比较。按 {run} 运行。"
    ),
    # 一种格式的一行：测了 float32 时与它相比，否则单独列出。
    "lab.precision.one_format": (
        "不管文件里存的是什么格式，这个模型的权重在加载时都会变成 float32（模型文件阶段说明了怎么变："
        "SmolLM2 的文件存的是 4 位的块）。LLaMA 系列模型目前只能以 float32 加载，所以这里没有别的数值格式可比："
        "这个实验在 GPT-2 模型上运行（自带的模型，或 Hugging Face hub 上的任何一个）。"
    ),
    "lab.precision.lead": (
        "每一行都是一次带缓存的 decode 步，KV cache 里已有 {context} 个位置：它读取的是权重，以及这些位置的键和值。"
    ),
    "lab.precision.row": "{format}：每个 token {ms} ms，每步读取 {read}，有效带宽 {gb_s} GB/s。",
    "lab.precision.row_ratio": "{format}：每个 token {ms} ms（float32 的 {ratio} 倍），每步读取 {read}，有效带宽 {gb_s} GB/s。",
    "lab.precision.head_copy": (
        "float32 每步只读取 {read}：它的 LM head 乘的是词嵌入表的一份 float16 副本（这个检查点存的就是 float16 "
        "数值，所以副本里的值完全相同；在这台 CPU 上它更快），而每一步只从 float32 的表里查一行。副本和原表都留在内存里，"
        "所以权重在内存里占 {weights}。模型文件阶段列出了每个权重用哪个内核相乘。"
    ),
    "lab.precision.fastest": (
        "每个权重的字节越少，每步要读的字节就越少：{fastest} 用了 float32 {bytes_ratio} 倍的字节，"
        "耗时是它的 {fastest_ratio} 倍。"
    ),
    "lab.precision.no_faster": "这里没有哪种格式比 float32 更快。",
    "lab.precision.quality": (
        "{format} 与 float32 在提示词的 {positions}上比较：logit 的最大差值 {max_dlogit}，"
        "最高 token 相同的比例 {top1}，平均 KL 散度 {kl} nat。"
    ),
    # -- 一步受什么限制："{what}" 是下面这些步骤的名字之一
    "lab.what.cached": "位置 {position} 上用缓存的一步",
    "lab.what.batch": "B = {batch} 的一步",
    "lab.what.format": "{format} 的一步",
    "lab.bound.unmeasured": "本机的速度没有测量，所以不判断它受什么限制。",
    "lab.machine_busy": (
        "实验室测量本机速度时，其他进程占用了本机 {share} 的 CPU 时间：下面的速度比本机实际能达到的要低，"
        "所以实验室不判断每一步受什么限制。请等机器空闲时再运行一次：那时实验室也会重新测量本机速度。"
    ),
    "lab.busy": (
        "这个实验运行时，其他进程占用了本机 {share} 的 CPU 时间：这些耗时比模型在本机单独运行时要慢，"
        "所以实验室不从中得出任何结论（不给斜率、加速比、快慢排名或原因），也不判断它的每一步受什么限制。"
        "请等机器空闲时再运行一次。"
    ),
    "lab.busy_table": "在其他进程占用 {share} 的 CPU 时测得：",
    "lab.busy_row.context": "  位置 {position}：不用缓存 {naive} ms，用缓存 {cached} ms",
    "lab.busy_row.batch": "  B = {batch}：每步 {ms} ms，每秒 {tps} 个 token",
    "lab.busy_row.precision": "  {format}：每个 token {ms} ms，每步读取 {read}",
    "lab.machine_while_busy": (
        "本机的实测结果（测量时其他进程占用了 {share} 的 CPU 时间，所以低于本机自身的速度）：从内存流式读取"
        "一个大矩阵的速度是 {stream} GB/s，矩阵乘的速度是 {compute} GFLOP/s（一个大的 float32 矩阵乘），使用 {threads}。"
    ),
    "lab.bound.memory": (
        "{what}：以 {stream} GB/s 读取它的 {read} 需要 {memory_ms} ms，占它 {ms} ms 的 {share}："
        "受内存带宽限制。"
    ),
    "lab.bound.compute": (
        "{what}：它的 {gflop} GFLOP 以 {compute} GFLOP/s 计算需要 {compute_ms} ms，占它 {ms} ms 的 {share}："
        "受算力限制。"
    ),
    "lab.bound.partly_memory": (
        "{what}：以 {stream} GB/s 读取它的 {read} 需要 {memory_ms} ms，占它 {ms} ms 的 {share}："
        "访存占了很大一部分，其余 {rest} ms 是每一步都要做的固定开销（Python、逐个调度运算、线程之间的交接），"
        "或者是比流式读取速度更慢的算子。"
    ),
    "lab.bound.partly_compute": (
        "{what}：它的 {gflop} GFLOP 以 {compute} GFLOP/s 计算需要 {compute_ms} ms，占它 {ms} ms 的 {share}："
        "计算占了很大一部分，其余 {rest} ms 是每一步都要做的固定开销，或者是比测得的速度更慢的算子。"
    ),
    "lab.bound.fixed": (
        "{what}：以 {stream} GB/s 读取它的 {read} 只需要 {memory_ms} ms，只占它 {ms} ms 的 {share}："
        "它既不受内存限制也不受算力限制，而是受每一步都要做、与模型大小无关的固定开销限制（Python、"
        "逐个调度运算、线程之间的交接），或者是比流式读取速度慢得多的算子。"
    ),
    "lab.bound.faster_compute": (
        "{what}：它的 {gflop} GFLOP 按 float32 测得的 {compute} GFLOP/s 计算需要 {compute_ms} ms，"
        "比它实际用的 {ms} ms 还多：这种格式的算子算得比 float32 的快。"
    ),
    "lab.bound.faster_than_measured": (
        "{what}：它的 {gflop} GFLOP 按 float32 测得的 {compute} GFLOP/s 计算需要 {compute_ms} ms，"
        "比它实际用的 {ms} ms 还多：它的矩阵乘法比那次测量（一个大的方阵乘法，只测一次）跑得快，所以这一步受计算限制。"
    ),
    "lab.bound.caches": (
        "{what}：以 {stream} GB/s 读取它的 {read} 需要 {memory_ms} ms，比它实际用的 {ms} ms 还多："
        "其中一部分来自处理器的缓存，比主内存更快。"
    ),
}
