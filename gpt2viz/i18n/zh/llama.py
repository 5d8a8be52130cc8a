"""LLaMA 系列模型（SmolLM2）与 GPT-2 不同的各个阶段：RMSNorm、旋转位置编码、分组的键/值头、
SwiGLU、GGUF 文件里的量化块（gpt2viz/tui/llama_narration.py）。"""

TEXT = {
    "llama.tokenize.lead": "模型从来看不到字母。",
    # -- 模型文件（GGUF 文件）-------------------------------------------------------------------------
    "llama.model_files.gguf": (
        "这个模型来自一个 {file_bytes} 的 GGUF 文件，也就是 llama.cpp 读取的格式：里面有配置、分词器"
        "（{vocab} 个 token）和全部张量，存储格式为 {formats}。gpt2viz 在加载时把每个张量一次性转成 "
        "float32：内存中占 {weight_bytes}。"
    ),
    "llama.model_files.q4_1": (
        "Q4_1 把权重矩阵按每 32 个数分成一块：一个缩放 d 和一个最小值 m（各 16 位），再加上 32 个 "
        "0 到 15 的 4 位整数 q，每块 20 字节，每个数 5 位，而 float32 是 32 位。读回时一个数是 m + d · q："
        "和当初存进去的数相差不超过半个间隔 d / 2，这就是 4 位在这里带来的全部误差；这个模型就是以这种"
        "形式测出来的（它的回答是这个文件给出的，不是全精度模型的）。"
    ),
    "llama.model_files.q8_0": (
        "Q8_0（这里用于词嵌入表）每块 32 个有符号字节加一个 16 位缩放：每个数 8.5 位。"
    ),
    "llama.model_files.safetensors": (
        "这个模型是一个 Hugging Face 检查点（safetensors 共 {file_bytes}），存储格式为 {formats}，"
        "加载为 float32：内存中占 {weight_bytes}。"
    ),
    "llama.model_files.config": (
        "它的尺寸：{n_layer} 层；{n_head} 个查询头、{n_kv_head} 个键/值头，每个头 {D} 个数；向量 {n_embd} "
        "个数；MLP 宽 {d_mlp}；上下文 {n_ctx} 个位置；词表 {vocab} 个 token；旋转位置编码的底数 {theta}；"
        "RMSNorm 的 ε 为 {eps}。"
    ),
    "llama.model_files.formula": (
        "参数 = embed_tokens {wte} + {n_layer} 层 × {block} + norm {ln_f}{head} = {total}"
    ),
    "llama.model_files.own_head": " + lm_head {lm_head}",
    "llama.model_files.flow": "{file} → {tensors} → float32，{weight_bytes}",
    # -- 嵌入 ----------------------------------------------------------------------------------------
    "llama.embed.lookup": (
        "每个 id 从词嵌入表 embed_tokens [{vocab} × {n_embd}] 中取出对应的一行：这是查表，不是矩阵乘。"
        "这里没有位置编码表：和 GPT-2 不同，此时的 x 还不包含任何词序信息。词序在每一层里才进入：查询和键"
        "按各自的位置旋转一个随位置增大的角度（见 Q、K、V 阶段）。x 也就是残差流：{T} × {n_embd} = "
        "{size} 个数，用 {dtype} 存储占 {size_bytes} 字节。每一层都读取 x，再把自己的结果加回去。"
    ),
    "llama.embed.params": (
        "这个模型共有 {n_params} 个参数，其中 embed_tokens 占 {wte} 个（{wte_millions}，{share}）。"
    ),
    "llama.embed.length": "在位置 {position}（{token}），token 向量的长度是 {length}。",
    # 按新 token 之前已缓存的位置数（{n}）选用其一（中文两种写法相同）。
    "llama.embed.decode.one": (
        "新 token 位于位置 {past}，排在 {n} 个已缓存的 token 之后；不管它在哪个位置，取出的都是同一行："
        "它的位置是在各层里通过旋转加进去的。"
    ),
    "llama.embed.decode.other": (
        "新 token 位于位置 {past}，排在 {n} 个已缓存的 token 之后；不管它在哪个位置，取出的都是同一行："
        "它的位置是在各层里通过旋转加进去的。"
    ),
    "llama.embed.flow_tokens": "ids，形状 {ids} → 取 embed_tokens 的行 → x {shape}",
    # -- RMSNorm --------------------------------------------------------------------------------------
    "llama.ln1.text": (
        "进入注意力之前，每个 token 的向量各自重新缩放：除以它 {n_embd} 个数的均方根，再把每一维乘上"
        "可学习的权重（{params} 个参数）。这是 RMSNorm，不是 GPT-2 的 LayerNorm：不减均值，也没有偏置，"
        "省了计算，实际效果也不差。ε = {eps} 保证除法不出问题。x 本身不变，注意力读取的是缩放后的副本。"
    ),
    "llama.ln2.text": (
        "进入 MLP 之前，每个 token 的向量用同样的方式各自重新缩放：除以它 {n_embd} 个数的均方根"
        "（ε = {eps}），再乘上可学习的权重（{params} 个参数）。x 本身不变，MLP 读取的是缩放后的副本。"
    ),
    "llama.ln_final.text": (
        "全部 {n_layer} 层都算完之后，最终的 RMSNorm（norm）用同样的方式重新缩放每个位置的向量"
        "（{params} 个参数，ε = {eps}），让 LM head 拿到大小稳定的向量。"
    ),
    "llama.norm.stats": (
        "在位置 {position}（{token}）：进入时均值 {mean}、均方根 {rms}；除完之后是 {normalized_mean} 和 "
        "{normalized_rms}（均值只被缩放，没有被减掉）；乘上权重之后是 {out_mean} 和 {out_rms}。"
    ),
    # -- Q、K、V，旋转位置编码，分组的头 ------------------------------------------------------------------
    "llama.qkv.project": (
        "三次不带偏置的矩阵乘，把每个归一化后的向量变成查询 Q，q_proj [{C} × {C}]（这个位置想找什么），"
        "以及键 K 和值 V，k_proj 和 v_proj 各为 [{C} × {KV}]（它能凭什么被找到、被找到时交出什么）："
        "共 {params} 个参数。"
    ),
    "llama.qkv.groups": (
        "查询被切成 {H} 个头，每个头 {D} 个数；键和值却只切成 {KVH} 个头：每个键/值头供 {group} 个查询头"
        "共用（分组查询注意力，GQA；GPT-2 给每个查询头都配一个自己的键/值头），查询头 h 读取的是键/值头 "
        "h ÷ {group}（向下取整）。KV cache 只保存这 {KVH} 个头：是每个查询头各配一个时的 {group} 分之一。"
    ),
    "llama.qkv.groups_none": (
        "查询、键和值各自被切成 {H} 个头，每个头 {D} 个数：每个查询头都有自己的键和值。"
    ),
    "llama.qkv.rotary": (
        "位置信息在这里进入。每个查询头和键头被看成 {pairs} 对数（第 j 个数和第 j + {half} 个数一对），"
        "第 j 对转过的角度是 位置 × {theta}^(−2j/{D}) 弧度：前面的对转得快，后面的转得慢。于是查询和键的分数"
        "取决于两者位置相隔多远，而不是各自在哪里。"
    ),
    "llama.qkv.rotary_numbers": (
        "在位置 {position}，头 0 的查询第 0 对转了 {angle} 弧度，({b0}, {b1}) → ({a0}, {a1})，长度不变；"
        "它的最后一对（第 {last} 对）只转了 {slow} 弧度。"
    ),
    "llama.qkv.cache": (
        "KV cache 为后面的 token 保存的是旋转后的键和值：这一层是 2 × {heads} × {positions} × {D} = "
        "{numbers} 个数，{bytes}，只有每个查询头都配一个键/值头时的 1/{group}。查询只用一次，从不缓存。"
    ),
    "llama.qkv.formula_project": "q = x W_qᵀ，k = x W_kᵀ，v = x W_vᵀ",
    "llama.qkv.formula_rotate": "(q_j, q_j+{half}) ← 旋转 θ_j = 位置 · {theta}^(−2j/{D})，j = 0 … {last}",
    "llama.qkv.formula_sizes": "H = {heads} 个查询头，{kv_heads} 个键/值头，D = 每个头 {numbers}",
    "llama.qkv.flow_project": "norm_1(x) {x} → q_proj → {q}；k_proj、v_proj → 各为 {kv}",
    "llama.qkv.flow_heads": "分头 → q {q}；k、v 各为 {kv}",
    "llama.qkv.flow_rotate": "按位置旋转 q 和 k → 形状不变",
    "llama.scores.group": "它用的键来自键/值头 {kv}，查询头 {first}–{last} 共用这一组。",
    # -- 所有头 ------------------------------------------------------------------------------------------
    "llama.heads.groups": (
        "查询头每 {group} 个共用一组键和值：头 0–{last_in_group} 读取键/值头 0，依此类推，共 {KVH} 组，"
        "所以同一组里的头只有查询不同。"
    ),
    # -- 注意力输出 ------------------------------------------------------------------------------------
    "llama.attn_out.mix": (
        "各个头的输出 z 重新并排拼起来（{H} × {D} = {C}），再由 o_proj [{C} × {C}] 混合（{proj} 个参数，"
        "没有偏置）。结果是一个增量，加到残差流上。注意力是整个模型里唯一让信息在位置之间流动的步骤。"
    ),
    "llama.attn_out.params": (
        "第 {layer} 层的注意力一共有 {attention} 个参数：q、k、v {c_attn} + o_proj {proj}。"
    ),
    "llama.flow.update_o": "o_proj → 增量 {update}",
    "llama.flow.update_down": "down_proj → 增量 {update}",
    # -- MLP：SwiGLU -------------------------------------------------------------------------------------
    "llama.mlp.swiglu": (
        "MLP 对每个位置分别计算，所有位置用同一套权重：这里没有信息在位置之间流动。它是 SwiGLU："
        "两次矩阵乘把 {C} 个数扩展到 {F} 个，一个是门控（gate_proj），一个是上投影（up_proj）；SiLU "
        "作用在门控上，得到的值逐个数乘上上投影，决定每个数放行多少；down_proj 再把 {F} 个数压回 {C} 个。"
    ),
    "llama.mlp.params": (
        "MLP 有 {mlp} 个参数（gate 和 up 共 {c_fc}，down {proj}），是这一层注意力（{attention} 个参数）的 "
        "{ratio} 倍：GPT-2 用两个矩阵，这里用三个，但每个更窄（{F} = {width} × {C}，GPT-2 是 4 倍）。"
    ),
    "llama.mlp.gate": (
        "在位置 {position}，{F} 个神经元中有 {cut} 个的门控 ≤ 0：SiLU 在那里给出 −0.28 到 0 之间的值，"
        "这些神经元只放行自己 up 值的一小部分。up 没有经过 SiLU，它的符号会传下去：所以神经元的结果可以小于 0，"
        "up 值大时还会远小于 0。"
    ),
    "llama.mlp.active": (
        "在位置 {position}（{token}），{F} 个神经元中有 {share} 在 silu(gate) × up 之后为正。"
    ),
    "llama.mlp.active_top": (
        "在位置 {position}（{token}），{F} 个神经元中有 {share} 在 silu(gate) × up 之后为正；"
        "按大小（不论正负）最强的是神经元 {neuron}，值为 {value}。"
    ),
    "llama.mlp.memory": (
        "把 MLP 看成一张键值记忆：每个神经元的键是 gate_proj（以及 up_proj）中它的那一行，和这个位置的"
        "向量做匹配；它的值是 down_proj 中它的那一列，silu(gate) × up 有多强，就按多大的比例加进残差流。"
        "这里，神经元 {neuron} 的门控是 {pre}，silu(gate) × up 是 {value}，它的值最能抬高 {tokens} 的 logit。"
    ),
    "llama.mlp.formula": (
        "mlp(x) = (silu(x W_gateᵀ) ⊙ x W_upᵀ) W_downᵀ\nsilu(u) = u · σ(u) = u / (1 + e^−u)"
    ),
    "llama.mlp.flow_widen": "norm_2(x) {x} → gate_proj、up_proj → 各为 {hidden}",
    "llama.mlp.flow_gate": "silu(gate) × up → {hidden}",
    # -- MLP 输出 ---------------------------------------------------------------------------------------
    "llama.mlp_out.params": (
        "第 {layer} 层有 {block} 个参数：注意力 {attention}，MLP {mlp}，两个 RMSNorm {layer_norms}。"
        "全部 {n_layer} 层合计 {blocks} 个，模型总共 {n_params} 个。"
    ),
    # -- LM head --------------------------------------------------------------------------------------
    "llama.lm_head.tied": (
        "LM head 把每个位置的向量乘以 embed_tokens 的转置：正是当初把 token 变成向量的那张表（和 GPT-2 "
        "一样是权重共享），所以它不增加任何参数。结果是词表中每一项都得到一个分数，也就是 logit：每个位置 "
        "{vocab} 个，一共 {total} 个。"
    ),
    "llama.lm_head.own": (
        "LM head 把每个位置的向量乘以它自己的矩阵 lm_head [{vocab} × {n_embd}]（{params} 个参数：这个模型"
        "没有把它和 embed_tokens 共享）。结果是词表中每一项都得到一个分数，也就是 logit：每个位置 {vocab} "
        "个，一共 {total} 个。"
    ),
    # -- logit lens -----------------------------------------------------------------------------------
    "llama.logit_lens.intro": (
        "如果模型提前停下，它会回答什么？logit lens 取出最后一个位置在每一层之后的残差流，送进最终的 "
        "RMSNorm 和 LM head，就好像那一层是最后一层。它展示预测是怎样一层一层形成的。"
    ),
    "llama.logit_lens.formula": "lens_l = softmax(norm(第 l 层之后的 x)[{last}] @ {table}ᵀ)    l = 0 … {last_layer}",
    "llama.logit_lens.flow": "每层之后的 x，最后一个位置 {x} → norm，@ {table}ᵀ → {shape}",
}
