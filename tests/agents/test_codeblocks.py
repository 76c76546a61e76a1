import pytest

from maxkernel_agents.codeblocks import NoUsableCode, extract_json, extract_module

MODULE = "import jax\n\ndef computation(x):\n    return x\n"


def test_single_fenced_block_with_prose_around():
    text = f"Here is the kernel.\n\n```python\n{MODULE}```\n\nIt tiles rows by 32."
    assert extract_module(text) == MODULE


def test_several_blocks_take_the_last_that_defines_computation():
    helper = "def helper():\n    return 1\n"
    final = MODULE.replace("return x", "return x * 1")
    text = f"```python\n{MODULE}```\nthen a helper\n```python\n{helper}```\nfinal:\n```py\n{final}```\nand a shell line\n```bash\nls\n```"
    assert extract_module(text) == final


def test_bare_module_without_fences():
    assert extract_module(MODULE) == MODULE


def test_no_code_is_an_error_with_a_reason():
    with pytest.raises(NoUsableCode, match="no code block"):
        extract_module("I would tile the matmul in 512 blocks.")
    with pytest.raises(NoUsableCode, match="none of the reply's 1 code block"):
        extract_module("```python\ndef other():\n    pass\n```")


def test_truncated_reply_is_an_error_not_half_a_module():
    with pytest.raises(NoUsableCode, match="cut off inside its code block"):
        extract_module("```python\nimport jax\n\ndef computation(x):\n    return pl.pallas_call(\n        kern")


def test_truncated_but_complete_enough_module_is_used():
    assert extract_module(f"```python\n{MODULE}") == MODULE


def test_json_extraction():
    assert extract_json('plan\n```json\n{"tiling": "512", "parameters": {"B": 1}}\n```') == {
        "tiling": "512", "parameters": {"B": 1}}
    assert extract_json('inline {"a": 1} here') == {"a": 1}
    assert extract_json("nothing") is None


def test_a_kernelbench_answer_defining_modelnew_is_a_module():
    answer = "import jax\n\nclass ModelNew:\n    def forward(self, x):\n        return x\n"
    reference = "class Model:\n    def forward(self, x):\n        return x\n"
    text = f"The reference:\n```python\n{reference}```\nMy kernel:\n```python\n{answer}```"
    assert extract_module(text) == answer
