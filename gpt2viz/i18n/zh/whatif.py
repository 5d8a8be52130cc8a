"""如果……会怎样：学习者在逐步讲解中关掉的模型部件，以及预测因此发生的变化。"""

TEXT = {
    "whatif.edited": (
        "这次前向传播被修改过：关掉了 {parts}。这里显示的预测不是模型自己的答案；"
        "按 {undo} 撤销上一次修改，按 {clear} 全部清除。"
    ),
    "whatif.mean": "标了 :mean 的部件不是置零：它的输出被换成它在提示词各位置上的平均值。",
    "whatif.dropped": "模型自己的前几名里、掉出了修改后前 {k} 名的 token：",
    "whatif.changed": (
        "修改前 → 修改后：原来概率最高的 token 是 '{before}'（{before_p}）；修改后变成 '{after}'（{after_p}）。"
    ),
    "whatif.same": (
        "修改前 → 修改后：'{token}' 仍是概率最高的 token，修改前 {before_p}，修改后 {after_p}。"
    ),
}
