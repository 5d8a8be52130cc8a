"""“答案是哪些部分写出来的”的旁白：直接 logit 归因与激活修补
（gpt2viz/tui/attribution_narration.py 决定用哪些句子，并格式化好每个数字）。"""

TEXT = {
    "attribution.edited": (
        "这次前向传播被修改过：关掉了 {parts}（假设实验）。这个界面上的每个数字都来自修改后的前向传播，"
        "而不是模型本来的计算：这里拆分的 logit，以及激活修补时两个提示词的运行。"
    ),
    "attribution.edited_heads": (
        "这次前向传播被修改过：关掉了 {parts}（假设实验）。给各个头打分时这些部件也是关掉的，"
        "所以这些格子来自修改后的模型，而不是模型本来的样子。"
    ),
    # -- 直接 logit 归因
    "attribution.dla.what": (
        "{token} 在最后一个位置（{position}，{last}）上的 logit 是 {logit}：它是模型的第 {rank} 号候选，"
        "概率为 {prob}。这个 logit 可以拆成网络每个部分各一项：该部分在这个位置写进残差流的内容，"
        "经过最终的 LayerNorm（它的缩放固定为这次前向传播的值），再与 {token} 在 wte 中的那一行做点积"
        "（LM head 读的正是这一行）。"
    ),
    # -- 干活的头 -------------------------------------------------------------------------------------
    "attribution.heads.intro": (
        "有些头有明确的分工。为了找出它们，模型读一段 {n} 个随机 token 重复两遍的序列（前面加上文本结束 token，"
        "共 {T} 个位置），每个头按 TransformerLens 的头检测器打分：它的注意力有多大比例落在这项工作"
        "要看的地方。前一个 token：紧挨着的前一个位置。重复 token：同一个 token 较早出现的位置。归纳："
        "那次出现之后紧跟的 token，模型正是靠它把见过的序列接着写下去。完美完成归纳工作的头"
        "在这里得 {best} 分；把注意力平均分开的头得 {chance} 分。头的名字沿用 TransformerLens 的写法："
        "{name} 是第 {layer} 层的头 {head}。按 {key} 看下一张网格。"
    ),
    "attribution.heads.found": "{job}：{heads}（完美的头：{best}；平均分开：{chance}）。",
    "attribution.heads.none": (
        "{job}：这里没有头干这项工作。最好的 {head} 得 {score} 分，而完美的头得 {best}，把注意力平均分开的头得 "
        "{chance}。"
    ),
    "attribution.heads.sink": (
        "注意力汇聚点，这次前向中：最后一个位置（{token}）在 {total} 个头中的 {n} 个里，"
        "把一半以上的注意力给了位置 0（{first}），{head} 中是 {share}。没有有用的东西可读的头会把权重放在这里，"
        "这样改变不大。"
    ),
    "attribution.heads.sink_none": (
        "注意力汇聚点，这次前向中：没有一个头把最后一个位置（{token}）一半以上的注意力给"
        "位置 0（{first}）；最多的是 {head}，{share}。"
    ),
    "attribution.heads.sink_single": (
        "注意力汇聚点：只有一个位置时，每个头都把全部注意力给它；提示词长一些才能看出权重落在哪里。"
    ),
    "attribution.dla.what_llama": (
        "{token} 在最后一个位置（{position}，{last}）的 logit 是 {logit}：它是模型的第 {rank} 个候选，概率 "
        "{prob}。它可以拆成网络各部分各自的一项：那一部分在这个位置写进残差流的内容，经过最终的 RMSNorm"
        "（缩放固定为这次前向的值），再和 LM head 中 {token} 那一行做点积。"
    ),
    "attribution.dla.grid_llama": (
        "网格里每一行是一层：第 0 到 {last_head} 列是它的各个头（各自经过 o_proj 中属于自己的那一片），"
        "{mlp} 列是它的 MLP。这个模型没有偏置、没有位置编码表，norm 里也没有 β，所以没有别的部分写入。"
        "橙色抬高 logit，蓝色压低；颜色的范围到 ±{scale}。"
    ),
    "attribution.dla.groups_llama": "所有注意力头一共写入 {heads}，所有 MLP {mlps}，token 嵌入 {embedding}。",
    "attribution.dla.grid": (
        "网格的每一行是一层：第 0 到 {last_head} 列是这一层的各个注意力头，“{mlp}”列是它的 MLP，"
        "“{bias}”列是它注意力输出（c_proj）的偏置，不论各个头算出什么都会加上。橙色让 logit 变大，"
        "蓝色让它变小；颜色的范围到 ±{scale}。"
    ),
    "attribution.dla.sum": (
        "各项加起来是 {total}；模型算出的 logit 是 {logit}。两者相差 {diff}，在 {tolerance} 以内："
        "缩放固定之后，这种拆分是精确的，只差舍入误差。"
    ),
    "attribution.dla.sum_off": (
        "各项加起来是 {total}；模型算出的 logit 是 {logit}。两者相差 {diff}，超过了 {tolerance}："
        "这种数值格式（{dtype}）的舍入误差在各项上累积起来了。"
    ),
    "attribution.dla.largest": (
        "最大的几项：{first}（{first_value}）、{second}（{second_value}）和{third}（{third_value}）。"
        "最负的一项：{lowest}（{lowest_value}）。"
    ),
    "attribution.dla.groups": (
        "所有注意力头合计写入 {heads}，所有 MLP 合计 {mlps}，词嵌入和位置编码合计 {embeddings}，"
        "注意力偏置合计 {biases}，最终 LayerNorm 的 β 为 {ln_bias}。"
    ),
    "attribution.dla.direct": (
        "这里只算直接作用：某个部分写入、又被后面的层读取并改写的内容，记在后面那一层的账上。"
        "某一项很小，并不说明这个部分不重要。"
    ),
    "attribution.dla.choose": "按 {key} 改为归因模型的下一个候选（前 {n} 个候选轮流）。",
    # -- 激活修补
    "attribution.patch.idle": (
        "激活修补要回答的是：两个提示词之间的差别存在于哪里。原提示词就是这次前向传播的提示词："
        "{clean}（{tokens}）。在输入框里输入一个 token 数相同的改动提示词，改掉答案所依赖的某个词，"
        "然后按 {enter}。模型接着会对每一层、每个位置各运行一次改动提示词，每次都把进入该层、"
        "该位置的残差流换成原提示词那次运行的值。"
    ),
    "attribution.patch.answers": (
        "原提示词预测 {clean}，改动提示词预测 {corrupted}。原答案的领先量（它的 logit 减去 {corrupted} "
        "的 logit）在原提示词的运行中是 {clean_diff}，在改动提示词的运行中是 {corrupted_diff}。"
    ),
    "attribution.patch.cells": (
        "每个格子表示单独一次修补能把这个变化找回多少：1 表示原答案的领先量完全恢复，0 表示没有任何变化"
        "（这个比例也可能低于 0 或高于 1）。行是修补进入的层，列是位置。"
    ),
    "attribution.patch.strongest": "最强的格子是第 {block} 层、位置 {position}（{token}）：{restored}。",
    "attribution.patch.moves": (
        "进入第 0 层时，修补两个提示词不同的位置 {position}（{token}）能找回 {first}；进入最后一层"
        "（第 {last_block} 层）时，修补最后一个位置（{last_token}）能找回 {last}。"
    ),
}
