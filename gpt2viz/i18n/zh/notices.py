"""Notices in Simplified Chinese: the same keys and placeholders as ../en/notices.py."""

TEXT = {
    "notice.hub_unreachable": (
        "无法连接 Hugging Face hub，所以这次运行的是随附的小模型 'tiny'（由 gpt2viz 训练，不是 GPT-2 的权重）；"
        "要用真正的 GPT-2，请在联网时加载一次模型 'gpt2'（需下载 548 MB）"
    ),
    "notice.non_finite_weights": "警告：张量 {tensor} 含有 NaN 或无穷大的值，输出将毫无意义",
    "notice.prompt_empty": "提示词为空，所以模型从 <|endoftext|>（id {eos_id}）开始",
    "notice.prompt_cut": "提示词有 {tokens} 个 token；上下文只放得下最后 {n_ctx} 个，只用这些",
    "notice.generation_cut": (
        "上下文最多容纳 {n_ctx} 个 token，提示词已占 {prompt_tokens} 个，"
        "所以只生成了 {made} 个新 token 就停止了（要求 {asked} 个）"
    ),
}
