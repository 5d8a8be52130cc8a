"""如果……会怎样：学习者在逐步讲解中关掉的模型部件，以及预测因此发生的变化。"""

TEXT = {
    "whatif.edited": (
        "这次前向传播被修改过：关掉了 {parts}。下面的预测不是模型自己的答案；"
        "按 {undo} 撤销上一次修改，按 {clear} 全部清除。"
    ),
    "whatif.changed": (
        "修改前 → 修改后：原来概率最高的 token 是 '{before}'（{before_p}）；修改后变成 '{after}'（{after_p}）。"
    ),
    "whatif.same": (
        "修改前 → 修改后：'{token}' 仍是概率最高的 token，修改前 {before_p}，修改后 {after_p}。"
    ),
}
