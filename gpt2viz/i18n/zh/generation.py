"""生成视图的讲解（简体中文）：与 ../en/generation.py 的键和占位符相同。"""

TEXT = {
    # -- 当前这一步：输入了什么，形状为什么是这样 -------------------------------------------------
    # 每对按输入的 id 数（{length}）或缓存中的位置数（{n}）选用其一。
    "generation.step.full_pass.one": (
        "没有缓存时，每一步都把整个序列重新算一遍：这里只有 {length} 个 id，{ids_shape}，穿过全部 {n_layer} 层，"
        "它的键和值重新计算、用完就丢，注意力分数只有一个格子，{scores_shape}。"
        "只有最后一个位置的 logits，{logits_shape}，用来选出 token。每多一个 token，工作量就多一分。"
    ),
    "generation.step.full_pass.other": (
        "没有缓存时，每一步都把整个序列重新算一遍：全部 {length} 个 id，{ids_shape}，穿过全部 {n_layer} 层，"
        "每个位置的键和值都重新计算、用完就丢，注意力分数是一个完整的 {length} × {length} 三角，{scores_shape}。"
        "只有最后一个位置的 logits，{logits_shape}，用来选出 token。每多一个 token，工作量就多一分。"
    ),
    "generation.step.prefill.one": (
        "prefill 一次读入整个上下文：{length} 个 id，{ids_shape}，位于位置 0。"
        "{n_layer} 层中的每一层都把它的键和值，{kv_shape}，写进缓存；注意力分数是 {scores_shape}，"
        "加上因果掩码。只计算最后一个位置的 logits，{logits_shape}：它给出第一个新 token。"
    ),
    "generation.step.prefill.other": (
        "prefill 一次读入整个上下文：{length} 个 id，{ids_shape}，位置 0–{last}。"
        "{n_layer} 层中的每一层都把它们的键和值，{kv_shape}，写进缓存；注意力分数是 {scores_shape}，"
        "加上因果掩码。只计算最后一个位置的 logits，{logits_shape}：它给出第一个新 token。"
    ),
    "generation.step.prefill_resumed": (
        "prefill 一次读入整个上下文：{length} 个 id，{ids_shape}，位置 0–{last}。"
        "{n_layer} 层中的每一层都把它们的键和值，{kv_shape}，写进缓存；注意力分数是 {scores_shape}，"
        "加上因果掩码。只计算最后一个位置的 logits，{logits_shape}：它给出第一个新 token。"
        "接着生成的运行从一个新的缓存开始，所以之前写出的 {written} 也要重新读一遍。"
    ),
    "generation.step.decode.one": (
        "decode 这一步只输入一个 id，{ids_shape}：{previous}（id {previous_id}），即第 {previous_step} 步选出的 "
        "token。它的位置 id 是 {past}，也就是过去长度：缓存里已有 {n} 个位置，所以它取 wpe[{past}]，接着序列往下走，"
        "而不是从 0 重新开始。它的 k 和 v，{kv_shape}，被追加进缓存，它唯一的一行查询对全部 {length} 个键打分："
        "{scores_shape}。"
        "\n\n因果掩码就是按过去长度平移的下三角，tril(diagonal={past})：查询 {past} 可以看到键 0–{past}，"
        "也就是现有的每一个键。所以 decode 步没有任何格子被掩码。"
    ),
    "generation.step.decode.other": (
        "decode 这一步只输入一个 id，{ids_shape}：{previous}（id {previous_id}），即第 {previous_step} 步选出的 "
        "token。它的位置 id 是 {past}，也就是过去长度：缓存里已有 {n} 个位置，所以它取 wpe[{past}]，接着序列往下走，"
        "而不是从 0 重新开始。它的 k 和 v，{kv_shape}，被追加进缓存，它唯一的一行查询对全部 {length} 个键打分："
        "{scores_shape}。"
        "\n\n因果掩码就是按过去长度平移的下三角，tril(diagonal={past})：查询 {past} 可以看到键 0–{past}，"
        "也就是现有的每一个键。所以 decode 步没有任何格子被掩码。"
    ),
    # -- 这个 token 是怎么选出来的 -----------------------------------------------------------------
    "generation.choice.greedy": (
        "贪心解码取概率最大的 token：{token}（id {id}），p = {p}。没有温度，也没有 top-k 或 top-p："
        "同样的提示词总是得到同样的文本。"
    ),
    "generation.choice.sharper": "采样：logits 先除以温度 {temperature}（更尖锐：可能的更可能）。",
    "generation.choice.flatter": "采样：logits 先除以温度 {temperature}（更平坦）。",
    "generation.choice.unchanged": "采样：logits 先除以温度 {temperature}（不变）。",
    "generation.choice.top_k": "然后 top-k 只保留最可能的 {k} 个。",
    "generation.choice.top_p": "然后 top-p 按概率从大到小保留，直到累计概率达到 {mass}。",
    "generation.choice.top_k_top_p": (
        "然后 top-k 只保留最可能的 {k} 个，top-p 再按概率从大到小保留，直到累计概率达到 {mass}。"
    ),
    "generation.choice.drawn": (
        "token 从剩下的候选中抽取：{token}（id {id}）经过这些设置后 p = {p}，在原始 softmax 中是 {plain_p}。"
    ),
    "generation.choice.drawn_outside": (
        "token 从剩下的候选中抽取：{token}（id {id}）经过这些设置后 p = {p}，在原始 softmax 中排在前 {topk} 名之外。"
    ),
    "generation.choice.only_left": "这一步只有 {tokens} 可供抽取。",
    "generation.choice.seed": "种子 {seed} 让每次抽取都可以复现。",
    "generation.choice.no_seed": "没有种子：再运行一次会抽出不同的结果。",
    # -- KV cache -------------------------------------------------------------------------------
    "generation.kv.why": (
        "为什么缓存 K 和 V，而不缓存 Q：一个位置的键和值只取决于它之前（含它自己）的 token，一旦算出就不会再变，"
        "而后面的每个 token 都要再读它们。查询只用一次，由它自己的位置用来询问哪些更早的位置重要；"
        "之后的步骤都不再需要它。所以每一层保留 K 和 V，丢掉 q。每多一个 token 就多 {per_token} 字节"
        "（2 × {layers} × {heads} × {head_dim} × {value_bytes} B，{dtype}）；缓冲区按这次运行的提示词加上"
        "要生成的新 token 一次分配好（最多是整个 {n_ctx} 个位置的上下文，{full}），然后原地填写，"
        "所以 decode 步不做任何分配。"
        "\n\n缓存改变的是计算路径，不是结果：它保存的键和值，正是完整前向传播会重新算出的同样的数，"
        "所以得到的 token 也一样。按 {compare_key} 两种都跑一遍并对比。"
    ),
    "generation.kv.off": (
        "缓存已关闭：步与步之间什么都不保留，每一步都为所有位置重新计算 K 和 V。"
        "打开缓存的话，这次运行每个 token 会保留 {per_token} 字节。"
    ),
    # -- 一步的开销 -----------------------------------------------------------------------------
    "generation.cost.prefill_decode": (
        "prefill 和 decode 的开销不同。prefill（首个 token 的时间）把提示词的所有位置一次性推过每个权重矩阵："
        "从内存读出的每个权重都要做很多次乘加。decode 步只推一个位置：每个权重读一次，只做一次乘加，"
        "所以 decode 步的速度不可能超过内存送来权重的速度，除非还有别的事情花的时间更长。"
    ),
    "generation.cost.reads": (
        "每个 decode 步都把 {n_params} 个参数读一遍，以 {dtype} 存储：{weights}（只用来查表的表，比如位置嵌入，"
        "只读用到的那一行），再加上 KV cache。"
    ),
    "generation.cost.reads_all": "每个 decode 步都把 {n_params} 个参数读一遍，以 {dtype} 存储：{weights}，再加上 KV cache。",
    "generation.cost.reads_float16_head": (
        "每个 decode 步都把 {n_params} 个参数读一遍：{weights}，词嵌入表经由 LM head 的 float16 副本读取（每个数两个字节），"
        "其余以 {dtype} 存储（只用来查表的表，比如位置嵌入，只读用到的那一行），再加上 KV cache。"
    ),
    "generation.cost.reads_all_float16_head": (
        "每个 decode 步都把 {n_params} 个参数读一遍：{weights}，词嵌入表经由 LM head 的 float16 副本读取（每个数两个字节），"
        "其余以 {dtype} 存储，再加上 KV cache。"
    ),
    "generation.cost.no_cache": (
        "没有缓存时，一步处理的不是一个位置而是整个序列，所以每多一个 token，用时就更长：按 {compare_key} 对比。"
    ),
    "generation.cost.step_rate": "第 {index} 步：{weights} + {kv} 的 K 和 V，用时 {ms} ms = 有效 {rate} GB/s。",
    "generation.cost.mean_rate": "decode 步平均：{ms} ms 读 {bytes} = 有效 {rate} GB/s。",
    # 这一步受什么限制：与本机测得的流式读取速率相比（costs.step_bound）。
    "generation.cost.step_rate_busy": (
        "第 {index} 步：{weights} + {kv} 的 K 和 V，用时 {ms} ms = 有效 {rate} GB/s，"
        "测量时其他进程占用了 {share} 的 CPU（低于这台机器单独运行时的读取速度）。"
    ),
    "generation.cost.mean_rate_busy": (
        "平均解码一步：{ms} ms 读取 {bytes} = 有效 {rate} GB/s，测量时其他进程占用了 {share} 的 CPU。"
    ),
    "generation.busy": (
        "运行期间，其他进程占用了本机 {share} 的 CPU 时间：这些耗时比模型在本机单独运行时要慢，所以这里不判断"
        "每一步受什么限制，也不分析时间花在哪里。请等机器空闲时再运行一次。"
    ),
    "generation.bound.unmeasured": "这次运行没有测量本机的内存带宽，所以不判断它受什么限制。",
    "generation.bound.caches": (
        "按本机流式读取大矩阵的 {stream} GB/s 读这些数据要 {floor} ms，比这一步实际用的 {ms} ms 还多："
        "一部分权重来自处理器的缓存，比主内存快，所以这一步既不单受内存限制，也不单受固定开销限制。"
    ),
    "generation.bound.memory": (
        "按本机流式读取大矩阵的 {stream} GB/s 读这些数据要 {floor} ms，占每步 {ms} ms 的 {share}："
        "这一步受内存带宽限制。"
    ),
    "generation.bound.partly": (
        "按本机流式读取大矩阵的 {stream} GB/s 读这些数据要 {floor} ms，占每步 {ms} ms 的 {share}："
        "内存占了开销的一大部分，其余是每一步都有的固定开销（Python、逐个调度运算、两个核心之间的交接）。"
    ),
    "generation.bound.fixed": (
        "按本机流式读取大矩阵的 {stream} GB/s 读这些数据要 {floor} ms，只占每步 {ms} ms 的 {share}："
        "这一步不受内存限制，而是受每一步都有、与模型大小无关的固定开销限制（Python、逐个调度它的运算、"
        "两个核心之间的交接）。更大的模型每步读得更多，会更接近内存的极限。"
    ),
    # -- 不用缓存与用缓存的对比 -----------------------------------------------------------------
    "generation.compare.same": "两次运行选出了相同的 {ids}。",
    "generation.compare.same_seeded": "两次运行选出了相同的 {ids}（采样用的是同一个种子 {seed}）。",
    "generation.compare.path": (
        "缓存改变的是计算路径，不是结果：decode 步对最新位置的 q、k、v 的计算与完整前向传播完全相同，"
        "其他位置的键和值则从缓存读取，而不是重新计算；它们是同样的数，因为一个位置的 k 和 v 从不依赖后面的 "
        "token。注意力分数的最后一行、softmax 和 logits 的结果都一样（浮点舍入误差以内），所以 argmax 也一样。"
        "变的是工作量：在最后一步，完整前向传播把 {positions} 个位置推过每一层，decode 步只推一个。"
    ),
    "generation.compare.path_sampled": (
        "缓存改变的是计算路径，不是结果：decode 步对最新位置的 q、k、v 的计算与完整前向传播完全相同，"
        "其他位置的键和值则从缓存读取，而不是重新计算；它们是同样的数，因为一个位置的 k 和 v 从不依赖后面的 "
        "token。注意力分数的最后一行、softmax 和概率的结果都一样（浮点舍入误差以内），同一个种子又以同样的方式"
        "从中抽样，所以抽出的 token 也一样。变的是工作量：在最后一步，完整前向传播把 {positions} 个位置推过每一层，"
        "decode 步只推一个。"
    ),
    "generation.compare.cost_split": (
        "时间花在哪里，按这次运行的完整前向传播拟合：每一步无论长短都大约花 {fixed} ms"
        "（读取 LM head 的权重、Python、调度运算），每重新计算一个位置再加大约 {per_position} ms。"
        "在最后一步（{last} 个位置）就是 {at_last} ms，而有缓存的 decode 步是 {cached} ms。"
        "缓存去掉的是按位置增长的那部分，不是固定部分：序列越短，或者固定部分越大，加速就越小。"
    ),
    "generation.compare.cost_split_no_gain": (
        "时间花在哪里，按这次运行的完整前向传播拟合：每一步无论长短都大约花 {fixed} ms"
        "（读取 LM head 的权重、Python、调度运算），每重新计算一个位置再加大约 {per_position} ms。"
        "在最后一步（{last} 个位置）就是 {at_last} ms，而有缓存的 decode 步用了 {cached} ms：这次缓存没有带来加速。"
        "缓存去掉的是按位置增长的那部分，这次运行里它很小；固定部分几乎就是一步的全部，缓存去不掉它。"
        "序列更长、模型更大、重新计算各个位置更费时的时候，缓存才划算。"
    ),
    "generation.compare.differ": (
        "两次运行从第 {step} 步开始不同：不用缓存是 {naive}，用缓存是 {cached}。缓存本不应该改变结果，"
        "所以这是一个程序缺陷（或者是两个几乎相等的最高候选，被舍入误差换了顺序）。"
    ),
}
