"""一段里的整句如何相连（`gpt2viz.i18n.sentences`）：与 ../en/sentences.py 的键相同。"""

TEXT = {
    # 中文句号是全角的，后面不加空格。
    "sentences.gap": "",
}
