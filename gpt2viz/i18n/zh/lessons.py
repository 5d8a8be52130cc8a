"""引导课程的页面（gpt2viz/lessons/*.toml 里的键）；占位符由 gpt2viz/tui/lesson_facts.py 用本次运行的数字填入。"""

TEXT = {
    "lesson.header": "第 {lesson} 课 · {title} · 第 {page} 页，共 {pages} 页",
    "lesson.keys": "n 下一页 · p 上一页",
    "lesson.keys_guess": "输入猜测并按回车 · 输入框为空时 n 下一页 · p 上一页",
    "lesson.done": "✓ 完成。n：下一页。",
    "lesson.skipped": "已跳过（还没完成就按了 n）。",
    "lesson.finished": "这是本课最后一页。p 返回上一页；i 打开课程菜单。",
    "lesson.replay_note": "（来自保存的 trace：这里的每个数字都取自 trace。）",
    "lesson.guess.exact": "你猜的是 {guess}；本次运行得到的正是这个数。",
    "lesson.guess.close": "你猜的是 {guess}；本次运行得到 {answer}。很接近：误差在 {tolerance} 以内。",
    "lesson.guess.above": "你猜的是 {guess}；本次运行得到 {answer}，是你猜的 {ratio} 倍。",
    "lesson.guess.below": "你猜的是 {guess}；本次运行得到 {answer}：你猜的是它的 {ratio} 倍。",
    "lesson.guess.negative": "这里的猜测是 0 或更大的数：每个答案都是个数、大小、时间或占比。",
    "lesson.guess.off": "你猜的是 {guess}；本次运行得到 {answer}。",
    "lesson.guess.unreadable": "请输入一个数字，例如 85000、85k、1.2M 或 4.5%。",
    "lesson.resumed": "第 {lesson} 课：回到第 {page} 页，共 {pages} 页。",
    "lesson.started": "第 {lesson} 课：{title}。n 和 p 翻页。",
    "lesson.menu.title": "课程",
    "lesson.gpt2_only": (
        "课程讲的是 GPT-2 的故事，用的是它自己的部件（位置编码表、LayerNorm、GELU）：请用 GPT-2 模型打开课程，"
        "比如自带的 tiny。这个模型的各个阶段会展示它和 GPT-2 的不同之处。"
    ),
    "lesson.menu.intro": (
        "每一课用本次运行讲一篇教程的故事：翻页时屏幕会跳到这一页讲的地方，页面引用本次运行的数字，"
        "有些数字会先请你猜，再由应用给出。n 和 p 翻页；课程会从你上次停下的地方继续，在这里按 r 则让选中的课程从头开始。"
    ),
    "lesson.menu.intro_start": (
        "第一次使用？课程会用本次运行带你走一遍这个应用：翻页时屏幕会跳到这一页讲的地方，页面引用本次运行的数字，"
        "有些数字会先请你猜，再由应用给出。n 和 p 翻页；在任何界面按 i 都能再打开这个菜单。"
    ),
    "lesson.menu.item": "第 {lesson} 课：{title}（{progress}）",
    "lesson.menu.new": "共 {pages} 页",
    "lesson.menu.at": "在第 {page} 页，共 {pages} 页，已完成 {done} 个任务，共 {asks} 个",
    "lesson.menu.finished": "已学完，完成 {done} 个任务，共 {asks} 个",
    "lesson.menu.not_now": "以后再说",
    "lesson.menu.never": "以后再说，启动时不再打开这个菜单",
    "lesson.menu.never_note": "启动时不会再打开课程菜单；在任何界面按 i 都能打开它。",
    "lesson.do.next_stage": "操作：按 →（或 l）进入下一阶段。",
    "lesson.do.into_blocks": "操作：按 ] 跳进第 0 层。",
    "lesson.do.next_head": "操作：按 . 显示下一个注意力头。",
    "lesson.do.next_block": "操作：按 ] 查看下一层的同一阶段。",
    "lesson.unavailable.generation": (
        "这个保存的 trace 里没有生成记录，所以这里打不开生成视图：用 --model 启动 gpt2viz"
        "（tiny 离线也能用）来生成，或回放用 --generate 录制的 trace。按 n 继续。"
    ),
    "lesson.do.open_generation": "操作：按 g 打开生成视图（按 esc 回到这里）。",
    "lesson.do.open_cost_lab": "操作：按 m 打开成本实验室（按 esc 回到这里）。",
    "lesson.do.switch_off": "操作：按 x 关掉一个部件：回车选第一项，也就是这个 MLP（按 u 重新打开）。",
    "lesson.edited": "{parts} 已被关掉：本页的数字来自修改后的前向传播（按 {undo} 重新打开）。",
    "lesson.unavailable.what_if": (
        "回放不能再次运行模型，所以无法关掉任何部件：用 --model 启动 gpt2viz（tiny 可离线使用）。"
        "按 n 继续。"
    ),
    "lesson.000.title": "一次前向传播：从模型文件到下一个 token",
    "lesson.000.intro": (
        "这一课跟着 {model} 在你的提示词上走完一次前向传播，和逐步视图的顺序一样：文件里有什么，"
        "文本怎样变成数字，一层做了什么，最后的向量怎样变成下一个 token，以及 KV cache 保存了什么。"
        "每翻一页，屏幕都会跳到这一页讲的阶段。"
    ),
    "lesson.000.files": (
        "一个检查点有三样东西：config.json（尺寸：{n_layer} 层，{n_head} 个头，宽度 {n_embd}，"
        "{vocab} 个 token）、权重（{n_params} 个数，这里以 {dtype} 存储，共 {param_bytes}）和分词器。"
        "所有 GPT-2 的代码都一样，不同的只是这些文件。"
    ),
    "lesson.000.block_guess": (
        "每一层有一个注意力部分（c_attn：宽度到 3 × 宽度，c_proj：宽度到宽度）和一个 MLP"
        "（c_fc：宽度到 {d_mlp}，c_proj：再变回来），每个都带偏置，还有两个 LayerNorm（各有一个缩放 γ 和一个偏置 β）。"
        "宽度是 {n_embd}。"
    ),
    "lesson.000.block_guess.question": "猜一猜：一层有多少个参数？",
    "lesson.000.block_guess.why": (
        "注意力 {attention_params} + MLP {mlp_params} + 两个 LayerNorm 各 {layer_norm_params} = "
        "{block_params}；{n_layer} 层共 {blocks_params}（模型共 {n_params}），词嵌入表 wte 另有 {wte_params}。"
    ),
    "lesson.000.tokenize": (
        "分词器把你的提示词切成了 {T_tokens}：{tokens}。每个 token 是词表（{vocab} 个）里的一个 id；"
        "常见的词是一个 token，少见的词会被切成几段。模型看不到字母，只看到这些 id。"
    ),
    "lesson.000.tokenize.byte_pieces": (
        "分词器把你的提示词切成了 {T_tokens}：{tokens}。每个 token 是词表（{vocab} 个）里的一个 id。"
        "它按字节工作：没有整体学过的字符（大多数汉字都是）会被切成它的 UTF-8 字节片段（显示为 \\xe6 …），"
        "这里有 {byte_pieces} 个这样的片段。模型看不到字母或汉字，只看到这些 id。"
    ),
    "lesson.000.embed": (
        "每个 id 取出词嵌入表 wte 里自己那一行（{vocab} 行，每行 {n_embd} 个数），每个位置再加上 wpe 里"
        "自己那一行（{n_ctx} 行）：输入就是 {T_vectors}，每个有 {n_embd} 个数。从这里开始，模型只往这些向量上做加法：这就是残差流。"
    ),
    "lesson.000.layer_norm": (
        "每一层先把每个位置的向量归一化（ln_1：均值 0、方差 1，再乘上学到的缩放 γ、加上偏置 β），在归一化后的副本上计算，"
        "再把结果加回残差流。GPT-2 在每个部分之前归一化（Pre-Norm），所以残差流本身从不被缩放。"
    ),
    "lesson.000.attention": (
        "注意力让每个位置读取前面的位置：{n_head} 个头各自给每一对位置打分（{T_positions}共 {n_scores}），"
        "未来的位置被掩码，再把分数变成加起来等于 1 的权重。每个头有自己的权重，所以可以关注不同的位置。"
    ),
    "lesson.000.mlp": (
        "接着 MLP 对每个位置单独计算：{n_embd} 个数扩展到 {d_mlp} 个，经过 GELU，再变回 {n_embd} 个。"
        "它占一层参数的 {mlp_share}（{block_params} 里的 {mlp_params}）。每一层的结构都一样，权重各不相同。"
    ),
    "lesson.000.stack": (
        "这是最后一层，第 {last_block} 层：同样的步骤重复 {n_layer} 次，每次都往残差流上加一点。"
        "层与层之间没有别的计算。"
    ),
    "lesson.000.prob_guess": (
        "最后一层之后，ln_f 把最终的向量归一化，LM head 再把每个向量乘以词嵌入表（同一个 wte，权重共享）："
        "词表里每个 token 得到一个分数，叫 logit。模型对下一个 token 的首选是 {next_token}。"
    ),
    "lesson.000.prob_guess.question": "猜一猜：模型给 {next_token} 的概率是多少（百分比）？",
    "lesson.000.prob_guess.why": (
        "softmax 把最后一个位置的 {vocab} 个 logit 变成加起来等于 1 的概率：{next_token} 得到 {next_prob}，"
        "其余的概率分给了其他所有 token。"
    ),
    "lesson.000.logits_guess": (
        "ln_f 之后，LM head 给这次前向传播的每个位置都对词表里的每个 token 打分，而不只是最后一个位置：每个位置每个 token 一个 logit。"
    ),
    "lesson.000.logits_guess.question": "猜一猜：这次前向传播里 LM head 一共算了多少个 logit？",
    "lesson.000.logits_guess.why": (
        "{T_positions} × {vocab} 个 token = {logits}。只有最后一个位置的 logit 用来选下一个 token；"
        "一次 decode 步只算一个位置，也就是 {vocab} 个。"
    ),
    "lesson.000.next_token": (
        "贪心解码选概率最大的 token，即 {next_token}（{next_prob}）；采样则按概率随机抽一个。"
        "生成就是把这个 token 接到后面，再跑一次这样的前向传播，每个新 token 一次。"
    ),
    "lesson.000.kv_guess": (
        "没有缓存，每个新 token 都要把前面每个位置重算一遍。KV cache 保存每一层的键和值：每个位置 {n_layer} 层 × 2（K、V）"
        "× {n_embd} 个数，每个数 {value_bytes} 字节；现在提示词占 {kv_now}。"
    ),
    "lesson.000.kv_guess.question": "猜一猜：再生成 {more} 个 token 之后，KV cache 有多少字节？",
    "lesson.000.kv_guess.why": (
        "{kv_per_position} × {positions_after_more} 个位置（最后一个新 token 还没有运行）= {kv_after_more}，"
        "每个 token 增长同样的量，直到上下文（{n_ctx}）填满。"
    ),
    "lesson.000.end": (
        "这就是完整的一次前向传播。按 g 开始生成：生成视图会给每一步计时，并显示 KV cache 每个 token 增长 {kv_per_position}。"
    ),
    "lesson.001.title": "从零开始：张量、一个 token 和内存墙",
    "lesson.001.intro": (
        "教程 001 亲手写出 GPT-2 的推理：从文件读出权重，在张量上做几种运算，选出一个 token，"
        "再弄清楚每个 token 为什么要花这么多代价。这一课在 {model} 上走同一条路，用的是本次运行的数字。"
    ),
    "lesson.001.safetensors": (
        "model.safetensors 开头是一段 JSON 头，写明每个张量的数值类型、形状和字节位置，后面紧接着就是这些字节。"
        "加载就是读这段头，再把字节当作数字：这里共 {n_params} 个，文件里以 {stored} 存储（{file_bytes}），"
        "载入后以 {dtype} 保存（{param_bytes}）。"
        "最大的张量是 wte，{vocab} 行，每行 {n_embd} 个数。"
    ),
    "lesson.001.safetensors.unrecorded": (
        "model.safetensors 开头是一段 JSON 头，写明每个张量的数值类型、形状和字节位置，后面紧接着就是这些字节。"
        "加载就是读这段头，再把字节当作数字：这里共 {n_params} 个，载入后以 {dtype} 保存（{param_bytes}；"
        "这份较早的 trace 里没有文件的存储格式）。"
        "最大的张量是 wte，{vocab} 行，每行 {n_embd} 个数。"
    ),
    "lesson.001.wte_guess.question": "猜一猜：按 float32（每个数 4 字节）算，wte 占多少字节？",
    "lesson.001.wte_guess.why": "{vocab} × {n_embd} = {wte_params} 个数，× 4 字节 = {wte_float32_bytes}。",
    "lesson.001.tensors": (
        "张量就是带形状的一块数字。你的提示词现在是 {T_token_ids}，一个形状为 [1, {T_dim}] 的张量："
        "一条序列（batch 维）上的 {T_positions}。从这里开始每个阶段都是输入张量、输出张量；"
        "每个阶段的说明下面有一行形状，一路记下这些张量的形状。"
    ),
    "lesson.001.lookup": (
        "第一个运算不做任何乘法：每个 id 取出 wte 中自己的那一行，每个位置取出 wpe 中自己的那一行，"
        "两者相加，得到 [1, {T_dim}, {n_embd_dim}]。取行是查表，不是矩阵乘法，表再大也一样。"
    ),
    "lesson.001.layer_norm": (
        "LayerNorm 是第一个真正做计算的算子：对每个位置，减去它 {n_embd} 个数的均值，"
        "除以它们的方差加上一个很小的 ε 之后的平方根，然后乘以学到的缩放 γ、加上学到的偏置 β。每个位置各自归一化。"
    ),
    "lesson.001.matmul": (
        "重活是矩阵乘法。c_attn 把 [{T_dim}, {n_embd_dim}] 的输入乘以 [{n_embd_dim}, {three_n_embd_dim}] 的权重，"
        "每个输出数 {n_embd} 次乘加，再把结果切成查询 Q、键 K 和值 V：{n_head} 个头，每个 {head_dim} 维。"
    ),
    "lesson.001.matmul.question": "猜一猜：这次前向传播中，第 0 层的 c_attn 要做多少次乘加？",
    "lesson.001.matmul.why": (
        "{T_positions} × {n_embd} 个输入 × {three_n_embd} 个输出 = {qkv_macs} 次乘加，"
        "这还只是一层四个矩阵中的一个。"
    ),
    "lesson.001.softmax": (
        "softmax 把一行分数变成加起来等于 1 的权重：减去这一行的最大值，取 exp，再除以总和。"
        "这里每个查询的一行就是一次 softmax，范围是掩码允许它看到的位置；分数事先除以了 √{head_dim}。"
    ),
    "lesson.001.gelu": (
        "MLP 先把每个位置拓宽到 {d_mlp} 个数（c_fc），用 GELU 弯折（x 很大时接近 x，x 很负时接近 0，"
        "中间平滑过渡），再收窄回 {n_embd} 个数（c_proj）。它占一层参数的 {mlp_share}。"
    ),
    "lesson.001.head": (
        "LM head 乘的就是 wte 本身（权重共享）：每个位置的向量乘以 wte 的转置，给全部 {vocab} 个 token 打分，"
        "得到 [1, {T_dim}, {vocab_dim}]。只有最后一行决定下一个 token。"
    ),
    "lesson.001.head.question": "猜一猜：算出最后一个位置的 {vocab} 个 logit 要多少次乘加？",
    "lesson.001.head.why": "{n_embd} × {vocab} = {head_macs}：词表里每个 token 做一次长度为 {n_embd} 的点积。",
    "lesson.001.sampling": (
        "贪心解码取最高的 logit：{next_token}。采样先把 logit 除以温度，再按 softmax 抽取。"
        "前两位 {first} 和 {second} 的 logit 相差 {logit_gap}：温度为 1 时，前者的可能性是后者的 {ratio_now} 倍。"
    ),
    "lesson.001.temperature.question": "猜一猜：温度为 {temperature} 时，第一位的可能性是第二位的多少倍？",
    "lesson.001.temperature.why": "p₁ / p₂ = exp({logit_gap} / {temperature}) = {temperature_ratio}：温度低于 1 会拉大差距。",
    "lesson.001.nucleus": (
        "还有两种截断让采样避开一长串不太可能的 token。top-k 只从最可能的 k 个里抽：这里前 10 个占了 "
        "{top_k_10_mass} 的概率，前 50 个占 {top_k_50_mass}。top-p（核采样）按可能性从高到低取 token，"
        "直到概率加起来达到 p，不管需要多少个。"
    ),
    "lesson.001.nucleus.unrecorded": (
        "还有两种截断让采样避开一长串不太可能的 token。top-k 只从最可能的 k 个里抽；top-p（核采样）按可能性"
        "从高到低取 token，直到概率加起来达到 p，不管需要多少个。这份 trace 写于 gpt2viz 记录它们保留多少之前："
        "用 --model 运行一次就能看到。"
    ),
    "lesson.001.nucleus.question": "猜一猜：对这个提示词的下一个 token，top-p 0.9 会保留多少个 token？",
    "lesson.001.nucleus.why": (
        "{nucleus_90} 个（top-p 0.5：{nucleus_50} 个；0.95：{nucleus_95} 个）。有把握的模型，核里只有几个 token；"
        "没把握的模型，核里有成千上万个：top-p 随分布而变，top-k 不会。"
    ),
    "lesson.001.generate": (
        "生成就是一遍又一遍地做前向传播：选中的 token 加入输入，模型再预测它后面的那个。"
        "有了 KV cache，每一步只计算新的位置。生成视图会逐个显示 token，并给每一步计时。"
    ),
    "lesson.001.memory_wall": (
        "每个新 token 都要把所有权重乘法做一遍：{step_macs} 次乘加，用到 {step_weight_bytes} 的权重，"
        "每个权重从内存读出只做一次乘加。"
    ),
    "lesson.001.memory_wall.question": "猜一猜：一个 decode 步中，每读一个字节的权重要做多少次乘加？",
    "lesson.001.memory_wall.why": (
        "{step_macs} ÷ {step_weight_bytes} = 每字节 {macs_per_byte} 次：每个权重一次乘加，这里一个权重平均占 "
        "{bytes_per_mac} B（float32 是 4 B，模型文件阶段列出的更小副本会少一些）。内存送来一个字节的时间里，"
        "一个 CPU 核心能做许多次乘加：大模型的解码是在等内存（内存墙）。"
    ),
    "lesson.001.measure": (
        "成本实验室在这台机器上实测这一课算出的结论：解码一步的时间怎样随上下文增长（有 KV cache 和没有），"
        "以及各种数值格式（bfloat16、float16、int8，大多数权重占的字节更少）和 float32 相比如何。"
        "它还会说出这里的一步是在等内存，还是在等每一步都要做的固定开销（Python、调度每个运算）：小模型等后者的时间可能比读字节还多。"
    ),
    "lesson.001.end": (
        "这就是教程 001 走过的路：一个装满数字的文件，张量上的几个算子，选出一个 token，"
        "以及模型足够大时由每个 token 要读的字节决定的代价（更小的模型由每一步的固定开销决定）。第 003 课会细看因果掩码、Pre-Norm 和 KV cache。"
    ),
    "lesson.003.title": "因果掩码、Pre-Norm 与 KV cache",
    "lesson.003.intro": (
        "有三样东西让 GPT-2 能一个 token 接一个 token 地写：因果掩码（任何位置都看不到未来）、"
        "每个部分之前的 LayerNorm（Pre-Norm），以及保存前面位置计算结果的 KV cache。"
        "这一课在 {model} 对 {T_tokens} 的这次运行里逐一找到它们。"
    ),
    "lesson.003.scores": (
        "这一步为每个位置算出查询 Q、键 K 和值 V。下一步是分数：每个位置的查询和每个位置的键相乘，"
        "再除以头维度（{head_dim}）的平方根。"
        "一个头得到一张 {T} × {T} 的表，共 {n_scores}：每个位置的查询对每个位置的键。"
    ),
    "lesson.003.mask_guess": (
        "在 softmax 之前，因果掩码把每个更靠后位置的分数设为负无穷：第 i 行只保留位置 0 到 i。"
        "这样模型就用不到它还没生成的 token。"
    ),
    "lesson.003.mask_guess.question": "猜一猜：这里一个头有 {T} × {T} = {scores} 个分数，掩码去掉了多少个？",
    "lesson.003.mask_guess.why": (
        "第 i 行去掉它后面的 {T} − (i + 1) 个位置：{masked_sum} = {masked_scores}（共 {scores} 个），"
        "保留 {kept_scores} 个。token 多了以后，差不多是一半。"
    ),
    "lesson.003.masked": "“分数”阶段展示这张表，被掩码的格子都做了标记，并给出它们的数目。",
    "lesson.003.pattern": (
        "softmax 之后，被掩码的格子正好是 0，每一行的和仍然是 1：注意力权重的右上三角是空的。"
        "每一层的每个注意力头都有同样的空三角。"
    ),
    "lesson.003.pre_norm": (
        "GPT-2 归一化的是每个部分的输入，而不是输出：x + attn(ln_1(x))，然后 x + mlp(ln_2(x))。"
        "最初的 Transformer（以及 BERT）是在相加之后归一化（Post-Norm）。Pre-Norm 保留了一条"
        "从输入到输出、不被任何缩放的通路，深层网络因此能训练。"
    ),
    "lesson.003.residual": (
        "这里注意力的输出被加回它读取的残差流。相加的结果不做归一化：残差流原样继续，"
        "只有 MLP 读取的那份副本由 ln_2 归一化。"
    ),
    "lesson.003.final_norm": (
        "因为没有哪一层归一化残差流本身，前向传播最后在 LM head 之前多做一次 LayerNorm，即 ln_f："
        "这是残差流整体被归一化的唯一地方。"
    ),
    "lesson.003.recompute_guess": (
        "要写一个 token，模型跑一次前向传播，取最后一个位置的预测。没有缓存时，下一个 token 需要对提示词"
        "和新 token 跑一遍，再下一个要跑长一个位置的一遍，依此类推。"
    ),
    "lesson.003.recompute_guess.question": (
        "猜一猜：没有缓存时，在这 {T} 个 token 的提示词后面写 {more} 个 token，所有前向传播一共要计算多少个位置？"
    ),
    "lesson.003.recompute_guess.why": (
        "{T} + ({T} + 1) + … + ({T} + {more_minus_1}) = {naive_positions} 个位置。有 KV cache 时，提示词只算一次，"
        "每个新 token 也只算一次：{cached_positions} 个，只有前者的 1/{cache_saving}。"
    ),
    "lesson.003.kv_keeps": (
        "缓存之所以可行，靠的正是掩码：一个位置的键和值只取决于它自己和它之前的位置，"
        "后来的 token 永远不会改变它们。每一层为每个位置保存自己的 K 和 V。"
    ),
    "lesson.003.position_guess": (
        "每一层为每个位置保存它的键 K 和值 V：{n_head} 个头，每个头 {head_dim} 个数，每个数 {value_bytes} 字节（{compute_dtype}）。"
    ),
    "lesson.003.position_guess.question": "猜一猜：缓存在多少个位置之后超过 1 MiB（1,048,576 B）？",
    "lesson.003.position_guess.why": (
        "{n_layer} × 2 × {n_head} × {head_dim} × {value_bytes} B = 每个位置 {kv_per_position}："
        "从第 {positions_for_mib} 个位置起超过 1 MiB（上下文能放 {n_ctx} 个）。"
    ),
    "lesson.003.memory_guess": (
        "每个位置让缓存增加 {kv_per_position}：{n_layer} 层 × K 和 V × {n_embd} 个数 × {value_bytes} 字节。"
    ),
    "lesson.003.memory_guess.question": "猜一猜：上下文（{n_ctx} 个位置）填满时，缓存有多少字节？",
    "lesson.003.memory_guess.why": (
        "{kv_per_position} × {n_ctx} = {kv_full}，这只是一个序列；一批里的每个序列都要这么多。"
        "从 {batch_outweighs} 个填满上下文的序列起，缓存就比权重（{param_bytes}）还大。"
    ),
    "lesson.003.end": (
        "按 g 开始生成：每一步让一个位置对着缓存穿过所有层，选出 token 后立刻显示，缓存增长 {kv_per_position}。"
    ),
    # 第 004 课：一个提示词走完整条管线（教程 004）。
    "lesson.004.title": "一个提示词走完整条管线，以及一个新 token 的代价",
    "lesson.004.intro": (
        "教程 004 追踪 \"The capital of France is\" 穿过 GPT-2 small，直到得出 '␣Paris'。本课用同样的方式，"
        "让你的提示词穿过 {model}：文本变成 id，id 变成向量，{n_layer} 层注意力和 MLP 写入同一条残差流，"
        "然后是 LM head，以及每个新 token 的代价。学到了地理知识的模型（从 Hugging Face Hub 下载的 GPT-2 small）"
        "在 \"The capital of France is\" 之后把 '␣Paris' 排在第一，远远领先其余的；内置的 tiny 模型只学过莎士比亚，所以在它上面，"
        "这些页面用它自己的数字展示机制，而不是知识。"
    ),
    "lesson.004.tokens": (
        "分词在模型之前、在 CPU 上完成：字节对编码（BPE，它的合并规则在制作分词器时一次学好）把文本切成 {T_pieces}，"
        "每段都是 {vocab} 个 token 的词表中的一项，并给出各自的 id：{tokens}。"
    ),
    "lesson.004.embed": (
        "接下来，每个 id 取出 wte 中自己的一行，每个位置取出 wpe 中自己的一行，两者相加：这是从内存中收集（gather），"
        "不是矩阵乘法。提示词将变成 [1, {T_dim}, {n_embd_dim}]，每个数 {value_bytes} 字节。"
    ),
    "lesson.004.embed.question": "猜一猜：这个张量占多少字节？",
    "lesson.004.embed.why": (
        "{T} × {n_embd} 个数 × {value_bytes} 字节 = {embedded_bytes}，而将要处理它们的权重占 {param_bytes}。"
    ),
    "lesson.004.gather": (
        "“嵌入”阶段逐行展示这个张量：它就是残差流，之后每一层都会读取它并往上加。"
    ),
    "lesson.004.routing": (
        "注意力就是路由：每个位置的查询与它自己以及之前每个位置的键比较，得分除以 √{head_dim}，"
        "未来的位置被掩码，softmax 把每一行变成权重。最后一行就是最后一个 token 读取什么、从哪里读取；"
        "在教程的 \"The capital of France is\" 里，'is' 就是这样汇集 'capital' 和 'France' 的。"
        "每个头都有自己的路由方式。"
    ),
    "lesson.004.heads": (
        "一层有 {n_head} 个头，每个头 {head_dim} 个数：每个头都有自己的查询、键、值投影，"
        "大小为 {n_embd} × {head_dim}；{n_head} 个头的输出并排拼回 {n_embd} 个数，再由 c_proj 混合。"
    ),
    "lesson.004.memory": (
        "接下来是 MLP。它对每个位置单独处理，像一个键值记忆：向量与 {d_mlp} 个键匹配，GELU 让匹配的通过，"
        "匹配上的值再被加到残差流上。"
    ),
    "lesson.004.memory.question": "猜一猜：一层的参数中有百分之多少在 MLP 里？",
    "lesson.004.memory.why": (
        "这一层的 {block_params} 个参数中，MLP 占 {mlp_params} 个，即 {mlp_share}；注意力占 {attention_params} 个。"
        "模型存储的大部分内容都在 MLP 里。"
    ),
    "lesson.004.keys": (
        "就在这里：c_fc 保存 {d_mlp} 个键（它的列），GELU 保留正的匹配、几乎压住其余的，c_proj 保存值，"
        "每个键对应一行 {n_embd} 个数。"
    ),
    "lesson.004.switch_off": (
        "记忆被拿走时才显出它存了什么：关掉这个 MLP，前向传播会在没有它的情况下重新运行；"
        "之后“下一个 token”和 logit lens 阶段会显示关掉前后的预测。"
    ),
    "lesson.004.residual": (
        "注意力和 MLP 都不替换向量：它们各自算出一个增量，加到残差流上，这条流从嵌入一直通到 LM head。"
        "每一层都读取这条流并往上加；没有什么被覆盖掉，不过后面的增量可能与已有的方向相反，使它变短。"
    ),
    "lesson.004.layers": (
        "logit lens 把每一层之后的残差流当作最后一层来读：预测是一层一层形成的。在训练好的模型里，"
        "前面的层往往处理语法和局部绑定，中间的层处理语义，最后的层让答案更加清晰。"
    ),
    "lesson.004.head": (
        "只有最后一个位置看过整个提示词，所以只有它的向量决定下一个 token：[{n_embd_dim}] 乘以 LM head "
        "[{n_embd_dim}, {vocab_dim}]，共 {head_macs} 次乘加，为词表中每个 token 得出一个 logit。"
    ),
    "lesson.004.answer": (
        "softmax 把 logits 变成概率：{model} 把 {next_token} 排在第一，概率为 {next_prob}。"
        "在 \"The capital of France is\" 之后，GPT-2 small 把 '␣Paris' 排在那里；模型把权重认为最可能的"
        "排在第一，没有别的规则在做决定。"
    ),
    "lesson.004.autoregressive": (
        "一次前向传播只得出一个 token。要写更多，就把这个 token 接到末尾再运行一次：N 个新 token 就是 N 次前向传播，"
        "一次接一次，前一次没结束，后一次就不能开始。"
    ),
    "lesson.004.cache": (
        "KV cache 保存每一层的键和值（K 和 V），所以新 token 只需算出自己的，其余的直接读取：这里每个 token "
        "{kv_per_position}，提示词占 {kv_now}，用内存换掉之前每个位置的重复计算。"
    ),
    "lesson.004.intensity": (
        "一个 decode 步对 {step_weight_bytes} 的权重做 {step_macs} 次乘加，每字节 {macs_per_byte} 次。"
        "提示词的那次前向传播只读取它们一次，就处理了全部 {T_positions}。"
    ),
    "lesson.004.intensity.question": "猜一猜：提示词的那次前向传播，每字节权重做了多少次乘加？",
    "lesson.004.intensity.why": (
        "{T} × {step_macs} = {prefill_macs}，读取的字节不变：每字节 {prefill_macs_per_byte} 次，"
        "是一步的 {T} 倍。输出 token 只为一个位置就要读取全部权重：所以输出一个 token 比处理提示词里的一个 token 更费时间。"
    ),
    "lesson.004.batching": (
        "批处理让这次读取被共享：一起解码的多个序列，每一步对每个权重只读一次，供所有序列使用。"
        "成本实验室会在这台机器上为它计时。"
    ),
    "lesson.004.end": (
        "这就是整条管线：id、向量、{n_layer} 层写入同一条流、每个 token 一个 logit，以及每个新 token "
        "一次前向传播，每次都要读取 {step_weight_bytes} 的权重。"
    ),
    # On a screen a page sent the learner to (LessonNote).
    "lesson.note": "第 {lesson} 课，第 {page} 页，共 {pages} 页：{look}按 esc 回到课程。",
    "lesson.001.generate.look": "每个 token 一选出就会显示，成本面板给每一步计时，KV 面板每个 token 增长 {kv_per_position}。",
    "lesson.001.measure.look": (
        "按 r 运行当前显示的实验：“上下文长度”标签页测量在每个位置上生成一个新 token 的耗时，"
        "用 KV cache 和不用各一次；按 3 看数值格式。"
    ),
    "lesson.004.autoregressive.look": "文本每次前向传播增长一个 token，每次都有自己的耗时，KV 面板每个 token 增长 {kv_per_position}。",
    "lesson.004.batching.look": "按 2 打开“批大小”标签页，再按 r：一个逐渐变大的批次的一步，与单个序列的一步比较。",
    # A guess at what the cost lab measures on this machine.
    "lesson.004.batching.question": "猜一猜：在这台机器上，{batch} 个序列的一个 decode 步，耗时是单个序列一步的多少倍？",
    "lesson.004.batching.why": (
        "成本实验室在 {batch_context} 个缓存位置上为一步计时：单个序列 {batch1_ms}，{batch} 个序列 {batch_ms}，"
        "是 {batch_step_ratio} 倍的时间换来 {batch} 倍的 token，所以每秒的 token 是 {batch_tokens_gain} 倍。"
        "无论哪种情况，每一步都只读取一次权重。"
    ),
    "lesson.guess.pending": "你的猜测 {guess} 已保留：成本实验室会在这台机器上测量答案，你回来时答案会显示在这里。",
    "lesson.guess.pending_replay": (
        "你的猜测 {guess} 已保留，但回放无法测量：用 --model 启动 gpt2viz（tiny 可离线使用）"
        "再来比较。"
    ),
    "lesson.guess.busy": (
        "成本实验室测量时，其他进程占用了 {share} 的 CPU，所以下面的答案有一部分是它们造成的，"
        "不完全代表这台机器本身：等机器空闲时再运行一次，结果才可靠。"
    ),
}
