"""逐步讲解的旁白：一次前向传播中每个阶段做了什么，配上这次运行的数字
（gpt2viz/tui/narration.py 决定用哪些段落，并格式化好每个数字）。"""

TEXT = {
    "stage.note": "注意：{notice}。",
    "stage.reduced": (
        "提示词有 {positions} 个位置，所以 trace 里的每张图都按 {rows} × {cols} 的网格分块取了平均"
        "（最后一个查询的那一行完整保留，显示在图的下方）。"
    ),
    "stage.flow.update": "c_proj → 增量 {update}",
    # -- 分词 -------------------------------------------------------------------------------------
    "stage.edited": "修改后的前向传播：这一层里的 {parts} 被关掉了（假设实验）。这个阶段的每个数字都来自编辑后的这一遍，而不是模型本来的计算。",
    "stage.edited_later": (
        "修改后的前向传播：前面层里的 {parts} 被关掉了（假设实验）。这个阶段在它之后，"
        "所以这里的数字来自修改后的这一遍，而不是模型本来的计算。"
    ),
    "stage.edited_block_attention": (
        "关掉的是整层的输出：这里各个头的分数和注意力模式仍照常计算，但注意力写出的内容和 MLP 的输出都到不了残差流。"
    ),
    "stage.edited_mlp": (
        "关掉的是 MLP 的输出：下面的神经元仍照常计算，但它们写出的内容到不了 x（见下一阶段的增量）。"
    ),
    "stage.edited_heads": (
        "关掉的是头的输出 z：这里的分数和注意力模式仍照常计算，但它读到的内容到不了这一层的增量"
        "（被换成零，标了 :mean 的换成平均值）。"
    ),
    "stage.tokenize.lead": "GPT-2 从来看不到字母。",
    "stage.tokenize.empty": "提示词是空的，没有什么可切：模型从一个特殊 token 开始。",
    "stage.tokenize.cut": "它的字节级 BPE 分词器把提示词的 {bytes}切成 {tokens}。",
    "stage.tokenize.cut_kept": (
        "它的字节级 BPE 分词器把提示词的 {bytes}切成 token，数量超过了上下文能放下的长度；"
        "只保留最后 {kept} 个（{kept_bytes}）。"
    ),
    "stage.tokenize.vocab": (
        "每个 token 都是词表（共 {vocab} 项）里的一项；从这里开始，模型只和这些 id 打交道。"
        "常见的词是一个 token，少见的词会被切成几块，一块甚至可以只是某个字符的一部分。"
    ),
    # 按以空格开头的 token 数选用其一（中文两种写法相同）。
    "stage.tokenize.spaces.one": (
        "空格属于它后面的那个 token：这些 token 中有 {n} 个以空格开头，显示为 ␣（词表文件里写作 Ġ），"
        "所以 {spaced} 和 {bare} 是两个不同的 token，id 也不同。"
    ),
    "stage.tokenize.spaces.other": (
        "空格属于它后面的那个 token：这些 token 中有 {n} 个以空格开头，显示为 ␣（词表文件里写作 Ġ），"
        "所以 {spaced} 和 {bare} 是两个不同的 token，id 也不同。"
    ),
    "stage.tokenize.formula": "提示词 → UTF-8 字节 → BPE 合并 → token id",
    "stage.tokenize.flow": '"{prompt}"（{characters}，{bytes}） → token id，形状 {shape}',
    # 按新 token 之前的 token 数（{n}）选用其一（中文两种写法相同）。
    "stage.tokenize.decode.one": (
        "这是一次 decode 步的前向传播。只有一个 id 进入模型：{token}（id {id}），也就是上一步选出的 "
        "token，位于位置 {position}。它之前的 {n} 个 token 不再重新计算：每一层都把它们的键和值存在 "
        "KV cache 里，这次前向传播直接从那里读取。下面的每个阶段都只计算这一个位置，而不是整段文本。"
    ),
    "stage.tokenize.decode.other": (
        "这是一次 decode 步的前向传播。只有一个 id 进入模型：{token}（id {id}），也就是上一步选出的 "
        "token，位于位置 {position}。它之前的 {n} 个 token 不再重新计算：每一层都把它们的键和值存在 "
        "KV cache 里，这次前向传播直接从那里读取。下面的每个阶段都只计算这一个位置，而不是整段文本。"
    ),
    "stage.tokenize.decode_formula": "输入的 ids = [最新的 token]   （更早的 token：键和值在 KV cache 里）",
    "stage.tokenize.decode_flow": "{past} 个已缓存 + 1 个新的 → ids，形状 {shape}，位置 {position}",
    # -- 嵌入 -------------------------------------------------------------------------------------
    "stage.embed.lookup": (
        "每个 id 从词嵌入表 wte [{vocab} × {n_embd}] 中取出对应的一行：这是查表，不是矩阵乘。每个位置 p "
        "从位置编码表 wpe [{n_ctx} × {n_embd}] 中取出第 p 行，模型就是靠它知道词的顺序。两者相加得到 x，"
        "也就是残差流：{T} × {n_embd} = {size} 个数，用 {dtype} 存储占 {size_bytes} 字节。"
        "每一层都读取 x，再把自己的结果加回去。"
    ),
    "stage.embed.params": (
        "这个模型共有 {n_params} 个参数，其中 wte 占 {wte} 个（{wte_millions}，{share}）；wpe 占 {wpe} 个。"
    ),
    # 按新 token 之前已缓存的位置数（{n}）选用其一（中文两种写法相同）。
    "stage.embed.decode.one": (
        "新 token 位于位置 {past}，排在 {n} 个已缓存的 token 之后，所以它取 wpe 的第 {past} 行："
        "decode 步是接着序列往下走，而不是从 0 重新开始。"
    ),
    "stage.embed.decode.other": (
        "新 token 位于位置 {past}，排在 {n} 个已缓存的 token 之后，所以它取 wpe 的第 {past} 行："
        "decode 步是接着序列往下走，而不是从 0 重新开始。"
    ),
    "stage.embed.lengths": (
        "在位置 {position}（{token}），token 向量的长度是 {token_length}，位置向量是 {position_length}，"
        "两者之和是 {sum_length}。"
    ),
    "stage.embed.flow_tokens": "ids，形状 {ids} → 取 wte 的行 → {shape}",
    "stage.embed.flow_positions": "位置 {first}…{last} → 取 wpe 的行 → {shape}",
    "stage.embed.flow_sum": "相加 → x {shape}",
    # -- LayerNorm（ln_1、ln_2、ln_f）-------------------------------------------------------------
    "stage.ln1.text": (
        "进入注意力之前，每个 token 的向量各自做归一化：减去它 {n_embd} 个数的均值，除以它们的标准差，"
        "再用可学习的缩放 γ 和偏置 β 对每一维做缩放和平移（{params} 个参数）。方差除以的是 {n_embd}，"
        "不是 {n_embd_less}；ε = {eps} 保证除法不出问题。这是 GPT-2 的 Pre-Norm 设计：x 本身不变，"
        "注意力读取的是归一化后的副本。"
    ),
    "stage.ln2.text": (
        "进入 MLP 之前，每个 token 的向量各自做归一化：减去它 {n_embd} 个数的均值，除以它们的标准差，"
        "再用可学习的缩放 γ 和偏置 β 对每一维做缩放和平移（{params} 个参数）。方差除以的是 {n_embd}，"
        "不是 {n_embd_less}；ε = {eps} 保证除法不出问题。这是 GPT-2 的 Pre-Norm 设计：x 本身不变，"
        "MLP 读取的是归一化后的副本。"
    ),
    "stage.ln_final.text": (
        "全部 {n_layer} 层都算完之后，每个 token 的向量各自做归一化：减去它 {n_embd} 个数的均值，"
        "除以它们的标准差，再用可学习的缩放 γ 和偏置 β 对每一维做缩放和平移（{params} 个参数）。"
        "方差除以的是 {n_embd}，不是 {n_embd_less}；ε = {eps} 保证除法不出问题。"
        "LM head 读取的就是这份归一化后的副本。"
    ),
    "stage.layer_norm.stats": (
        "在位置 {position}（{token}）：进入时均值 {mean}、标准差 {std}；归一化后是 {normalized_mean} 和 "
        "{normalized_std}；经过 γ 和 β 之后均值 {out_mean}、标准差 {out_std}。"
    ),
    "stage.layer_norm.eps": (
        "归一化后的标准差是 {normalized_std}，不是 1：开平方之前方差（这里是 {var}）要加上 ε = {eps}，"
        "方差很小时这一点就看得出来。"
    ),
    # -- Q、K、V ----------------------------------------------------------------------------------
    "stage.qkv.project": (
        "一次矩阵乘，c_attn [{C} × {C3}] 加上偏置（{params} 个参数），把每个归一化后的 token 向量变成"
        "三个各有 {C} 个数的向量：查询 Q（这个位置想找什么）、键 K（它能凭什么被找到）和值 V"
        "（被找到时交出什么）。GPT-2 把权重存成 [输入 × 输出]，所以计算就是 x @ W + b，不需要转置。"
    ),
    "stage.qkv.heads": (
        "q、k、v 各自被切成 {H} 个头，每个头 {D} 个数（{H} × {D} = {C}）。这些头并排工作，"
        "各用自己的那一份，彼此看不到对方的数。"
    ),
    "stage.qkv.cache": (
        "KV cache 为后面的 token 保存的正是这些键和值：这一层是 2 × {heads} × {positions} × {D} = "
        "{numbers} 个数，{bytes}。查询只用一次，从不缓存。"
    ),
    "stage.qkv.reserve": (
        "KV cache 是预先分配的，这样每一步很少需要再申请内存：这里每一层有 {room} 个位置的空间，共 {reserved}。"
        "生成会一次预留提示词和将要生成的 token；单独的一次前向传播先预留 {chunk} 个位置，不够时再增加。"
    ),
    # 按已缓存的位置数（{n}）选用其一（中文两种写法相同）。
    "stage.qkv.decode.one": (
        "在这次 decode 步中，新位置的 k 和 v（{new}）被追加到 {n} 个已缓存位置的 k 和 v 后面："
        "注意力读取的 K 和 V 是 {all}。"
    ),
    "stage.qkv.decode.other": (
        "在这次 decode 步中，新位置的 k 和 v（{new}）被追加到 {n} 个已缓存位置的 k 和 v 后面："
        "注意力读取的 K 和 V 是 {all}。"
    ),
    "stage.qkv.formula_heads": "q [T, C] → 变形为 [T, H, D] → 转置 → [H, T, D]",
    "stage.qkv.formula_sizes": "T = {positions}，H = {heads}，D = 每个头 {numbers}",
    "stage.qkv.flow_split": "切分 → q, k, v 各为 {shape}",
    "stage.qkv.flow_heads": "分头 → q, k, v 各为 {shape}",
    # -- 注意力分数 -------------------------------------------------------------------------------
    "stage.scores.dot": (
        "头 {head} 把每个查询和每个键逐一比较：两个 {D} 维向量做点积，再除以 √{D} = {root}，"
        "这样分数不会随头的维度变大，后面的 softmax 也不会饱和。"
    ),
    # 按被掩码的格子数选用前两条之一（中文写法相同）；只有一个格子时用第三条。
    "stage.scores.mask.one": (
        "因果掩码把对角线以上的每个格子都设为 −∞（灰色的格子）：位置 i 只能看它自己和前面的位置，"
        "永远看不到后面的位置。这里 {cells} 个格子中有 {masked} 个被掩码。"
    ),
    "stage.scores.mask.other": (
        "因果掩码把对角线以上的每个格子都设为 −∞（灰色的格子）：位置 i 只能看它自己和前面的位置，"
        "永远看不到后面的位置。这里 {cells} 个格子中有 {masked} 个被掩码。"
    ),
    "stage.scores.mask_single": (
        "因果掩码把对角线以上的每个格子都设为 −∞：位置 i 只能看它自己和前面的位置，永远看不到后面的位置。"
        "只有一个位置时只有一个格子，就在对角线上，所以没有格子被掩码。"
    ),
    "stage.scores.decode_mask": (
        "decode 步有 {queries}和 {keys}：{past} 个来自缓存，{new} 个是新的。因果掩码平移了 {cached}"
        "（tril(diagonal={diagonal})）：查询 {diagonal} 可以看到键 0–{diagonal}，也就是所有的键，"
        "所以这里 {cells} 个格子中有 {masked} 个被掩码。"
    ),
    "stage.scores.top": "最后一个查询（{token}）在位置 {position}（{key}）上得分最高：{score}。",
    "stage.scores.formula_mask": "scores[h, i, j] = −∞，若 j > i   （因果掩码）",
    "stage.scores.flow_map": "头 {head} → 下方 {shape} 的图",
    # -- 注意力权重 -------------------------------------------------------------------------------
    "stage.pattern.softmax": (
        "沿每一行做 softmax，把分数变成权重：全部为正，每一行之和为 1，被掩码的未来位置恰好为 0。"
        "第 i 行就是一份配方：位置 i 的输出是位置 0 … i 的值向量的加权和。"
    ),
    "stage.pattern.last": (
        "最后一行属于 {token}，也就是预测下一个 token 的那个位置。在头 {head} 里，它把 {share} 的权重"
        "放在位置 {position}（{key}）上。"
    ),
    "stage.pattern.last_even": (
        "最后一行属于 {token}，也就是预测下一个 token 的那个位置。在头 {head} 里，它把权重大致平均地分给"
        "它能看到的 {positions} 个位置；最多的是位置 {position}（{key}），占 {share}。"
    ),
    # -- 所有注意力头 -------------------------------------------------------------------------------
    "stage.heads.intro": (
        "第 {layer} 层的 {H} 个头并排显示，每个头有自己的注意力权重（越亮，权重越大）。每个头有自己的"
        "查询、键和值切片，学会寻找不同的东西。每张图下方：最后一个 token 最关注的位置。"
    ),
    "stage.heads.focus_single": "最后一个位置（{token}）只能关注它自己：每个头都把全部权重给它。",
    "stage.heads.focus_none": (
        "没有哪个头把最后一个位置（{token}）一半以上的权重给同一个位置：{H} 个头都把它分散开"
        "（平均分配的话，{L} 个位置各得 {uniform}）。"
    ),
    "stage.heads.focus": (
        "最后一个位置（{token}）的权重：{H} 个头中有 {on_self} 个把一半以上给它自己，{on_first} 个给位置 0"
        "（{first}），{elsewhere} 个给另一个位置。"
    ),
    "stage.heads.focus_spread": (
        "最后一个位置（{token}）的权重：{H} 个头中有 {on_self} 个把一半以上给它自己，{on_first} 个给位置 0"
        "（{first}），{elsewhere} 个给另一个位置；其余 {spread} 个头里没有哪个位置得到一半"
        "（平均分配的话，{L} 个位置各得 {uniform}）。"
    ),
    "stage.heads.sink": (
        "位置 0（{first}）在这里并不是答案：没有有用的东西可读的头会把权重放在那里（注意力汇聚点），"
        "这样改变不大。“答案是哪些部分写出来的”界面的第三个标签页显示了每个头的情况。"
    ),
    "stage.heads.formula": "head_h = softmax(q_h k_{kv}ᵀ / √{D} + 掩码) v_{kv}    h = 0 … {last}",
    "stage.heads.flow": "pattern {pattern} → {maps}，每张 {shape}",
    # -- 注意力输出 -------------------------------------------------------------------------------
    "stage.attn_out.mix": (
        "各个头的输出 z 重新并排拼接起来（{H} × {D} = {C}），再由 c_proj [{C} × {C}]（{proj} 个参数）"
        "混合。结果是一个增量，加回残差流。注意力是模型中唯一让信息在位置之间流动的一步。"
    ),
    "stage.attn_out.params": (
        "第 {layer} 层的注意力一共有 {attention} 个参数：c_attn {c_attn} + c_proj {proj}。"
    ),
    "stage.attn_out.lengths": (
        "在位置 {position}（{token}），增量的长度是 {update}，而 x 的长度是 {before}；x + 增量的长度是 {after}。"
    ),
    "stage.attn_out.flow_concat": "z {z} → 拼接各头 → {shape}",
    "stage.attn_out.flow_add": "x + 增量 → x {shape}",
    # -- MLP --------------------------------------------------------------------------------------
    "stage.mlp.widen": (
        "MLP 对每个位置分别计算，所有位置用同一套权重：这里没有信息在位置之间流动。c_fc 把 {C} 个数"
        "扩展到 {F} 个（{c_fc} 个参数），GELU 对其中每一个做非线性变换，c_proj 再把它们压回 {C} 个"
        "（{proj} 个参数）。"
    ),
    "stage.mlp.params": (
        "MLP 有 {mlp} 个参数，是这一层注意力（{attention} 个参数）的 {ratio} 倍。GPT-2 用的是 GELU 的 "
        "tanh 近似形式（{activation}）；精确的 erf 形式算出的数值略有不同。"
    ),
    "stage.mlp.active": "在位置 {position}（{token}），{F} 个神经元中有 {share} 在 GELU 之后为正。",
    "stage.mlp.active_top": (
        "在位置 {position}（{token}），{F} 个神经元中有 {share} 在 GELU 之后为正；"
        "最强的是神经元 {neuron}，值为 {value}。"
    ),
    # -- MLP 输出 ---------------------------------------------------------------------------------
    "stage.mlp.memory": (
        "把 MLP 看成一张键值记忆：每个神经元的键是 W_fc 中它的那一列，用点积和这个位置的向量做匹配；"
        "GELU 过滤匹配的结果；它的值是 W_proj 中它的那一行，神经元激活多强，就按多大的比例加进残差流。"
        "这里，神经元 {neuron} 的键匹配得到 {pre}，GELU 放行了 {value}，它的值最能抬高 {tokens} 的 logit。"
    ),
    "stage.mlp.switched_off.one": (
        "其中 {n} 个在这次前向传播里被关掉了（假设实验）：它激活之后的输出被替换，这里按替换后的值计数，"
        "而直方图显示的是进入激活函数之前的值。"
    ),
    "stage.mlp.switched_off.other": (
        "其中 {n} 个在这次前向传播里被关掉了（假设实验）：它们激活之后的输出被替换，这里按替换后的值计数，"
        "而直方图显示的是进入激活函数之前的值。"
    ),
    "stage.mlp.untrained": (
        "其中 {tokens} 从未出现在这个模型的训练文本里：它们在 wte 中的行从没有针对自己的 token 训练过，"
        "只是和所有这样的行一起朝同一个方向移动，所以一个指向那个方向的值向量会同时抬高它们。"
        "这是训练文本太小造成的现象，不是模型学到的知识。"
    ),
    "stage.mlp_out.done": (
        "MLP 的增量加回残差流，第 {layer} 层就完成了：x 离开时的形状和进来时一样，都是 {shape}。"
    ),
    "stage.mlp_out.params": (
        "第 {layer} 层有 {block} 个参数：注意力 {attention}，MLP {mlp}，两个 LayerNorm {layer_norms}。"
        "全部 {n_layer} 层合计 {blocks} 个，模型总共 {n_params} 个。"
    ),
    "stage.mlp_out.lengths": (
        "在位置 {position}（{token}）：x 进入这一层时长度为 {before}；注意力加上了长度为 {attention} 的增量，"
        "MLP 加上的增量长度为 {mlp}；x 离开时长度为 {after}。"
    ),
    "stage.mlp_out.remaining": "后面还有 {blocks}。",
    "stage.mlp_out.last": "这是最后一层。",
    "stage.mlp_out.flow": "x {x} + 增量 {update} → x {x}",
    # -- LM head ----------------------------------------------------------------------------------
    "stage.lm_head.tying": (
        "LM head 把每个位置的向量乘以 wte 的转置：正是当初把 token 变成向量的那张表（权重共享），"
        "所以它不增加任何参数。结果是词表中每一项都得到一个分数，也就是 logit：每个位置 {vocab} 个，"
        "一共 {total} 个。"
    ),
    "stage.lm_head.last": (
        "只有最后一个位置预测接下来是什么。位置 p 的 logits 是对位置 p+1 上那个 token 的猜测，而对 {last} "
        "之前的每个 p，这个 token 已经在提示词里了。softmax 把最后一行变成概率（先减去最大的 logit，"
        "这样不会溢出）。"
    ),
    "stage.lm_head.only": (
        "只有最后一个位置预测接下来是什么。这里只有一个位置，所以它的 logits 就是预测。softmax 把最后"
        "一行变成概率（先减去最大的 logit，这样不会溢出）。"
    ),
    "stage.lm_head.entropy": (
        "这个分布的熵是 {entropy} nat；在 {vocab} 个 token 上均匀猜测，熵是 ln {vocab_size} = {uniform}。"
    ),
    "stage.untrained": (
        "每个位置的预测都接近均匀分布：熵最低也有 {lowest} nat，而均匀猜测的熵是 {uniform}。"
        "权重随机（未经训练）的模型就是这样预测的，所以这个检查点预测出的 token 没有意义；"
        "不过每一步的计算仍然和画面上显示的完全一致。"
    ),
    "stage.lm_head.quality": (
        "这次运行以 {dtype} 存储权重：{weight_bytes}。在同一个检查点上与 float32 对比，在这个提示词的 "
        "{positions}上：最可能的 token 有 {agree} 个相同（共 {n} 个），最大的 logit 相差 {dlogit}，"
        "两个分布的平均 KL 散度是 {kl} nat。"
    ),
    "stage.lm_head.flow_last": "最后一个位置 → {shape} → softmax",
    # -- logit lens -------------------------------------------------------------------------------
    "stage.logit_lens.intro": (
        "如果模型提前停下，它会回答什么？logit lens 把最后一个位置在每一层之后的残差流送进 ln_f 和 "
        "LM head，就好像那一层是最后一层。它展示了预测是怎样一层一层成形的。"
    ),
    "stage.logit_lens.rank": "最终选出的 {token} 在第 0 层之后排第 {rank} 名（共 {vocab} 个，p = {p}）。",
    "stage.logit_lens.rank_top": (
        "最终选出的 {token} 在第 0 层之后排第 {rank} 名（共 {vocab} 个，p = {p}），"
        "从第 {first} 层起成为排名第一的 token。"
    ),
    "stage.logit_lens.rank_top_last": (
        "最终选出的 {token} 在第 0 层之后排第 {rank} 名（共 {vocab} 个，p = {p}），"
        "直到最后一层（第 {first} 层）之后才成为排名第一的 token。"
    ),
    "stage.logit_lens.rank_top_regained": (
        "最终选出的 {token} 在第 0 层之后排第 {rank} 名（共 {vocab} 个，p = {p}），"
        "在第 {earliest} 层之后第一次排到第一，随后又失去第一名，从第 {first} 层起才一直排第一。"
    ),
    "stage.logit_lens.rank_top_last_regained": (
        "最终选出的 {token} 在第 0 层之后排第 {rank} 名（共 {vocab} 个，p = {p}），"
        "在第 {earliest} 层之后第一次排到第一，随后又失去第一名，直到最后一层（第 {first} 层）之后才重新排第一。"
    ),
    "stage.logit_lens.formula": "lens_l = softmax(ln_f(第 l 层之后的 x)[{last}] @ wteᵀ)    l = 0 … {last_layer}",
    "stage.logit_lens.flow": "每层之后的 x，最后一个位置 {x} → ln_f, @ wteᵀ → {shape}",
    # -- 下一个 token -----------------------------------------------------------------------------
    "stage.next_token.choice": (
        "贪心解码选出概率最高的 token：{token}（id {id}，p = {p}）。接到文本后面，一共是 {total} 个 token。"
    ),
    "stage.next_token.choice_no_p": (
        "贪心解码选出概率最高的 token：{token}（id {id}）。接到文本后面，一共是 {total} 个 token。"
    ),
    "stage.next_token.sampled": (
        "这一步用 {sampling} 采样出它的 token：{token}（id {id}）按这些设置的概率是 p = {p}。"
        "这次前向计算中概率最高的 token 是 {top}（p = {top_p}）。{token} 接到文本后面，一共是 {total} 个 token。"
    ),
    "stage.next_token.sampled_top": (
        "这一步用 {sampling} 采样出它的 token：{token}（id {id}）按这些设置的概率是 p = {p}，"
        "它也正是这次前向计算中概率最高的 token（p = {top_p}）。接到文本后面，一共是 {total} 个 token。"
    ),
    "stage.next_token.formula_sampled": "下一个 token ~ p′（按设置调整后的 p）；这次抽到：{id}",
    "stage.next_token.rerun": (
        "要再写一个 token，模型得再运行一次。没有缓存的话，它要把全部 {total} 个位置重新算一遍；"
        "有了 KV cache，只有新 token 经过各层，每一层读取{cached}，不必重新计算。"
    ),
    "stage.next_token.cache_prefill": (
        "这次 prefill 之后，缓存占 {bytes}，每个 token {per_token} 字节"
        "（2 × {layers} × {heads} × {D} × {value_bytes} 字节）。"
    ),
    "stage.next_token.cache_step": (
        "这一步之后，缓存占 {bytes}，每个 token {per_token} 字节"
        "（2 × {layers} × {heads} × {D} × {value_bytes} 字节）。"
    ),
    "stage.next_token.run_samples": (
        "这是本次前向传播中概率最高的 token。本次运行的生成是采样的（{sampling}）：每个 token 都按设置调整后的"
        "这些概率抽取，所以生成的第一个 token 不一定是 {token}。按 {key} 打开生成视图。"
    ),
    "stage.next_token.reach": (
        "用采样常用的截断来看这个分布有多宽（温度为 1）：top-p 0.9，即按可能性从高到低取 token，"
        "直到概率加起来达到 90%，会保留 {p90} 个 token（top-p 0.5：{p50} 个）；top-k 50 保留了 {k50} 的概率。"
    ),
    "stage.next_token.sample": "用带温度的采样代替 argmax，会得到别的续写。按 {key} 打开生成视图。",
    "stage.next_token.formula": "下一个 token = argmax(p) = {id}",
    "stage.next_token.flow": "ids，形状 {ids} + 下一个 → ids，形状 {more}",
}
