"""“模型文件”阶段：检查点的文件里有什么，按加载器看到的样子
（gpt2viz/tui/model_files_narration.py 决定用哪些段落，并格式化好每个数字）。"""

TEXT = {
    "stage.model_files.lead": (
        "在模型读入第一个 token 之前，gpt2viz 先从 {directory} 加载三类文件：config.json 给出各项尺寸，"
        "{weights} 以命名张量的形式存放权重，{tokenizer} 负责把文本转成 token id，也把 id 解码回文本。"
    ),
    "stage.model_files.lead_replay": (
        "录制这份 trace 时，在模型读入第一个 token 之前，gpt2viz 从 {directory} 加载了三类文件：config.json "
        "给出各项尺寸，{weights} 以命名张量的形式存放权重，{tokenizer} 负责把文本转成 token id，也把 id 解码回文本。"
        "下面是那次运行在这些文件里看到的内容。"
    ),
    "stage.model_files.lead_unrecorded": (
        "在模型读入第一个 token 之前，gpt2viz 先从 {directory} 加载三类文件：config.json 给出各项尺寸，"
        "model.safetensors 以命名张量的形式存放权重，分词器负责把文本转成 token id，也把 id 解码回文本。"
    ),
    "stage.model_files.config": (
        "config.json 里只有尺寸，没有权重：{n_layer} 层，每层 {n_head} 个注意力头，向量宽 {n_embd}，"
        "上下文 {n_ctx} 个位置，词表 {vocab} 个 token。每个张量的形状都由这些数字决定；gpt2viz "
        "在读入任何一个权重字节之前，先逐个核对张量的形状。"
    ),
    # 按 safetensors 文件数（{n}）选用其一。
    "stage.model_files.weights.one": (
        "{files} 开头的 8 个字节给出 JSON 文件头的长度，接着是这段 {header} 的文件头，写明每个张量的名字、数值类型和形状；后面是它们的数值，"
        "一个张量接一个张量：{tensors}，共 {data}，也就是这个模型的 {n_params} 个参数。"
    ),
    "stage.model_files.weights.other": (
        "这 {n} 个文件 {files} 各自以 8 个字节的长度开头，接着是 JSON 文件头（合计 {header}），写明每个张量的名字、数值类型"
        "和形状；后面是它们的数值，一个张量接一个张量：{tensors}，共 {data}，也就是这个模型的 "
        "{n_params} 个参数。"
    ),
    # 模型的权重是怎样到手的：选用其一。
    "stage.model_files.in_place": (
        "{file} 被映射到内存，模型就地使用全部 {n} 个张量：文件里存的是 {stored}，"
        "计算用 {dtype}，一个也没有复制。内存里的权重就是文件本身的内存页。"
    ),
    "stage.model_files.copied": (
        "{file} 被映射到内存，加载器把每个张量都复制并转换成 {device} 上的 {dtype}"
        "（文件里存的是 {stored}）：模型自己持有 {weight_bytes}。"
    ),
    "stage.model_files.read_as_is": (
        "gpt2viz 把 {file} 逐个张量读入自己的内存，模型按读入的样子使用全部 {n} 个张量：文件里存的是 {stored}，"
        "计算用 {dtype}。它读取文件而不是映射文件，所以即使 gpt2viz 运行时有程序改写这个检查点"
        "（比如训练循环覆盖保存），权重也不会被抽走。"
    ),
    "stage.model_files.read_converted": (
        "gpt2viz 把 {file} 读入内存，并把每个张量都转换成 {device} 上的 {dtype}"
        "（文件里存的是 {stored}）：模型自己持有 {weight_bytes}。"
    ),
    "stage.model_files.partly": (
        "{file} 被映射到内存；{n} 个张量中，模型就地使用 {in_place} 个，"
        "其余的复制并转换成 {device} 上的 {dtype}。"
    ),
    "stage.model_files.read": (
        "{file} 被读入内存；{n} 个张量中，模型按读入的样子使用 {in_place} 个，"
        "其余的复制并转换成 {device} 上的 {dtype}。"
    ),
    # Where the model holds more than its parameters take in its format (bfloat16, float16, int8).
    "stage.model_files.extra_float16_head": (
        "这比它的 {n_params} 个参数以 {dtype} 存储所需的 {plain} 多出 {extra}：词嵌入表里的每个数都是 float16 数，"
        "所以 LM head 乘的是词嵌入表的 float16 副本。副本采用 fbgemm 的打包布局，每块都填充到超过一行的 {n_embd} 个数，"
        "所以它占的空间比 float32 的词嵌入表本身还大：副本就是上面多出的 {extra}，词嵌入表是 {table}。"
        "一步只读取其中真正的数，每个两字节（{half}），"
        "是 float32 词嵌入表字节数的一半。一次 decode 步总共读取其中的 {step}。"
    ),
    "stage.model_files.extra_head_copy": (
        "这比它的 {n_params} 个参数以 {dtype} 存储所需的 {plain} 多出 {extra}：本机上做矩阵乘的内核为了读得更快，"
        "为 LM head 保存了一份打包的词嵌入表副本，还可能把其他矩阵打包并加上填充，把它们的偏置保存为 float32。"
        "一次 decode 步读取其中的 {step}。"
    ),
    "stage.model_files.extra_packed": (
        "这比它的 {n_params} 个参数以 {dtype} 存储所需的 {plain} 多出 {extra}：本机上做矩阵乘的内核为了读得更快，"
        "把一些矩阵打包并加上填充，把它们的偏置保存为 float32。一次 decode 步读取其中的 {step}。"
    ),
    "stage.model_files.extra_int8": (
        "这比它的 {n_params} 个参数每个占一个字节所需的 {plain} 多出 {extra}：每一行 int8 数都有一个 float32 "
        "缩放系数，内核为了读得更快会保存打包的副本，还有一些权重保持 float32。一次 decode 步读取其中的 {step}。"
    ),
    "stage.model_files.kernels": (
        "每个权重怎么乘，是 gpt2viz 在运行本次的机器（{cpu}）上第一次加载这些形状的权重时实测决定并保存下来的（存在缓存里；只有当时机器繁忙才会重新测量）：要么按 BLAS 的方式算成一次乘法，要么把权重拆成两半，每半用一个核。"
    ),
    "stage.model_files.kernels_float16": (
        "每个权重怎么乘，是 gpt2viz 在运行本次的机器（{cpu}）上第一次加载这些形状的权重时实测决定并保存下来的（存在缓存里；只有当时机器繁忙才会重新测量）：按 BLAS 的方式算成一次乘法，把权重拆成两半、每半用一个核，或者（LM head 的词嵌入表里只有 float16 数）让 fbgemm 乘词嵌入表的 float16 副本。"
    ),
    "stage.model_files.kernel.faster": "• {layers}（{shape}）：拆成两半，{split} 微秒，一次乘法要 {plain} 微秒（输入一行时）。",
    "stage.model_files.kernel.slower": "• {layers}（{shape}）：一次乘法，{plain} 微秒，拆成两半要 {split} 微秒（输入一行时）。",
    "stage.model_files.kernel.other_digits": (
        "• {layers}（{shape}）：一次乘法；拆成两半时这台 CPU 的 BLAS 相加的顺序不同，最后几位数字会变。"
    ),
    "stage.model_files.kernel.partial_sums": (
        "• {layers}（{shape}）：把权重的行拆成两半，每个核各算一个部分和，再相加：{partial} 微秒，一次乘法要 "
        "{plain} 微秒（输入一行时）。"
    ),
    "stage.model_files.kernel.float16_held": (
        "• {layers}（{shape}）：词嵌入表里的每个数都是 float16 数（按 float16 存储的检查点就是这样），所以 float16 副本能精确保存它，"
        "fbgemm 乘这个副本，用 float32 相加：{held} 微秒，一次乘法要 {plain} 微秒（输入一行时）。要读的字节减半；"
        "每个输出的各项不变，只是相加的顺序不同，所以最后几位可能会变。"
    ),
    "stage.model_files.kernels_partial_sums": (
        "部分和相加的顺序和一次乘法不同，每个输出的最后几位会变；所以只在这台 CPU 的 BLAS "
        "单算一行和在预填充的多行里一起算、最后几位本来就不同的地方才用。"
    ),
    "stage.model_files.kernel.odd_width": "• {layers}（{shape}）：一次乘法；拆开的两半不是完整的 SIMD 向量。",
    "stage.model_files.kernel.one_thread": "• {layers}（{shape}）：一次乘法；只有一个线程，没法拆。",
    "stage.model_files.kernel.set_split": "• {layers}（{shape}）：拆成两半，由 GPT2VIZ_KERNELS 指定。",
    "stage.model_files.kernel.set_plain": "• {layers}（{shape}）：一次乘法，由 GPT2VIZ_KERNELS 指定。",
    "stage.model_files.kernels_batch": (
        "同时解码多个序列的一步，改为乘以权重的打包副本（oneDNN 的布局，在第一次这样的步骤时做好）："
        "BLAS 每做一次多行的乘法，都会把每个权重重新打包一遍。"
    ),
    "stage.model_files.format_kernels": (
        "{dtype} 下每个权重用哪个内核，是 gpt2viz 在运行本次的机器（{cpu}）上第一次以 {dtype} 加载这些形状的权重时选定并保存下来的：在能精确保存权重、并且不管一次乘法有几行都给每一行相同数字的内核里，选输入一行（解码一步的乘法）时最快的。"
    ),
    "stage.model_files.format_kernels_int8": (
        "int8 下每次乘法都由 fbgemm 乘 8 位权重；每个位置的输入量化得多细，取决于运行本次的机器（{cpu}）："
    ),
    "stage.model_files.format_kernel.fastest": "• {layers}（{shape}）：{kernel}，在这台机器上输入一行时最快（{timings}）。",
    "stage.model_files.format_kernel.timing": "{kernel} {us} 微秒",
    "stage.model_files.format_kernel.only_kernel": "• {layers}（{shape}）：{kernel}，这里唯一能逐行精确保存这个权重的内核。",
    "stage.model_files.format_kernel.only_plain": (
        "• {layers}（{shape}）：{kernel}，这里唯一能保存这个权重的内核（一行结果的最后几位可能随同一次乘法的行数而变）。"
    ),
    "stage.model_files.format_kernel.set": "• {layers}（{shape}）：{kernel}，第一个能保存它的内核，由 GPT2VIZ_KERNELS 指定（没有计时）。",
    "stage.model_files.format_kernel.8_bit_inputs": (
        "• {layers}（{shape}）：输入量化为 8 位；这台 CPU 把 8 位乘积直接加进 32 位的和（VNNI）。"
    ),
    "stage.model_files.format_kernel.7_bit_inputs": (
        "• {layers}（{shape}）：输入量化为 7 位；没有 VNNI 时，fbgemm 先把两个乘积加进会饱和的 16 位和，8 位输入会溢出。"
    ),
    "stage.model_files.kernel_name.fbgemm_float16": "fbgemm 的 float16 权重乘法",
    "stage.model_files.kernel_name.onednn_packed": "oneDNN 的打包权重",
    "stage.model_files.kernel_name.plain_16_bit": "普通的 16 位乘法",
    "stage.model_files.kernel_name.fbgemm_int8": "fbgemm 的 int8 乘法",
    "stage.model_files.kernels_busy": (
        "计时的时候其他程序占着 CPU：这些时间不只是内核本身的，机器空闲后 gpt2viz 会重新计时。"
    ),
    "stage.model_files.tied": (
        "文件里没有单独的 LM head：GPT-2 直接用 wte 给下一个 token 打分（权重共享），"
        "所以 wte 的 {wte} 个数用了两次：一次查表，一次打分。"
    ),
    "stage.model_files.stored_head": (
        "文件里还存了 lm_head.weight，它是 wte 的一份副本：gpt2viz 核对两者完全相同后只保留 wte，"
        "让它用两次（权重共享）。"
    ),
    # 按文件里存的掩码缓冲区数（{n}）选用其一（中文两种写法相同）。
    "stage.model_files.buffers.one": (
        "其中 {n} 个张量是旧版 transformers 随权重一起保存的因果掩码：不是权重，从不读取。"
    ),
    "stage.model_files.buffers.other": (
        "其中 {n} 个张量是旧版 transformers 随权重一起保存的因果掩码：不是权重，从不读取。"
    ),
    "stage.model_files.tokenizer": (
        "分词器（{model}）共有 {vocab} 个 token：起步的 {base} 个（对 GPT-2 来说就是 256 个字节值），"
        "从文本中学到的 {merges} 条合并规则（每条把一对常见的相邻片段合成一个更长的 token），以及 {added}。"
    ),
    "stage.model_files.tokenizer_more": (
        "分词器（{model}）共有 {vocab} 个 token：起步的 {base} 个（256 个字节值，外加 {others} 个不由任何合并规则产生的 token），"
        "从文本中学到的 {merges} 条合并规则（每条把一对常见的相邻片段合成一个更长的 token），以及 {added}。"
    ),
    "stage.model_files.tokenizer_plain": "分词器（{model}）共有 {vocab} 个 token，其中有 {added}。",
    "stage.model_files.special": "特殊 token 从不被切开或合并：{tokens}。",
    "stage.model_files.unrecorded": (
        "这份 trace 录制时，gpt2viz 还没有保存这些文件的内容，所以下面只有 trace 配置里的尺寸。"
        "重新录制一次，就能看到张量和分词器。"
    ),
    "stage.model_files.formula": (
        "参数量 = wte + wpe + n_layer × 每层 + ln_f\n"
        "= {wte} + {wpe} + {n_layer} × {block} + {ln_f} = {total}"
    ),
    "stage.model_files.flow_config": "config.json，{bytes} → 各项尺寸",
    "stage.model_files.flow_config_unrecorded": "trace 的配置 → 各项尺寸",
    "stage.model_files.flow_weights": "{files}，{bytes} → {tensors} → {device} 上的 {dtype} 权重",
    "stage.model_files.flow_tokenizer": "{files}，{bytes} → {vocab} 个 token",
}
